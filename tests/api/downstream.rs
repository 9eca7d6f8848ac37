//! A real HTTP server standing for the downstream service that applies
//! effects: it counts calls and records their Idempotency-Key headers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};

/// How the downstream answers.
#[derive(Clone, Copy)]
pub enum Behaviour {
    /// Applies, then answers 201 after this delay.
    Apply { delay_ms: u64 },
    /// Applies, then never answers in time (the caller times out).
    ApplyThenHang,
    /// Refuses without applying.
    Refuse(u16),
}

#[derive(Clone)]
pub struct Downstream {
    pub url: String,
    calls: Arc<Mutex<Vec<String>>>,
}

impl Downstream {
    pub async fn start(behaviour: Behaviour) -> Self {
        let calls = Arc::new(Mutex::new(Vec::new()));
        let recorded = calls.clone();
        let server = HttpServer::new(move || {
            let recorded = recorded.clone();
            App::new().route(
                "/effects",
                web::post().to(move |request: HttpRequest, _body: web::Bytes| {
                    let recorded = recorded.clone();
                    async move { answer(request, behaviour, recorded).await }
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
        }
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
) -> HttpResponse {
    let key = request
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    match behaviour {
        Behaviour::Refuse(status) => {
            calls.lock().expect("calls").push(key);
            HttpResponse::build(actix_web::http::StatusCode::from_u16(status).expect("status"))
                .finish()
        }
        Behaviour::Apply { delay_ms } => {
            calls.lock().expect("calls").push(key.clone());
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            HttpResponse::Created().json(
                serde_json::json!({ "id": format!("rf_{}", calls.lock().expect("calls").len()) }),
            )
        }
        Behaviour::ApplyThenHang => {
            calls.lock().expect("calls").push(key);
            tokio::time::sleep(Duration::from_secs(30)).await;
            HttpResponse::Created().finish()
        }
    }
}
