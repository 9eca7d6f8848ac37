//! Effect sinks: where an effect is applied once its key is reserved.
//!
//! `record` only writes the effects ledger. `http` POSTs to a downstream service
//! with an `Idempotency-Key` header carrying the business key (IETF
//! httpapi-idempotency-key-header draft: a quoted structured-field string), so
//! the downstream can deduplicate too. The call never runs inside a database
//! transaction. Its outcome is classified conservatively: only a 2xx is
//! `applied`; only a refusal known to have had no effect is `failed`; anything
//! that may have reached the downstream (timeout, reset, 5xx) is `unknown` and
//! goes to reconciliation, never to a blind retry.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::domain::identity::pattern;
use crate::domain::plan;

/// What the downstream says became of an effect.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusMeaning {
    Applied,
    Failed,
    #[default]
    Unknown,
}

impl StatusMeaning {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Failed => "failed",
            Self::Unknown => "unknown",
        }
    }
}

/// One `[[sinks]]` table; the first that matches an effect is used, else `record`.
/// (serde cannot deny unknown fields next to a flattened enum.)
#[derive(Debug, Clone, Deserialize)]
pub struct SinkConfig {
    /// Effect type pattern (`*` wildcard), e.g. `refund.*`.
    #[serde(default = "any")]
    pub effect_type: String,
    /// Only for this source, when set.
    #[serde(default)]
    pub source: Option<String>,
    #[serde(flatten)]
    pub kind: SinkKind,
}

fn any() -> String {
    "*".to_owned()
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(
    clippy::large_enum_variant,
    reason = "one per configured sink, read in place by reference; never moved on a hot path"
)]
pub enum SinkKind {
    Record,
    Http {
        url: String,
        #[serde(default = "default_timeout_ms")]
        timeout_ms: u64,
        /// Where the downstream says what became of an effect whose outcome
        /// is unknown, by its Idempotency-Key: a URL template with
        /// `{idempotency_key}` (see `providers::status`).
        #[serde(default)]
        status_url: Option<String>,
        /// JSONPath to the effect's state in the status answer.
        #[serde(default = "default_status_path")]
        status_path: String,
        /// States that mean applied.
        #[serde(default = "default_applied")]
        status_applied: Vec<String>,
        /// States that mean not applied (safe to apply again).
        #[serde(default = "default_failed")]
        status_failed: Vec<String>,
        /// What a 404 from the status URL means: `failed` when the downstream
        /// records every key it receives before acting on it, else `unknown`.
        #[serde(default)]
        status_not_found: StatusMeaning,
        #[serde(default = "default_status_timeout_ms")]
        status_timeout_ms: u64,
        /// Where a 2xx answer says what became of the effect (a JSONPath,
        /// its state judged by `answer_applied` and `answer_failed`): for
        /// a downstream that answers 200 with an error in its body. A state
        /// neither lists, or no readable answer, is unknown. Unset: a 2xx
        /// is applied.
        #[serde(default)]
        answer_path: Option<String>,
        /// States at `answer_path` that mean applied.
        #[serde(default = "default_applied")]
        answer_applied: Vec<String>,
        /// States at `answer_path` that mean never applied, safe to send
        /// again: none unless listed, as a synchronous "failed" can hide an
        /// effect the downstream still has under way.
        #[serde(default)]
        answer_failed: Vec<String>,
        /// The environment variable holding the downstream's credential,
        /// sent with every call (the effect and its status question).
        #[serde(default)]
        auth_env: Option<String>,
        /// The header the credential goes in: `Authorization` as
        /// `Bearer <credential>` when unset, else this header with the
        /// credential as it is (`X-Api-Key`).
        #[serde(default)]
        auth_header: Option<String>,
        /// The credential, read from `auth_env` as the settings load.
        #[serde(skip)]
        auth: Option<Box<Credential>>,
    },
}

/// `url` as a message may show it: without a user, a password, a query
/// or a fragment, which may hold a credential.
pub(crate) fn shown(url: &str) -> String {
    match reqwest::Url::parse(&url.replace("{idempotency_key}", "KEY")) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string().replace("KEY", "{idempotency_key}")
        }
        Err(_) => "(a url that does not parse)".to_owned(),
    }
}

/// The scheme, host and port `url` is served from.
fn origin(url: &str) -> Option<String> {
    reqwest::Url::parse(&url.replace("{idempotency_key}", "KEY"))
        .ok()
        .map(|u| u.origin().ascii_serialization())
}

/// A downstream's credential and the header it is sent in; never shown.
#[derive(Clone)]
pub struct Credential {
    header: reqwest::header::HeaderName,
    value: reqwest::header::HeaderValue,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}: [redacted])", self.header)
    }
}

