//! Multi-event deliveries (GoCardless `events[]`, Adyen `notificationItems[]`)
//! through real HTTP with an HTTP sink routed by effect type: every event is
//! decided on its own key and applied exactly once, however the provider
//! groups, regroups, repeats or races its events.

use std::collections::HashMap;

use serde_json::{Value, json};
use unicity::providers::signature::sign_adyen_notification;

use crate::support::app::{Reply, TestApp, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};

/// A sink for GoCardless events only (`event.handle`), and one for Adyen
/// payment events: no catch-all, so an effect of any other type is lost.
fn routed(downstream: &Downstream) -> String {
    format!(
        "[[sinks]]\neffect_type = \"event.handle\"\nkind = \"http\"\nurl = \"{url}\"\ntimeout_ms = 2000\n\n\
         [[sinks]]\neffect_type = \"payment_event.apply\"\nkind = \"http\"\nurl = \"{url}\"\ntimeout_ms = 2000\n",
        url = downstream.url
    )
}

pub async fn start() -> (TestApp, Downstream) {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let app = spawn_app_with(&routed(&downstream)).await;
    (app, downstream)
}

/// A GoCardless event, as its API documents them.
fn event(id: &str) -> Value {
    json!({
        "id": id,
        "created_at": "2026-11-30T10:00:00.000Z",
        "resource_type": "payments",
        "action": "confirmed",
        "links": { "payment": format!("PM_{id}") },
        "details": { "origin": "gocardless", "cause": "payment_confirmed", "description": "Payment confirmed" },
        "metadata": {}
    })
}

async fn deliver(app: &TestApp, events: &[Value]) -> Reply {
    let body = serde_json::to_vec(&json!({ "events": events })).unwrap();
    app.post_signed("gocardless", &body).await
}

pub async fn deliver_ids(app: &TestApp, ids: &[&str]) -> Reply {
    let events: Vec<Value> = ids.iter().map(|id| event(id)).collect();
    deliver(app, &events).await
}

/// Each item's decision, in order.
fn decisions(reply: &Reply) -> Vec<String> {
    match reply.json["items"].as_array() {
        Some(items) if !items.is_empty() => items
            .iter()
            .map(|i| i["decision"].as_str().unwrap_or("?").to_owned())
            .collect(),
        _ => vec![reply.json["decision"].as_str().unwrap_or("?").to_owned()],
    }
}

/// Downstream calls per idempotency key.
fn per_key(downstream: &Downstream) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for key in downstream.calls() {
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

pub async fn settle(downstream: &Downstream, expected: usize) {
    downstream.wait_calls(expected).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        downstream.calls().len(),
        expected,
        "{:?}",
        per_key(downstream)
    );
    assert!(
        per_key(downstream).values().all(|n| *n == 1),
        "an event was applied twice: {:?}",
        per_key(downstream)
    );
}

#[tokio::test]
async fn gocardless_regroupings_apply_each_event_exactly_once() {
    let (app, downstream) = start().await;
    let ab = deliver_ids(&app, &["EV_A", "EV_B"]).await;
    assert_eq!(ab.status, 202, "{}", ab.json);
    assert_eq!(decisions(&ab), ["process", "process"]);
    assert!(ab.json["key"].is_null(), "a batch has no key of its own");
    // Each step waits for the applied effects: a retry sent while its first
    // attempt is still in flight is deferred, not ignored (checked elsewhere).
    app.wait_applied(2).await;

    let bc = deliver_ids(&app, &["EV_B", "EV_C"]).await;
    assert_eq!(decisions(&bc), ["ignore", "process"], "{}", bc.json);
    assert_eq!(bc.json["items"][0]["reason"], "duplicate_of_applied");
    app.wait_applied(3).await;

    let ca = deliver_ids(&app, &["EV_C", "EV_A"]).await;
    assert_eq!(decisions(&ca), ["ignore", "ignore"], "{}", ca.json);
    assert_eq!(ca.status, 200, "all duplicates: the batch is a duplicate");
    assert_eq!(ca.json["decision"], "ignore");

    // [D] alone, then [D, E]: D once.
    let d = deliver_ids(&app, &["EV_D"]).await;
    assert_eq!(d.json["decision"], "process", "{}", d.json);
    app.wait_applied(4).await;
    let de = deliver_ids(&app, &["EV_D", "EV_E"]).await;
    assert_eq!(decisions(&de), ["ignore", "process"], "{}", de.json);
    assert_eq!(
        de.json["items"][0]["reference_delivery_id"],
        d.json["delivery_id"]
    );

    settle(&downstream, 5).await;
    assert_eq!(
        app.count("SELECT COUNT(*) FROM effects WHERE effect_type <> 'event.handle'")
            .await,
        0,
        "every effect has its item's own type"
    );
}

