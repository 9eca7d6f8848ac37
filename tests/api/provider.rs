//! A real HTTP server standing for a provider's API that lists the
//! operations it made: by resource (`GET /payments/{id}/refunds`) and by
//! time window, a page at a time (`GET /refunds?from=…&to=…[&cursor=N]`),
//! with the `[[lookups]]` table that reads it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::{App, HttpResponse, HttpServer, web};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

pub struct Provider {
    pub url: String,
    pages: Arc<AtomicUsize>,
}

/// One refund as the provider lists it.
pub fn operation(id: &str, payment: &str, amount: u64, at: DateTime<Utc>) -> Value {
    json!({
        "id": id, "payment_id": payment, "amount": amount, "currency": "EUR",
        "status": "succeeded", "created_at": at.to_rfc3339(),
    })
}

#[derive(serde::Deserialize)]
struct Window {
    from: String,
    to: String,
    cursor: Option<usize>,
}

impl Provider {
    /// Serves `operations`, `page_size` per page of a window listing.
    pub async fn start(operations: Vec<Value>, page_size: usize) -> Self {
        let pages = Arc::new(AtomicUsize::new(0));
        let (counted, ops) = (pages.clone(), Arc::new(operations));
        let server = HttpServer::new(move || {
            let (counted, listed, by_payment) = (counted.clone(), ops.clone(), ops.clone());
            App::new()
                .route(
                    "/refunds",
                    web::get().to(move |window: web::Query<Window>| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        let page = page(&listed, &window, page_size);
                        async move { HttpResponse::Ok().json(page) }
                    }),
                )
                .route(
                    "/payments/{payment}/refunds",
                    web::get().to(move |payment: web::Path<String>| {
                        let data: Vec<&Value> = by_payment
                            .iter()
                            .filter(|op| op["payment_id"] == payment.as_str())
                            .collect();
                        let body = json!({ "data": data });
                        async move { HttpResponse::Ok().json(body) }
                    }),
                )
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .expect("provider binds");
        let port = server.addrs()[0].port();
        tokio::spawn(server.run());
        Self {
            url: format!("http://127.0.0.1:{port}"),
            pages,
        }
    }

    /// Pages of window listings served so far.
    pub fn pages(&self) -> usize {
        self.pages.load(Ordering::SeqCst)
    }

    /// The look-up reading this provider, and no periodic run (tests run
    /// reconciliation themselves).
    pub fn lookup_toml(&self) -> String {
        format!(
            r#"
[[lookups]]
provider = "norefid"
effect_type = "refund.*"
url = "{url}/payments/{{payment_id}}/refunds"
operations = "$.data[*]"
id = "$.id"
amount = "$.amount"
currency = "$.currency"
status = "$.status"
resource = "$.payment_id"
created_at = "$.created_at"
list_url = "{url}/refunds?from={{from}}&to={{to}}"
cursor = "$.next_cursor"
cursor_param = "cursor"
effect_resource = "payment_id"

[reconciliation]
interval_secs = 0
"#,
            url = self.url
        )
    }
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
    let start = window.cursor.unwrap_or(0);
    let end = (start + size).min(within.len());
    json!({
        "data": within.get(start..end).unwrap_or_default(),
        "next_cursor": (end < within.len()).then(|| end.to_string()),
    })
}
