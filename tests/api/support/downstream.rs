//! A real HTTP server standing for the downstream service that applies
//! effects: it counts calls and records their Idempotency-Key headers, and
//! answers what became of a key at `GET /effects/{key}` (applied, else 404).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};

/// How the downstream answers.
#[derive(Clone, Copy)]
pub enum Behaviour {
    /// Applies, then answers 201 after this delay.
    Apply { delay_ms: u64 },
    /// Works for `delay_ms` before it applies, then answers 201: its status
    /// URL knows the key only once it applied.
    ApplyLate { delay_ms: u64 },
    /// Applies, then never answers in time (the caller times out).
    ApplyThenHang,
    /// As `ApplyThenHang`; its status URL names the effect by this `id`.
    ApplyThenHangAt(&'static str),
    /// Refuses without applying.
    Refuse(u16),
    /// Applies the first call and answers 201; refuses every later one
    /// with `status` after `delay_ms`, applying nothing.
    ApplyOnceThenRefuse { status: u16, delay_ms: u64 },
    /// The first call never answers in time and applies nothing; later
    /// calls apply and answer 201.
    HangOnceWithoutApplying,
    /// The first call never answers in time and applies nothing; later
    /// calls work for `delay_ms` before they apply and answer 201.
    HangOnceThenApplyLate { delay_ms: u64 },
    /// Applies, then answers 201 with this `Location`.
    ApplyAt(&'static str),
    /// Applies, then answers 201 with this body, as JSON.
    ApplyAnswering(&'static str),
    /// Applies nothing, and answers 200 with this body, as JSON (an error
    /// said in the body).
    AnswerWithoutApplying(&'static str),
    /// Answers with this redirect status to `/landing`, a page that answers
    /// 200 to any GET (and counts as a call when fetched).
    Redirect(u16),
}

#[derive(Clone)]
pub struct Downstream {
    pub url: String,
    calls: Arc<Mutex<Vec<String>>>,
    applied: Arc<Mutex<Vec<String>>>,
    /// The JSON body of every effect call, in order.
    bodies: Arc<Mutex<Vec<serde_json::Value>>>,
    /// Effect calls being answered now, and the most there ever were.
    in_flight: Arc<(AtomicUsize, AtomicUsize)>,
    /// Calls refused for lacking the credential (`start_guarded`).
    unauthorized: Arc<AtomicUsize>,
}

/// The header a guarded downstream asks for, and its value.
type Guard = Option<(&'static str, &'static str)>;

/// Whether `request` carries what `guard` asks for; counted when not.
fn admitted(request: &HttpRequest, guard: Guard, refused: &AtomicUsize) -> bool {
    let Some((header, value)) = guard else {
        return true;
    };
    let carried = request.headers().get(header).and_then(|v| v.to_str().ok());
    if carried == Some(value) {
        return true;
    }
    refused.fetch_add(1, Ordering::SeqCst);
    false
}

impl Downstream {
    pub async fn start(behaviour: Behaviour) -> Self {
        Self::start_with(behaviour, None).await
    }

    /// A downstream that answers 401 to any call, the effect's or its
    /// status question, without `header: value`.
    pub async fn start_guarded(
        behaviour: Behaviour,
        header: &'static str,
        value: &'static str,
    ) -> Self {
        Self::start_with(behaviour, Some((header, value))).await
    }

    /// Calls refused for lacking the credential.
    pub fn unauthorized(&self) -> usize {
        self.unauthorized.load(Ordering::SeqCst)
    }

    async fn start_with(behaviour: Behaviour, guard: Guard) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let applied = Arc::new(Mutex::new(Vec::new()));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let in_flight = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let (recorded, done, sent) = (calls.clone(), applied.clone(), bodies.clone());
        let counted = in_flight.clone();
        let unauthorized = Arc::new(AtomicUsize::new(0));
        let refused = unauthorized.clone();
        let server = HttpServer::new(move || {
            let (recorded, done, sent) = (recorded.clone(), done.clone(), sent.clone());
            let counted = counted.clone();
            let (refused, asked) = (refused.clone(), refused.clone());
            let known = done.clone();
            let landed = recorded.clone();
            App::new()
                .route(
                    "/effects",
                    web::post().to(move |request: HttpRequest, body: web::Bytes| {
                        let (recorded, done) = (recorded.clone(), done.clone());
                        let admitted = admitted(&request, guard, &refused);
                        let parsed = serde_json::from_slice(&body).unwrap_or_default();
                        sent.lock().expect("bodies").push(parsed);
                        let counted = counted.clone();
                        async move {
                            if !admitted {
                                return HttpResponse::Unauthorized().finish();
                            }
                            let now = counted.0.fetch_add(1, Ordering::SeqCst) + 1;
                            counted.1.fetch_max(now, Ordering::SeqCst);
                            let answered = answer(request, behaviour, recorded, done).await;
                            counted.0.fetch_sub(1, Ordering::SeqCst);
                            answered
                        }
                    }),
                )
                .route(
                    "/landing",
                    web::get().to({
                        move || {
                            let recorded = landed.clone();
                            async move {
                                recorded
                                    .lock()
                                    .expect("calls")
                                    .push("GET /landing".to_owned());
                                HttpResponse::Ok().json(serde_json::json!({ "data": [] }))
                            }
                        }
                    }),
                )
                .route(
                    "/effects/{key}",
                    web::get().to(move |request: HttpRequest, key: web::Path<String>| {
                        let known = known.clone();
                        let admitted = admitted(&request, guard, &asked);
                        async move {
                            if !admitted {
                                return HttpResponse::Unauthorized().finish();
                            }
                            if known.lock().expect("applied").contains(&key) {
                                let mut answer = serde_json::json!({"status": "applied"});
                                if let Behaviour::ApplyThenHangAt(id) = behaviour {
                                    answer["id"] = id.into();
                                }
                                HttpResponse::Ok().json(answer)
                            } else {
                                HttpResponse::NotFound().finish()
                            }
                        }
                    }),
                )
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .expect("downstream binds");
        let port = server.addrs()[0].port();
        tokio::spawn(server.run());
        Self {
            url: format!("http://127.0.0.1:{port}/effects"),
            calls,
            applied,
            bodies,
            in_flight,
            unauthorized,
        }
    }

    /// The most effect calls it was ever answering at once.
    pub fn most_at_once(&self) -> usize {
        self.in_flight.1.load(Ordering::SeqCst)
    }

    /// The JSON body of every effect call received, in order.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.bodies.lock().expect("bodies").clone()
    }

    /// Keys of the effects applied, in order.
    pub fn applied(&self) -> Vec<String> {
        self.applied.lock().expect("applied").clone()
    }

    /// The `[[sinks]]` table routing every effect here, with the status URL
    /// (a 404 meaning never applied).
    pub fn sink_toml_with_status(&self, timeout_ms: u64) -> String {
        format!(
            "{}status_url = \"{}/{{idempotency_key}}\"\nstatus_not_found = \"failed\"\n",
            self.sink_toml(timeout_ms),
            self.url
        )
    }

    /// Idempotency keys of every call received, in order.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("calls").clone()
    }

    /// Waits until exactly `n` calls arrived (fails after 10 s).
    pub async fn wait_calls(&self, n: usize) {
        for _ in 0..200 {
            if self.calls().len() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("expected {n} downstream calls, got {}", self.calls().len());
    }

    /// The `[[sinks]]` table routing every effect here.
    pub fn sink_toml(&self, timeout_ms: u64) -> String {
        format!(
            "[[sinks]]\nkind = \"http\"\nurl = \"{}\"\ntimeout_ms = {timeout_ms}\n",
            self.url
        )
    }
}

async fn answer(
    request: HttpRequest,
    behaviour: Behaviour,
    calls: Arc<Mutex<Vec<String>>>,
    applied: Arc<Mutex<Vec<String>>>,
) -> HttpResponse {
    let key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let apply = || {
        applied
            .lock()
            .expect("applied")
            .push(key.trim_matches('"').to_owned())
    };
    match behaviour {
        Behaviour::ApplyAt(location) => {
            calls.lock().expect("calls").push(key.clone());
            apply();
            HttpResponse::Created()
                .insert_header(("location", location))
                .finish()
        }
        Behaviour::ApplyAnswering(body) => {
            calls.lock().expect("calls").push(key.clone());
            apply();
            HttpResponse::Created()
                .content_type("application/json")
                .body(body)
        }
        Behaviour::AnswerWithoutApplying(body) => {
            calls.lock().expect("calls").push(key.clone());
            HttpResponse::Ok()
                .content_type("application/json")
                .body(body)
        }
        Behaviour::Redirect(status) => {
            calls.lock().expect("calls").push(key);
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).expect("status"))
                .insert_header(("location", "/landing"))
                .finish()
        }
        Behaviour::ApplyOnceThenRefuse { status, delay_ms } => {
            let first = {
                let mut calls = calls.lock().expect("calls");
                calls.push(key.clone());
                calls.len() == 1
            };
            if first {
                apply();
                return HttpResponse::Created().json(serde_json::json!({ "id": "rf_1" }));
            }
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).expect("status"))
                .finish()
        }
        Behaviour::Refuse(status) => {
            calls.lock().expect("calls").push(key);
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).expect("status"))
                .finish()
        }
        Behaviour::Apply { delay_ms } => {
            calls.lock().expect("calls").push(key.clone());
            apply();
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            HttpResponse::Created().json(
                serde_json::json!({ "id": format!("rf_{}", calls.lock().expect("calls").len()) }),
            )
        }
        Behaviour::ApplyLate { delay_ms } => {
            calls.lock().expect("calls").push(key.clone());
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            apply();
            HttpResponse::Created().finish()
        }
        Behaviour::ApplyThenHang | Behaviour::ApplyThenHangAt(_) => {
            calls.lock().expect("calls").push(key.clone());
            apply();
            tokio::time::sleep(Duration::from_secs(30)).await;
            HttpResponse::Created().finish()
        }
        Behaviour::HangOnceWithoutApplying | Behaviour::HangOnceThenApplyLate { .. } => {
            let first = {
                let mut calls = calls.lock().expect("calls");
                calls.push(key.clone());
                calls.len() == 1
            };
            if first {
                tokio::time::sleep(Duration::from_secs(30)).await;
                return HttpResponse::ServiceUnavailable().finish();
            }
            if let Behaviour::HangOnceThenApplyLate { delay_ms } = behaviour {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            }
            apply();
            HttpResponse::Created().json(serde_json::json!({ "id": "rf_retried" }))
        }
    }
}
