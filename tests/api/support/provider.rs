//! Real HTTP servers standing for a provider's API, with the `[[lookups]]`
//! table that reads each. `Provider` is the simulator's
//! (`unicity::simulate::servers`): a provider that lists the operations it
//! made — by resource (`GET /payments/{id}/refunds`) and by time window, a
//! page at a time (`GET /refunds?from=…&to=…[&cursor=N]`). `ProviderApi`
//! answers whatever body and status a test gives it, and counts the
//! questions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::{App, HttpResponse, HttpServer, web};
use chrono::{DateTime, Utc};
use serde_json::Value;
use unicity::simulate::servers::{self, ProviderState};

pub struct Provider {
    pub url: String,
    state: Arc<ProviderState>,
}

/// One refund the provider made: (id, payment, amount, when).
pub type Refund<'a> = (&'a str, &'a str, u64, DateTime<Utc>);

impl Provider {
    /// Serves `refunds`, `page_size` per page of a window listing.
    pub async fn start(refunds: &[Refund<'_>], page_size: usize) -> Self {
        let state = Arc::new(ProviderState::with_page(page_size));
        for (id, payment, amount, at) in refunds {
            state.made_at(id, payment, *amount, *at);
        }
        let port = servers::provider("127.0.0.1:0", state.clone()).expect("provider binds");
        Self {
            url: format!("http://127.0.0.1:{port}"),
            state,
        }
    }

    /// Pages of window listings served so far.
    pub fn pages(&self) -> u64 {
        *self.state.pages.lock().expect("pages")
    }

    /// The look-up reading this provider, and no periodic run (tests run
    /// reconciliation themselves).
    pub fn lookup_toml(&self) -> String {
        lookup_toml(&self.url)
    }
}

/// The look-up reading a provider API at `url`, and no periodic run.
pub fn lookup_toml(url: &str) -> String {
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
"#
    )
}

/// A test server standing for the provider's API: it lists the refunds of
/// the payment asked for (`/payments/{payment}/refunds`), or every refund
/// of every payment (`/refunds`), with `status` (after `outage` answers of
/// 503), and counts the questions.
pub struct ProviderApi {
    pub url: String,
    pub asked: Arc<AtomicUsize>,
    /// Paths asked, in order.
    pub paths: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ProviderApi {
    pub async fn start(status: u16, body: Value) -> Self {
        Self::start_after(0, status, body).await
    }

    pub async fn start_after(outage: usize, status: u16, body: Value) -> Self {
        let asked = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (counted, logged) = (asked.clone(), paths.clone());
        let server = HttpServer::new(move || {
            let counted = counted.clone();
            let logged = logged.clone();
            let body = body.clone();
            App::new().default_service(web::to(move |request: actix_web::HttpRequest| {
                let n = counted.fetch_add(1, Ordering::SeqCst);
                let path = request.path().to_owned();
                logged.lock().expect("paths").push(path.clone());
                let mut body = body.clone();
                // `/payments/{payment}/refunds`: only that payment's refunds.
                let segments: Vec<&str> = path.split('/').collect();
                if let ["", "payments", payment, "refunds"] = segments.as_slice()
                    && let Some(list) = body["refunds"].as_array_mut()
                {
                    list.retain(|r| r["payment_id"] == *payment);
                }
                let status = if n < outage { 503 } else { status };
                async move {
                    HttpResponse::build(
                        actix_web::http::StatusCode::from_u16(status).expect("status"),
                    )
                    .json(body)
                }
            }))
        })
        .workers(1)
        .bind("127.0.0.1:0")
        .expect("provider binds");
        let port = server.addrs()[0].port();
        tokio::spawn(server.run());
        Self {
            url: format!("http://127.0.0.1:{port}"),
            asked,
            paths,
        }
    }

    /// A look-up of the payment's refunds that compares the fingerprint
    /// strategy's discriminants (payment, amount, currency).
    pub fn config(&self) -> String {
        self.config_with(
            "/payments/{payment_id}/refunds",
            "payment = \"resource\"\namount = \"amount\"\ncurrency = \"currency\"\n",
        )
    }

    /// A look-up asking `path` (`{field}` filled from the delivery) and
    /// comparing discriminants as `compare` (TOML lines) says.
    pub fn config_with(&self, path: &str, compare: &str) -> String {
        format!(
            r#"
[[lookups]]
provider = "norefid"
effect_type = "refund.*"
url = "{}{path}"
operations = "$.refunds[*]"
id = "$.id"
amount = "$.amount"
currency = "$.currency"
status = "$.status"
resource = "$.payment_id"
effect_resource = "payment_id"
timeout_ms = 2000

[lookups.compare]
{compare}
"#,
            self.url
        )
    }
}