#[tokio::test]
async fn a_batch_and_its_items_can_be_read_back_one_by_one() {
    let (app, downstream) = start().await;
    let ab = deliver_ids(&app, &["EV_R1", "EV_R2"]).await;
    let shown = app.delivery(ab.json["delivery_id"].as_str().unwrap()).await;
    assert_eq!(shown.status, 200);
    let items = shown.json["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[1]["decision"]["action"], "process", "{}", shown.json);
    // Each item is a delivery of its own, linked to its batch, its body the item.
    let item = app
        .delivery(items[1]["delivery_id"].as_str().unwrap())
        .await;
    assert_eq!(item.status, 200);
    assert_eq!(item.json["item_of"]["parent"], ab.json["delivery_id"]);
    assert_eq!(item.json["item_of"]["index"], 1);
    assert_eq!(item.json["body"]["id"], "EV_R2");
    settle(&downstream, 2).await;
    app.wait_applied(2).await;

    // Rebuilt from the journal, the projections hold what the live path wrote.
    let live = projections(&app).await;
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    assert_eq!(projections(&app).await, live);
}

/// The text columns of the projections a batch writes, in a stable order.
async fn projections(app: &TestApp) -> Vec<Vec<Option<String>>> {
    use sea_orm::ConnectionTrait;
    let mut all = Vec::new();
    for sql in [
        "SELECT delivery_id, decision, business_key, strategy, status, transport_key FROM deliveries ORDER BY delivery_id",
        "SELECT effect_id, key, state, effect_type, first_delivery_id, NULL, NULL FROM effects ORDER BY effect_id",
        "SELECT transport_key, first_delivery_id, business_key, NULL, NULL, NULL FROM transport_links ORDER BY transport_key",
        "SELECT case_id, delivery_id, reason, status, business_key, NULL FROM cases ORDER BY case_id",
    ] {
        let rows = app
            .db
            .query_all_raw(sea_orm::Statement::from_string(
                app.db.get_database_backend(),
                sql.to_owned(),
            ))
            .await
            .expect("query");
        for row in rows {
            all.push(
                (0..6)
                    .map(|i| row.try_get_by_index::<Option<String>>(i).ok().flatten())
                    .collect(),
            );
        }
    }
    all
}

#[tokio::test]
async fn an_unresolved_item_is_quarantined_on_its_own_and_its_sibling_is_applied() {
    let (app, downstream) = start().await;
    let mut broken = event("EV_X");
    broken.as_object_mut().unwrap().remove("resource_type");
    let reply = deliver(&app, &[event("EV_OK"), broken]).await;
    assert_eq!(
        decisions(&reply),
        ["process", "quarantine"],
        "{}",
        reply.json
    );
    assert_eq!(reply.json["items"][1]["reason"], "unknown_event_type");
    assert!(reply.json["items"][1]["case_id"].is_string());
    assert_eq!(
        reply.json["decision"], "quarantine",
        "the batch reports what waits"
    );
    assert_eq!(app.open_cases().await, 1);
    settle(&downstream, 1).await;
}

/// An Adyen notification with the given items, each signed as Adyen does.
fn adyen(app: &TestApp, items: &[(&str, &str, u64)]) -> Vec<u8> {
    let items: Vec<Value> = items
        .iter()
        .map(|(psp, code, value)| {
            json!({ "NotificationRequestItem": {
                "additionalData": {},
                "amount": { "currency": "EUR", "value": value },
                "eventCode": code,
                "eventDate": "2026-11-30T10:00:00+01:00",
                "merchantAccountCode": "AcmeShop",
                "merchantReference": format!("order-{psp}"),
                "originalReference": "AUTH_PSP_1",
                "paymentMethod": "visa",
                "pspReference": psp,
                "reason": "",
                "success": "true"
            }})
        })
        .collect();
    let body = serde_json::to_vec(&json!({ "live": "false", "notificationItems": items })).unwrap();
    let key = crate::support::app::secret_of(app.source("adyen"));
    sign_adyen_notification(&key, &body).expect("signed")
}

#[tokio::test]
async fn an_adyen_batch_with_an_already_applied_item_sends_the_capture_once() {
    let (app, downstream) = start().await;
    let capture = adyen(&app, &[("CAP_1", "CAPTURE", 1000)]);
    let first = app.post_signed("adyen", &capture).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let resend = app.post_signed("adyen", &capture).await;
    assert_eq!(resend.json["decision"], "ignore", "{}", resend.json);
    let batch = adyen(
        &app,
        &[("CAP_1", "CAPTURE", 1000), ("REF_1", "REFUND", 400)],
    );
    let mixed = app.post_signed("adyen", &batch).await;
    assert_eq!(decisions(&mixed), ["ignore", "process"], "{}", mixed.json);
    settle(&downstream, 2).await;
}

#[tokio::test]
async fn two_batches_racing_on_a_shared_item_apply_it_once() {
    let (app, downstream) = start().await;
    let mut races = Vec::new();
    for n in 0..12 {
        let (a, shared, b) = (format!("EV_{n}a"), format!("EV_{n}s"), format!("EV_{n}b"));
        races.push((
            vec![event(&a), event(&shared)],
            vec![event(&shared), event(&b)],
        ));
    }
    let sends = races
        .iter()
        .flat_map(|(left, right)| [left, right])
        .map(|events| {
            let app = &app;
            async move {
                // A provider retries what got a 503 (a lost claim race).
                for _ in 0..10 {
                    let reply = deliver(app, events).await;
                    if reply.status != 503 {
                        return reply;
                    }
                }
                panic!("never accepted");
            }
        });
    let replies = futures_util::future::join_all(sends).await;
    for reply in &replies {
        assert!(reply.status == 200 || reply.status == 202, "{}", reply.json);
    }
    // 12 × (a, shared, b): 36 distinct events, each applied once (a shared
    // item may wait for its twin to settle and is then re-decided).
    settle(&downstream, 36).await;
}

/// A small deterministic generator (xorshift), so a failing case replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[tokio::test]
async fn any_partition_order_and_repetition_of_events_applies_each_once() {
    let (app, downstream) = start().await;
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut seen = std::collections::HashSet::new();
    for case in 0..16 {
        // Six events per case, delivered as 1–8 groups of 1–4 events drawn
        // with repetition, in any order.
        let pool: Vec<String> = (0..6).map(|i| format!("EV_P{case}_{i}")).collect();
        for _ in 0..=rng.below(8) {
            let size = 1 + rng.below(4) as usize;
            let mut group: Vec<&str> = Vec::new();
            while group.len() < size {
                let pick = pool[rng.below(6) as usize].as_str();
                if !group.contains(&pick) {
                    group.push(pick);
                }
            }
            let reply = deliver_ids(&app, &group).await;
            assert!(reply.status == 200 || reply.status == 202, "{}", reply.json);
            seen.extend(group.iter().map(|id| id.to_string()));
        }
    }
    settle(&downstream, seen.len()).await;
}

/// A batch of one event is that event: the downstream receives the event,
/// as it does each event of a larger batch, never the provider's envelope
/// around it; and the delivery is found by the event's resource.
#[tokio::test]
async fn a_batch_of_one_sends_the_event_and_is_found_by_its_resource_as_a_larger_one_is() {
    let (app, downstream) = start().await;
    let one = deliver_ids(&app, &["EV_ONE"]).await;
    assert_eq!(one.json["decision"], "process", "{}", one.json);
    let two = deliver_ids(&app, &["EV_TWO_A", "EV_TWO_B"]).await;
    assert_eq!(decisions(&two), ["process", "process"], "{}", two.json);
    settle(&downstream, 3).await;
    let mut sent: Vec<Value> = downstream
        .bodies()
        .into_iter()
        .map(|body| body["event"].clone())
        .collect();
    sent.sort_by_key(|event| event["id"].as_str().unwrap_or_default().to_owned());
    assert_eq!(
        sent,
        [event("EV_ONE"), event("EV_TWO_A"), event("EV_TWO_B")]
    );

    let id = one.json["delivery_id"].as_str().expect("an id");
    let shown = app.get(&format!("/api/deliveries/{id}")).await;
    assert_eq!(shown.json["resource"], "PM_EV_ONE", "{}", shown.json);
    let found = app.get("/api/deliveries?q=PM_EV_ONE").await;
    assert_eq!(
        found.json["deliveries"][0]["delivery_id"], id,
        "{}",
        found.json
    );
}

/// A large batch does not become as many calls at once to the service that
/// applies effects: at most `downstream_concurrency` are in flight, the
/// others wait their turn, and every one is applied once.
#[tokio::test]
async fn a_large_batch_calls_the_downstream_a_bounded_number_at_a_time() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 150 }).await;
    let extra = format!(
        "{}[engine]\ndownstream_concurrency = 3\n",
        routed(&downstream)
    );
    let app = spawn_app_with(&extra).await;
    let ids: Vec<String> = (0..12).map(|n| format!("EV_WIDE_{n}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let reply = deliver_ids(&app, &ids).await;
    assert_eq!(decisions(&reply), vec!["process"; 12], "{}", reply.json);
    settle(&downstream, 12).await;
    assert_eq!(downstream.most_at_once(), 3);
    assert!(per_key(&downstream).values().all(|calls| *calls == 1));
}

/// Waiting for a turn counts against a reservation's lease. A call whose
/// turn comes late is not sent on a lease the sweeper may expire while it
/// is in flight (a second attempt could then go out beside it): the key is
/// taken again first, the unsent attempt settled failed as never called,
/// and the call goes out under the next fencing token. No lease expires,
/// no outcome is ever unknown, each event is applied once.
#[tokio::test]
async fn a_call_whose_turn_comes_late_takes_its_key_again_before_it_is_sent() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 900 }).await;
    let extra = format!(
        "{}[engine]\ndownstream_concurrency = 1\nlease_secs = 2\nsweep_interval_ms = 100\n",
        routed(&downstream)
    );
    let app = spawn_app_with(&extra).await;
    let reply = deliver_ids(&app, &["EV_LATE_A", "EV_LATE_B", "EV_LATE_C"]).await;
    assert_eq!(
        decisions(&reply),
        ["process", "process", "process"],
        "{}",
        reply.json
    );
    settle(&downstream, 3).await;
    app.wait_applied(3).await;
    assert!(per_key(&downstream).values().all(|calls| *calls == 1));
    assert_eq!(app.journal_count("ReservationExpired").await, 0);
    assert_eq!(app.journal_count("EffectOutcomeUnknown").await, 0);
    assert_eq!(app.cases_with("outcome_unknown").await, 0);
    assert!(
        app.journal_count_containing("EffectFailed", "not_called_in_time")
            .await
            >= 1,
        "the late turns took their keys again"
    );
}