impl PartialEq for Credential {
    fn eq(&self, other: &Self) -> bool {
        self.header == other.header && self.value == other.value
    }
}

impl Eq for Credential {}

impl Credential {
    /// The credential `value` in `header` (`None`: `Authorization`, as a
    /// bearer token). Refused, without showing it, when it cannot be a
    /// header's value.
    pub fn new(header: Option<&str>, value: &str) -> anyhow::Result<Self> {
        use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
        let (header, value) = match header {
            None => (AUTHORIZATION, format!("Bearer {value}")),
            Some(name) => (
                HeaderName::from_bytes(name.as_bytes())
                    .map_err(|_| anyhow::anyhow!("auth_header {name:?} is not a header name"))?,
                value.to_owned(),
            ),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| {
            anyhow::anyhow!("the credential holds characters a header cannot carry")
        })?;
        value.set_sensitive(true);
        Ok(Self { header, value })
    }
}

/// `request` carrying `sink`'s credential, if it has one.
pub fn authorized(request: reqwest::RequestBuilder, sink: &SinkKind) -> reqwest::RequestBuilder {
    match sink {
        SinkKind::Http {
            auth: Some(credential),
            ..
        } => request.header(credential.header.clone(), credential.value.clone()),
        _ => request,
    }
}

fn default_timeout_ms() -> u64 {
    5000
}

fn default_status_path() -> String {
    "$.status".to_owned()
}

fn default_applied() -> Vec<String> {
    vec!["applied".to_owned()]
}

fn default_failed() -> Vec<String> {
    vec!["failed".to_owned()]
}

fn default_status_timeout_ms() -> u64 {
    2000
}

impl SinkKind {
    /// Reads the credential `auth_env` names; refused when it is unset,
    /// empty or no header value, naming the variable, never the value.
    pub fn read_credential(&mut self, env: &impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        let SinkKind::Http {
            url,
            status_url,
            auth_env,
            auth_header,
            auth,
            ..
        } = self
        else {
            return Ok(());
        };
        let url = &shown(url);
        let Some(name) = auth_env else {
            if auth_header.is_some() {
                anyhow::bail!("sink {url}: auth_header needs auth_env, the credential's variable");
            }
            return Ok(());
        };
        let value = env(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| anyhow::anyhow!("sink {url}: {name} is unset or empty"))?;
        if let Some(status_url) = status_url
            && origin(status_url) != origin(url)
        {
            anyhow::bail!(
                "sink {url}: its status_url is on another host ({}): the credential in {name} \
                 would be sent there too; serve the status from the sink's own host",
                shown(status_url)
            );
        }
        *auth = Some(Box::new(
            Credential::new(auth_header.as_deref(), &value)
                .map_err(|e| anyhow::anyhow!("sink {url}: {name}: {e}"))?,
        ));
        Ok(())
    }

    /// The name stored in the effects ledger.
    pub fn name(&self) -> &'static str {
        match self {
            SinkKind::Record => plan::RECORD_SINK,
            SinkKind::Http { .. } => "http",
        }
    }
}

/// Picks the sink for an effect type from a source.
pub fn select<'a>(sinks: &'a [SinkConfig], source: &str, effect_type: &str) -> &'a SinkKind {
    sinks
        .iter()
        .find(|s| {
            s.source.as_deref().is_none_or(|only| only == source)
                && pattern::matches(&s.effect_type, effect_type)
        })
        .map_or(&SinkKind::Record, |s| &s.kind)
}

/// What one attempt at an effect came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    Applied {
        result: Value,
        authoritative_ref: Option<String>,
    },
    /// Refused before or without any effect: safe to try again later.
    /// `status`: the HTTP status answered, if an answer came; `answer`: a
    /// 2xx answer that said so (`answer_path`), kept as an applied one is.
    Failed {
        error: &'static str,
        status: Option<u16>,
        answer: Option<Value>,
    },
    /// Maybe applied: must be verified before any retry.
    Unknown {
        error: &'static str,
        status: Option<u16>,
        answer: Option<Value>,
    },
}

impl Attempt {
    /// The HTTP status the downstream answered, if an answer came.
    pub fn status(&self) -> Option<u16> {
        match self {
            Self::Applied { result, .. } => result
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok()),
            Self::Failed { status, .. } | Self::Unknown { status, .. } => *status,
        }
    }
}

/// Everything a sink needs to apply one effect.
#[derive(Debug, Clone)]
pub struct EffectRequest {
    pub idempotency_key: String,
    pub effect_id: uuid::Uuid,
    pub effect_type: String,
    pub delivery_id: String,
    pub source: String,
    /// The delivery's parsed body, passed to the downstream service.
    pub event: Option<Value>,
}

