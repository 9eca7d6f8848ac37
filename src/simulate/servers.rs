//! The two loopback servers of `unicity simulate`: the provider's API (the
//! operations it really made, by payment and by time window, a page at a
//! time; down for a while at the start) and the downstream ledger (applies
//! an effect once per Idempotency-Key, answers for a key, and for some
//! payments applies then answers too late).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// Operations per page of a window listing, by default.
const PAGE: usize = 50;

/// What the provider made and how its API behaves.
pub struct ProviderState {
    operations: Mutex<Vec<Value>>,
    down_until: Mutex<Option<Instant>>,
    page: usize,
    /// Questions answered and refused (outage).
    pub asked: Mutex<(u64, u64)>,
    /// Pages of window listings served.
    pub pages: Mutex<u64>,
}

impl Default for ProviderState {
    fn default() -> Self {
        Self::with_page(PAGE)
    }
}

impl ProviderState {
    /// A provider listing `page` operations per page of a window.
    pub fn with_page(page: usize) -> Self {
        Self {
            operations: Mutex::default(),
            down_until: Mutex::default(),
            page: page.max(1),
            asked: Mutex::default(),
            pages: Mutex::default(),
        }
    }

    /// Records a refund the provider made now.
    pub fn made(&self, id: &str, payment: &str, amount: u64) {
        self.made_at(id, payment, amount, Utc::now());
    }

    /// Records a refund the provider made at `at`.
    pub fn made_at(&self, id: &str, payment: &str, amount: u64, at: DateTime<Utc>) {
        let op = json!({
            "id": id, "payment_id": payment, "amount": amount, "currency": "EUR",
            "status": "succeeded", "created_at": at.to_rfc3339(),
        });
        lock(&self.operations).push(op);
    }

    pub fn operations(&self) -> usize {
        lock(&self.operations).len()
    }

    /// The API answers 503 for `outage` from now.
    pub fn outage(&self, outage: Duration) {
        *lock(&self.down_until) = Some(Instant::now() + outage);
    }

    fn down(&self) -> bool {
        let down = lock(&self.down_until).is_some_and(|until| Instant::now() < until);
        let mut asked = lock(&self.asked);
        if down {
            asked.1 += 1
        } else {
            asked.0 += 1
        }
        down
    }
}

/// One effect the downstream applied.
#[derive(Debug, Clone)]
pub struct Applied {
    pub id: String,
    pub payment: String,
}

/// The downstream ledger: one effect per Idempotency-Key.
#[derive(Default)]
pub struct DownstreamState {
    effects: Mutex<HashMap<String, Applied>>,
    pub calls: Mutex<u64>,
    /// Payments whose first effect is applied, then answered too late.
    pub slow: Mutex<HashSet<String>>,
}

impl DownstreamState {
    pub fn applied(&self) -> Vec<Applied> {
        lock(&self.effects).values().cloned().collect()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A resource's operations, a page at a time.
#[derive(serde::Deserialize)]
struct Paged {
    cursor: Option<usize>,
}

#[derive(serde::Deserialize)]
struct Window {
    from: String,
    to: String,
    cursor: Option<usize>,
}

/// Starts the provider's API on `listen`; returns the port it listens on.
pub fn provider(listen: &str, state: Arc<ProviderState>) -> anyhow::Result<u16> {
    let server = HttpServer::new(move || {
        let (listing, by_payment) = (state.clone(), state.clone());
        App::new()
            .route(
                "/refunds",
                web::get().to(move |window: web::Query<Window>| {
                    let state = listing.clone();
                    async move {
                        if state.down() {
                            return HttpResponse::ServiceUnavailable().finish();
                        }
                        *lock(&state.pages) += 1;
                        let operations = lock(&state.operations);
                        HttpResponse::Ok().json(page(&operations, &window, state.page))
                    }
                }),
            )
            .route(
                "/payments/{payment}/refunds",
                web::get().to(
                    move |payment: web::Path<String>, paged: web::Query<Paged>| {
                        let state = by_payment.clone();
                        async move {
                            if state.down() {
                                return HttpResponse::ServiceUnavailable().finish();
                            }
                            let operations = lock(&state.operations);
                            let of_payment: Vec<&Value> = (operations.iter())
                                .filter(|op| op["payment_id"] == payment.as_str())
                                .collect();
                            HttpResponse::Ok().json(slice(&of_payment, paged.cursor, state.page))
                        }
                    },
                ),
            )
    })
    .workers(2)
    .disable_signals()
    .bind(listen)
    .map_err(|e| anyhow::anyhow!("the provider's API cannot listen on {listen}: {e}"))?;
    let port = server.addrs().first().map_or(0, |a| a.port());
    tokio::spawn(server.run());
    Ok(port)
}

fn page(operations: &[Value], window: &Window, size: usize) -> Value {
    let instant = |text: &str| DateTime::parse_from_rfc3339(text).ok();
    let (from, to) = (instant(&window.from), instant(&window.to));
    let within: Vec<&Value> = operations
        .iter()
        .filter(|op| {
            let at = op["created_at"].as_str().and_then(instant);
            at >= from && at < to
        })
        .collect();
    slice(&within, window.cursor, size)
}

/// The page of `operations` from `cursor`, and the next page's cursor.
fn slice(operations: &[&Value], cursor: Option<usize>, size: usize) -> Value {
    let start = cursor.unwrap_or(0).min(operations.len());
    let end = (start + size).min(operations.len());
    json!({
        "data": &operations[start..end],
        "next_cursor": (end < operations.len()).then(|| end.to_string()),
    })
}

/// Starts the downstream ledger on `listen`; a slow payment's first effect
/// is answered after `late`.
pub fn downstream(listen: &str, state: Arc<DownstreamState>, late: Duration) -> anyhow::Result<()> {
    let server = HttpServer::new(move || {
        let (applying, asking) = (state.clone(), state.clone());
        App::new()
            .route(
                "/effects",
                web::post().to(move |request: HttpRequest, body: web::Json<Value>| {
                    let state = applying.clone();
                    async move { apply(&state, &request, &body, late).await }
                }),
            )
            .route(
                "/effects/{key}",
                web::get().to(move |key: web::Path<String>| {
                    let state = asking.clone();
                    async move {
                        match lock(&state.effects).get(key.as_str()) {
                            Some(effect) => HttpResponse::Ok()
                                .json(json!({ "status": "applied", "id": effect.id })),
                            None => HttpResponse::NotFound().finish(),
                        }
                    }
                }),
            )
    })
    .workers(2)
    .disable_signals()
    .bind(listen)
    .map_err(|e| anyhow::anyhow!("the downstream cannot listen on {listen}: {e}"))?;
    tokio::spawn(server.run());
    Ok(())
}

async fn apply(
    state: &DownstreamState,
    request: &HttpRequest,
    body: &Value,
    late: Duration,
) -> HttpResponse {
    *lock(&state.calls) += 1;
    let Some(key) = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim_matches('"').to_owned())
    else {
        return HttpResponse::BadRequest().finish();
    };
    let payment = body["event"]["payment_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let (effect, fresh) = {
        let mut effects = lock(&state.effects);
        let count = effects.len();
        let fresh = !effects.contains_key(&key);
        let effect = effects
            .entry(key)
            .or_insert_with(|| Applied {
                id: format!("fx_{}", count + 1),
                payment: payment.clone(),
            })
            .clone();
        (effect, fresh)
    };
    if fresh && lock(&state.slow).remove(&payment) {
        tokio::time::sleep(late).await;
    }
    HttpResponse::Created().json(json!({ "id": effect.id }))
}