#[tokio::test]
async fn a_batch_answered_defer_for_one_of_its_items_leaves_nothing_waiting_once_it_settles() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 800 }).await;
    let app = spawn_app_with(&format!(
        "[engine]\nsweep_interval_ms = 100\n{}",
        routed(&downstream)
    ))
    .await;
    // Given an event in flight
    let alone = deliver_ids(&app, &["EV_w1"]).await;
    assert_eq!(decisions(&alone), ["process"], "{}", alone.json);
    // When a batch regroups it with a new one: the batch is answered with
    // its waiting item's "defer"
    let batch = deliver_ids(&app, &["EV_w0", "EV_w1"]).await;
    assert_eq!(decisions(&batch), ["process", "defer"], "{}", batch.json);
    assert_eq!(batch.json["decision"], "defer", "{}", batch.json);
    // Then once the event settles, its waiting twin is decided again, and
    // nothing is left waiting: the batch itself waits on no key, and a row
    // of its would stay the oldest of the sweeper's stale deferrals for good
    settle(&downstream, 2).await;
    app.wait_for_count("SELECT COUNT(*) FROM deferred_deliveries", 0)
        .await;
    let redecided = "SELECT COUNT(*) FROM journal WHERE event_type = 'DecisionMade'";
    app.wait_for_count(redecided, 1).await;
}