/// Applies the effect through `sink`.
pub async fn apply(client: &reqwest::Client, sink: &SinkKind, request: &EffectRequest) -> Attempt {
    match sink {
        SinkKind::Record => Attempt::Applied {
            result: plan::recorded(),
            authoritative_ref: None,
        },
        SinkKind::Http {
            url, timeout_ms, ..
        } => post(client, (sink, url), *timeout_ms, request).await,
    }
}

async fn post(
    client: &reqwest::Client,
    (sink, url): (&SinkKind, &str),
    timeout_ms: u64,
    request: &EffectRequest,
) -> Attempt {
    let body = json!({
        "effect_id": request.effect_id,
        "effect_type": request.effect_type,
        "delivery_id": request.delivery_id,
        "source": request.source,
        "event": request.event,
    });
    let sent = authorized(client.post(url), sink)
        .header(
            "Idempotency-Key",
            format!("\"{}\"", request.idempotency_key),
        )
        .timeout(Duration::from_millis(timeout_ms))
        .json(&body)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        // Nothing reached the downstream: no connection was made.
        Err(error) if error.is_connect() => {
            return Attempt::Failed {
                error: "downstream_unreachable",
                status: None,
                answer: None,
            };
        }
        Err(error) if error.is_timeout() => {
            return Attempt::Unknown {
                error: "downstream_timeout",
                status: None,
                answer: None,
            };
        }
        Err(_) => {
            return Attempt::Unknown {
                error: "downstream_connection_lost",
                status: None,
                answer: None,
            };
        }
    };
    classify(response, sink).await
}

/// The most of a downstream's answer kept with its effect.
const MOST_KEPT: usize = 64 * 1024;

/// A 2xx answer's body as kept in the journal, or why it is not (longer
/// than [`MOST_KEPT`], read no further; not JSON; holding U+0000, which
/// would fail the settlement's commit and leave an applied effect
/// unknown). The effect is applied either way, unless the sink reads its
/// answer (`answer_path`): one not kept then says nothing, and is unknown.
async fn answer(response: reqwest::Response) -> (Value, Option<String>) {
    match super::answer::json(response, MOST_KEPT).await {
        Ok(body) => (body.unwrap_or(Value::Null), None),
        Err(unread) => (Value::Null, Some(unread.to_string())),
    }
}

async fn classify(response: reqwest::Response, sink: &SinkKind) -> Attempt {
    let status = response.status();
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if status.is_success() {
        let (body, kept) = answer(response).await;
        // The reference is stored and searched as text: within the index's
        // bounds (`searchable`), U+0000 already refused with the body.
        let reference = location
            .or_else(|| body.get("id").and_then(Value::as_str).map(str::to_owned))
            .filter(|id| crate::domain::search::searchable(id).is_some());
        let mut result = json!({ "status": status.as_u16(), "body": body });
        if let Some(why) = kept {
            result["body_not_kept"] = json!(why);
        }
        if let Some(refused) = said_otherwise(sink, &result, status.as_u16()) {
            return refused;
        }
        return Attempt::Applied {
            result,
            authoritative_ref: reference,
        };
    }
    match status.as_u16() {
        // Sent elsewhere (never followed, see `services::engine::client`):
        // the POST reached the downstream, which may have acted before
        // pointing away.
        300..=399 => Attempt::Unknown {
            error: "downstream_redirected",
            status: Some(status.as_u16()),
            answer: None,
        },
        // In progress elsewhere, throttled, timed out on their side: maybe applied.
        408 | 409 | 425 | 429 => Attempt::Unknown {
            error: "downstream_not_settled",
            status: Some(status.as_u16()),
            answer: None,
        },
        400..=499 => Attempt::Failed {
            error: "downstream_rejected",
            status: Some(status.as_u16()),
            answer: None,
        },
        _ => Attempt::Unknown {
            error: "downstream_server_error",
            status: Some(status.as_u16()),
            answer: None,
        },
    }
}

