//! Asking the downstream what became of an effect whose outcome is unknown
//! (a timeout or a reset after the request was sent). An http sink may
//! declare a status URL keyed by the Idempotency-Key it sent:
//!
//! ```toml
//! [[sinks]]
//! kind = "http"
//! url = "https://ledger.internal/effects"
//! status_url = "https://ledger.internal/effects/{idempotency_key}"
//! status_path = "$.status"         # where the state is in the answer
//! status_applied = ["applied"]     # states meaning applied
//! status_failed = ["failed"]       # states meaning never applied
//! status_not_found = "failed"      # what a 404 means (default "unknown")
//! ```
//!
//! The answer is only read here; what it settles is `services::status`'s.
//! Anything not clearly applied or clearly not applied is `unknown`.

use std::time::{Duration, Instant};

use serde_json::Value;
use serde_json_path::JsonPath;

use super::lookup::encode;
use super::sinks::SinkKind;
pub use super::sinks::StatusMeaning;

/// One status question and its answer, journaled as is.
#[derive(Debug, Clone)]
pub struct StatusAnswer {
    /// The URL asked (no secret in it).
    pub url: String,
    pub status: Option<u16>,
    pub latency_ms: u64,
    pub meaning: Result<StatusMeaning, String>,
    /// The downstream's own reference for the effect, when its answer has one (`id`).
    pub reference: Option<String>,
}

/// Checks a sink's status settings at start-up.
pub fn check(sink: &SinkKind) -> anyhow::Result<()> {
    if let SinkKind::Http {
        answer_path: Some(path),
        ..
    } = sink
    {
        JsonPath::parse(path).map_err(|e| anyhow::anyhow!("sink answer_path {path:?}: {e}"))?;
    }
    if let SinkKind::Http {
        status_url: Some(url),
        status_path,
        ..
    } = sink
    {
        if !url.contains("{idempotency_key}") {
            anyhow::bail!(
                "sink status_url {} must contain {{idempotency_key}}",
                super::sinks::shown(url)
            );
        }
        JsonPath::parse(status_path)
            .map_err(|e| anyhow::anyhow!("sink status_path {status_path:?}: {e}"))?;
    }
    Ok(())
}

/// Asks `sink`'s status URL about the effect sent with `idempotency_key`;
/// `None` when the sink declares none.
pub async fn ask(
    client: &reqwest::Client,
    sink: &SinkKind,
    idempotency_key: &str,
) -> Option<StatusAnswer> {
    let SinkKind::Http {
        status_url: Some(template),
        status_path,
        status_applied,
        status_failed,
        status_not_found,
        status_timeout_ms,
        ..
    } = sink
    else {
        return None;
    };
    let url = template.replace("{idempotency_key}", &encode(idempotency_key));
    let started = Instant::now();
    let response = super::sinks::authorized(client.get(&url), sink)
        .timeout(Duration::from_millis((*status_timeout_ms).max(1)))
        .send()
        .await;
    let latency_ms = started.elapsed().as_millis() as u64;
    let mut answer = StatusAnswer {
        url,
        status: None,
        latency_ms,
        meaning: Err(String::new()),
        reference: None,
    };
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            answer.meaning = Err(format!("request failed: {}", error.without_url()));
            return Some(answer);
        }
    };
    let status = response.status();
    answer.status = Some(status.as_u16());
    answer.meaning = if status == reqwest::StatusCode::NOT_FOUND {
        Ok(*status_not_found)
    } else if !status.is_success() {
        Err(format!("the downstream answered {status}"))
    } else {
        match super::answer::json(response, 64 * 1024).await {
            Err(unread) => Err(format!("unreadable answer: {unread}")),
            Ok(body) => {
                let body = body.unwrap_or(Value::Null);
                answer.reference = body.get("id").and_then(Value::as_str).map(str::to_owned);
                Ok(meaning(&body, status_path, status_applied, status_failed))
            }
        }
    };
    Some(answer)
}

/// The state at `path` in `body`, read through the sink's lists.
pub(super) fn meaning(
    body: &Value,
    path: &str,
    applied: &[String],
    failed: &[String],
) -> StatusMeaning {
    let state = JsonPath::parse(path)
        .ok()
        .and_then(|p| p.query(body).first().cloned())
        .and_then(|v| v.as_str().map(str::to_owned));
    match state {
        Some(s) if applied.contains(&s) => StatusMeaning::Applied,
        Some(s) if failed.contains(&s) => StatusMeaning::Failed,
        _ => StatusMeaning::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_state_is_applied_or_failed_only_when_listed_so() {
        let applied = ["applied".to_owned(), "succeeded".to_owned()];
        let failed = ["failed".to_owned()];
        let read = |body| meaning(&body, "$.effect.state", &applied, &failed);
        assert_eq!(
            read(json!({"effect": {"state": "succeeded"}})),
            StatusMeaning::Applied
        );
        assert_eq!(
            read(json!({"effect": {"state": "failed"}})),
            StatusMeaning::Failed
        );
        assert_eq!(
            read(json!({"effect": {"state": "processing"}})),
            StatusMeaning::Unknown
        );
        assert_eq!(read(json!({"state": "applied"})), StatusMeaning::Unknown);
    }

    #[test]
    fn a_status_url_must_name_the_key_and_its_path_must_parse() {
        let sink = |url: &str, path: &str| SinkKind::Http {
            url: "http://d/effects".into(),
            timeout_ms: 1,
            status_url: Some(url.into()),
            status_path: path.into(),
            status_applied: vec![],
            status_failed: vec![],
            status_not_found: StatusMeaning::Unknown,
            status_timeout_ms: 1,
            answer_path: None,
            answer_applied: vec![],
            answer_failed: vec![],
            auth_env: None,
            auth_header: None,
            auth: None,
        };
        assert!(check(&sink("http://d/effects/{idempotency_key}", "$.status")).is_ok());
        assert!(check(&sink("http://d/effects", "$.status")).is_err());
        let secret = check(&sink("https://u:pw@d/effects?token=s3cr3t", "$.status"));
        let said = secret.unwrap_err().to_string();
        assert!(!said.contains("s3cr3t") && !said.contains("pw@"), "{said}");
        assert!(check(&sink("http://d/effects/{idempotency_key}", "status[")).is_err());
    }
}