/// A call that waited for its turn past its whole lease finds its outcome
/// unknown and a case open about it. A person who settled that case (a
/// refund made by hand) decided: the turn sends nothing.
#[tokio::test]
async fn a_call_whose_lease_ran_out_while_it_waited_is_not_sent_once_a_person_settled_its_case() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 1500 }).await;
    let extra = format!(
        "{}[engine]\ndownstream_concurrency = 1\nlease_secs = 2\nsweep_interval_ms = 100\n",
        routed(&downstream)
    );
    let app = spawn_app_with(&extra).await;
    // Given three events taking turns: the third's lease runs out while the
    // first two are called, one after the other
    let reply = deliver_ids(&app, &["EV_HELD_A", "EV_HELD_B", "EV_HELD_C"]).await;
    assert_eq!(decisions(&reply), vec!["process"; 3], "{}", reply.json);
    app.wait_for_count(
        "SELECT COUNT(*) FROM cases WHERE reason = 'outcome_unknown' AND status = 'open'",
        1,
    )
    .await;
    // When a person settles its case before its turn comes
    let listed = app.get("/api/cases?reason=outcome_unknown").await.json;
    let case_id = listed["cases"][0]["case_id"].as_str().expect("a case");
    let resolved = app
        .resolve(
            case_id,
            json!({"resolution": "reject", "note": "refunded by hand while it waited"}),
        )
        .await;
    assert_eq!(resolved.status, 200, "{}", resolved.json);
    // Then its turn sends nothing: two calls, the person's resolution stands
    app.wait_applied(2).await;
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert_eq!(downstream.calls().len(), 2, "{:?}", per_key(&downstream));
    assert_eq!(app.cases_resolved_as("reject").await, 1);
    assert_eq!(app.cases_resolved_as("effect_retried").await, 0);
}