/// What a kept 2xx answer (`result`: its status and body) says, when
/// `sink` reads it (`answer_path`) and it does not say applied: failed
/// only when its state is one of `answer_failed` (none by default: a
/// synchronous "failed" may hide an effect under way), else unknown — a
/// state neither lists, none, or a body not kept. The answer goes with it.
fn said_otherwise(sink: &SinkKind, result: &Value, status: u16) -> Option<Attempt> {
    let SinkKind::Http {
        answer_path: Some(path),
        answer_applied,
        answer_failed,
        ..
    } = sink
    else {
        return None;
    };
    let answer = Some(result.clone());
    let meaning = if result.get("body_not_kept").is_some() {
        StatusMeaning::Unknown
    } else {
        super::status::meaning(&result["body"], path, answer_applied, answer_failed)
    };
    match meaning {
        StatusMeaning::Applied => None,
        StatusMeaning::Failed => Some(Attempt::Failed {
            error: "downstream_answered_failed",
            status: Some(status),
            answer,
        }),
        StatusMeaning::Unknown => Some(Attempt::Unknown {
            error: "downstream_answer_unclear",
            status: Some(status),
            answer,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sinks() -> Vec<SinkConfig> {
        toml::from_str::<std::collections::BTreeMap<String, Vec<SinkConfig>>>(
            r#"
            [[sinks]]
            effect_type = "refund.*"
            source = "psp"
            kind = "http"
            url = "http://127.0.0.1:9/refunds"

            [[sinks]]
            effect_type = "refund.*"
            kind = "record"
            "#,
        )
        .unwrap()
        .remove("sinks")
        .unwrap()
    }

    #[test]
    fn the_first_matching_sink_wins_and_record_is_the_default() {
        let sinks = sinks();
        assert_eq!(select(&sinks, "psp", "refund.create").name(), "http");
        assert_eq!(select(&sinks, "other", "refund.create").name(), "record");
        assert_eq!(select(&sinks, "psp", "charge.capture").name(), "record");
    }

    fn sink(extra: &str) -> SinkKind {
        let text = format!("kind = \"http\"\nurl = \"http://d/effects\"\n{extra}");
        toml::from_str::<SinkConfig>(&text).expect("a sink").kind
    }

    #[test]
    fn a_credential_is_read_from_its_variable_and_never_shown() {
        crate::tls::install();
        let env = |name: &str| (name == "DOWN_KEY").then(|| "s3cr3t-value".to_owned());
        let mut bearer = sink("auth_env = \"DOWN_KEY\"");
        bearer.read_credential(&env).expect("read");
        let shown = format!("{bearer:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
        let request = authorized(reqwest::Client::new().get("http://d/x"), &bearer)
            .build()
            .unwrap();
        assert_eq!(
            request.headers()["authorization"].to_str().unwrap(),
            "Bearer s3cr3t-value"
        );
        let mut keyed = sink("auth_env = \"DOWN_KEY\"\nauth_header = \"X-Api-Key\"");
        keyed.read_credential(&env).expect("read");
        let request = authorized(reqwest::Client::new().get("http://d/x"), &keyed)
            .build()
            .unwrap();
        assert_eq!(
            request.headers()["x-api-key"].to_str().unwrap(),
            "s3cr3t-value"
        );
        assert!(!request.headers().contains_key("authorization"));
    }

    #[test]
    fn a_credential_that_cannot_be_sent_is_refused_at_start_without_showing_it() {
        let unset = sink("auth_env = \"MISSING\"").read_credential(&|_| None);
        assert!(unset.unwrap_err().to_string().contains("MISSING is unset"));
        let broken = |_: &str| Some("line\nbreak-s3cr3t".to_owned());
        let refused = sink("auth_env = \"K\"")
            .read_credential(&broken)
            .unwrap_err();
        assert!(!refused.to_string().contains("s3cr3t"), "{refused}");
        let no_env = sink("auth_header = \"X-Api-Key\"").read_credential(&|_| None);
        assert!(no_env.is_err());
        let bad_name = sink("auth_env = \"K\"\nauth_header = \"Bad Header\"")
            .read_credential(&|_| Some("v".to_owned()));
        assert!(bad_name.is_err());
    }

    #[test]
    fn a_credential_is_never_sent_to_a_status_url_on_another_host() {
        let env = |_: &str| Some("v".to_owned());
        let elsewhere = "auth_env = \"K\"\nstatus_url = \"https://reports.example/s/{idempotency_key}?t=s3cr3t\"";
        let mut kind = sink(elsewhere);
        let refused = kind.read_credential(&env).unwrap_err().to_string();
        assert!(refused.contains("another host"), "{refused}");
        assert!(!refused.contains("s3cr3t"), "{refused}");
        let mut same =
            sink("auth_env = \"K\"\nstatus_url = \"http://d/effects/{idempotency_key}\"");
        same.read_credential(&env).expect("the sink's own host");
        // Without a credential, nothing is sent anywhere that matters.
        let mut open = sink("status_url = \"https://reports.example/s/{idempotency_key}\"");
        open.read_credential(&env).expect("no credential to send");
    }
}
