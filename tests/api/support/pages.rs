//! The queue and case pages' set-up: a test server with a downstream that
//! applies, notices beside refunds, and the cases tests open on it (a money
//! case, a notice collision); the resolution form's token.

use reqwest::StatusCode;

use super::app::{TestApp, fresh_database, refund, spawn_on};
use super::counts::Counts;
use super::downstream::{Behaviour, Downstream};
use super::forms::{FormClient, csrf_in};

/// A reversible effect beside the money ones: notices keyed by their
/// reference, discriminated by their text.
const NOTICES: &str = r#"
[[strategies]]
name = "notice-ref"
version = 1
provider = "norefid"
event_types = ["notice.*"]
kind = "business_reference"
strength = "strong"
horizon = "1d"
effect_type = "notice.send"
criticality = "reversible"
fields = [{ name = "reference", path = "$.reference" }]
discriminants = [{ name = "text", path = "$.text" }]

[[hierarchies]]
provider = "norefid"
event_type = "notice.*"
strategies = ["notice-ref"]
"#;

pub struct Pages {
    pub app: TestApp,
    pub downstream: Downstream,
}

impl Pages {
    pub async fn new() -> Self {
        Self::with("").await
    }

    /// The same, with `extra` configuration (a look-up, say).
    pub async fn with(extra: &str) -> Self {
        let (url, dir) = fresh_database().await;
        Self::on(&url, dir, extra).await
    }

    /// The same, on the database at `url`.
    pub async fn on(url: &str, dir: Option<tempfile::TempDir>, extra: &str) -> Self {
        let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
        let config = format!("{NOTICES}{}{extra}", downstream.sink_toml(2000));
        let app = spawn_on(url, &config, dir).await;
        Self { app, downstream }
    }

    /// Two equal refunds of `payment` without a reference: the second opens
    /// a weak-match money case. Returns its id.
    pub async fn money_case(&self, payment: &str) -> String {
        // Effects decided before (a notice's) settle first, so that the
        // counts below move for this refund alone.
        self.app.wait_effects_in("reserved", 0).await;
        let calls = self.downstream.calls().len();
        let applied = self.app.applied_effects().await;
        let first = self
            .app
            .post_signed("hmac", &refund(payment, 700, None))
            .await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        self.downstream.wait_calls(calls + 1).await;
        self.app.wait_applied(applied + 1).await;
        let second = self
            .app
            .post_signed("hmac", &refund(payment, 700, None))
            .await;
        assert_eq!(
            second.json["reason"], "weak_match_critical",
            "{}",
            second.json
        );
        second.json["case_id"].as_str().unwrap().to_owned()
    }

    /// Two notices with one reference and different texts: a collision on a
    /// reversible effect. Returns the case id.
    pub async fn notice_case(&self) -> String {
        self.notice_case_about("n-1").await
    }

    /// The same, for notices of `reference`.
    pub async fn notice_case_about(&self, reference: &str) -> String {
        let notice = |text: &str| {
            serde_json::to_vec(&serde_json::json!({
                "type": "notice.sent", "reference": reference, "text": text,
            }))
            .unwrap()
        };
        let first = self.app.post_signed("hmac", &notice("hello")).await;
        assert_eq!(first.json["decision"], "process", "{}", first.json);
        let second = self.app.post_signed("hmac", &notice("goodbye")).await;
        assert_eq!(
            second.json["reason"], "discriminants_differ",
            "{}",
            second.json
        );
        second.json["case_id"].as_str().unwrap().to_owned()
    }
}

/// The one-time token of the resolution form on a case page.
pub fn form_token(html: &str) -> Option<String> {
    let marker = r#"name="form_token" value=""#;
    let start = html.find(marker)? + marker.len();
    html[start..].split('"').next().map(str::to_owned)
}

/// Resolves `case` through its page's form, as distinct, with a reference.
pub async fn resolve_as_distinct(browser: &mut FormClient, case: &str, reference: &str) {
    let fields = [
        ("resolution", "process_as_distinct"),
        ("note", "the provider lists two refunds"),
        ("authoritative_ref", reference),
    ];
    let done = resolve_on_page(browser, case, &fields).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
}

/// Posts `case`'s resolution form, as its page gives it, with `fields`.
pub async fn resolve_on_page(
    browser: &mut FormClient,
    case: &str,
    fields: &[(&str, &str)],
) -> crate::support::forms::Answer {
    let page = browser.get(&format!("/cases/{case}")).await;
    let token = form_token(&page.body).expect("a resolution form");
    let csrf = csrf_in(&page.body);
    let mut form = vec![("csrf", csrf.as_str()), ("form_token", token.as_str())];
    form.extend_from_slice(fields);
    browser.post(&format!("/cases/{case}/resolve"), &form).await
}