/// The same wait with no one settling the case: the call goes out under the
/// next fencing token, and the case its expiry opened says why it closed.
#[tokio::test]
async fn a_call_whose_lease_ran_out_while_it_waited_is_sent_and_closes_its_case() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 1500 }).await;
    let extra = format!(
        "{}[engine]\ndownstream_concurrency = 1\nlease_secs = 2\nsweep_interval_ms = 100\n",
        routed(&downstream)
    );
    let app = spawn_app_with(&extra).await;
    let reply = deliver_ids(&app, &["EV_RAN_A", "EV_RAN_B", "EV_RAN_C"]).await;
    assert_eq!(decisions(&reply), vec!["process"; 3], "{}", reply.json);
    settle(&downstream, 3).await;
    app.wait_applied(3).await;
    assert_eq!(app.journal_count("ReservationExpired").await, 1);
    assert_eq!(app.cases_resolved_as("effect_retried").await, 1);
    assert_eq!(app.open_cases().await, 0);
}

/// A provider of batches with a delivery-id header, its events keyed by
/// their own ids, unsigned: what a configuration may define.
const IDENTIFIED_BATCHES: &str = r#"
[[providers]]
name = "bulk"
transport = ["header:x-delivery-id"]
items = "$.events[*]"
event_type = [{ parts = [{ field = "$.type" }] }]

[[strategies]]
name = "bulk-event"
version = 1
provider = "bulk"
event_types = ["*"]
kind = "provider_event_id"
strength = "strong"
horizon = "30d"
effect_type = "event.handle"
criticality = "critical"
fields = [{ name = "id", path = "$.id" }]
discriminants = [{ name = "amount", path = "$.amount" }]

[[hierarchies]]
provider = "bulk"
event_type = "*"
strategies = ["bulk-event"]

[[sources]]
slug = "bulk"
tenant = "acme"
provider = "bulk"
environment = "test"
allow_unsigned = true
signature = { scheme = "none" }
"#;

#[tokio::test]
async fn a_batchs_delivery_id_back_with_another_body_applies_none_of_its_events() {
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let app = spawn_app_with(&format!("{}{IDENTIFIED_BATCHES}", routed(&downstream))).await;
    let send = |ids: &[&str]| {
        let events: Vec<Value> = ids
            .iter()
            .map(|id| json!({"id": id, "type": "payment.paid", "amount": 100}))
            .collect();
        let body = serde_json::to_vec(&json!({ "events": events })).unwrap();
        let headers = [("x-delivery-id".to_owned(), "D1".to_owned())];
        let app = &app;
        async move { app.post_raw("bulk", body, &headers).await }
    };
    let first = send(&["A", "B"]).await;
    assert_eq!(decisions(&first), ["process", "process"], "{}", first.json);
    downstream.wait_calls(2).await;
    // The same delivery id, a third event: not the delivery it claims to be.
    let again = send(&["A", "B", "C"]).await;
    assert_eq!(
        decisions(&again),
        ["quarantine", "quarantine", "quarantine"],
        "{}",
        again.json
    );
    for item in again.json["items"].as_array().unwrap() {
        assert_eq!(item["reason"], "transport_id_collision", "{item}");
    }
    // The same batch again is a retry, its events the first's.
    let retry = send(&["A", "B"]).await;
    assert_eq!(decisions(&retry), ["ignore", "ignore"], "{}", retry.json);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(downstream.calls().len(), 2);
}

#[tokio::test]
async fn a_server_refuses_to_start_on_a_batch_strategy_keyed_by_a_header() {
    let (url, _dir) = crate::support::app::fresh_database().await;
    let config = IDENTIFIED_BATCHES.replace(
        r#"fields = [{ name = "id", path = "$.id" }]"#,
        r#"fields = [{ name = "id", path = "header:x-delivery-id" }]"#,
    );
    assert_ne!(config, IDENTIFIED_BATCHES);
    let settings = crate::support::app::test_settings(&url, &config);
    let refused = unicity::startup::Application::build(settings).await;
    let error = format!("{:#}", refused.err().expect("refused"));
    assert!(
        error.contains("bulk-event@1") && error.contains("reads header:x-delivery-id"),
        "{error}"
    );
}
