//! A refund the provider made whose webhook never came is found missing;
//! finance refunds it by hand and records the finding as made by hand. The
//! webhook may still come, late, under a key nothing was applied under:
//! it is held for a person instead of refunding a second time, and so is
//! any delivery with the same payment, amount and currency, through a
//! rebuild too. Real HTTP for the provider's listing and the downstream.

use chrono::{Duration, Utc};
use serde_json::json;

use unicity::auth::Role;

use crate::reconcile::{reconcile, rows};
use crate::support::app::{TestApp, refund, spawn_app_with, spawn_on};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::signed_in;
use crate::support::held::AdminChange;
use crate::support::pages::resolve_on_page;
use crate::support::provider::Provider;

/// Every hold, all its columns.
const HOLDS: &str = "SELECT seal || '|' || case_id || '|' || provider || '|' || operation_id \
                     || '|' || CAST(held_at AS TEXT) FROM hand_made_holds ORDER BY case_id";

/// A refund of 700 on `pay_hand`, made fifty minutes ago, found missing by
/// a run; the app, its downstream, the finding's case id and the provider.
async fn found_missing() -> (TestApp, Downstream, String, Provider) {
    let now = Utc::now();
    let refunds = [("re_hand", "pay_hand", 700, now - Duration::minutes(50))];
    let (app, downstream, provider, extra) = serving(&refunds, "").await;
    let case = the_missing_case(&app, &extra).await;
    (app, downstream, case, provider)
}

/// The case of the one missing-effect finding a run over the hour opens.
pub(crate) async fn the_missing_case(app: &TestApp, extra: &str) -> String {
    let ran = reconcile(app, extra).await;
    assert!(ran.contains("1 missing"), "{ran}");
    rows(
        app,
        "SELECT case_id FROM cases WHERE reason = 'missing_effect'",
    )
    .await
    .remove(0)
}

#[tokio::test]
async fn the_late_webhook_of_a_refund_made_by_hand_is_held_for_a_person_not_refunded_again() {
    // Given a missing refund that finance made by hand, recorded from the
    // finding's page
    let (app, downstream, case, _provider) = found_missing().await;
    let mut finance = signed_in(&app, "fin", Role::Finance).await;
    let path = format!("/cases/{case}");
    let page = finance.get(&path).await;
    assert!(
        page.body.contains(r#"value="made_by_hand""#),
        "{}",
        page.body
    );
    let fields = [
        ("resolution", "made_by_hand"),
        ("note", "refunded at the bank on 2026-12-07"),
    ];
    let done = resolve_on_page(&mut finance, &case, &fields).await;
    assert_eq!(
        done.location,
        format!("{path}?done=resolved"),
        "{}",
        done.body
    );

    // When the refund's webhook comes after all, and the provider retries it
    let late = refund("pay_hand", 700, Some("rr_hand"));
    let first = app.post_signed("hmac", &late).await;
    let again = app.post_signed("hmac", &late).await;

    // Then neither is applied: each waits for a person, saying why
    for reply in [&first, &again] {
        assert_eq!(reply.json["decision"], "reconcile", "{}", reply.json);
        assert_eq!(reply.json["reason"], "made_by_hand", "{}", reply.json);
    }
    let held = format!(
        "SELECT COUNT(*) FROM cases WHERE reason = 'made_by_hand' AND status = 'open' \
         AND delivery_id = '{}'",
        first.json["delivery_id"].as_str().expect("an id")
    );
    assert_eq!(app.count(&held).await, 1);
    // and the hold keeps the operation and its fields sealed
    let holds = rows(&app, HOLDS).await;
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert!(holds[0].starts_with("hmac:"), "{holds:?}");
    assert!(
        holds[0].contains(&format!("|{case}|norefid|re_hand|")),
        "{holds:?}"
    );

    // And a refund of another amount on the same payment is applied
    let other = app
        .post_signed("hmac", &refund("pay_hand", 300, Some("rr_other")))
        .await;
    assert_eq!(other.json["decision"], "process", "{}", other.json);
    app.wait_applied(1).await;
    assert_eq!(downstream.calls().len(), 1);

    // And after a rebuild of the projections, a look-alike is still held
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    assert_eq!(rows(&app, HOLDS).await, holds);
    let after = app
        .post_signed("hmac", &refund("pay_hand", 700, Some("rr_hand_2")))
        .await;
    assert_eq!(after.json["reason"], "made_by_hand", "{}", after.json);
    assert_eq!(downstream.calls().len(), 1);
}

#[tokio::test]
async fn a_person_who_finds_the_held_delivery_is_another_refund_applies_it_once() {
    // Given a refund made by hand, and a look-alike held for a person
    let (app, downstream, case, _provider) = found_missing().await;
    let made = app
        .resolve(
            &case,
            json!({
                "resolution": "made_by_hand",
                "note": "refunded by hand",
                "authoritative_ref": "BANK-123",
            }),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.json);
    assert_eq!(made.json["resolution"], "made_by_hand", "{}", made.json);
    // the operation made by hand is the finding's, whatever was typed
    let held = rows(&app, "SELECT operation_id FROM hand_made_holds").await;
    assert_eq!(held, ["re_hand"]);
    let again = app
        .resolve(
            &case,
            json!({"resolution": "made_by_hand", "note": "twice"}),
        )
        .await;
    assert_eq!(
        again.json["code"], "case_already_resolved",
        "{}",
        again.json
    );
    let held = app
        .post_signed("hmac", &refund("pay_hand", 700, Some("rr_second")))
        .await;
    assert_eq!(held.json["reason"], "made_by_hand", "{}", held.json);
    let held_case = rows(
        &app,
        "SELECT case_id FROM cases WHERE reason = 'made_by_hand'",
    )
    .await
    .remove(0);

    // When only a missing effect can be made by hand
    refused_as(
        &app,
        &held_case,
        json!({"resolution": "made_by_hand", "note": "by hand"}),
        "not_a_missing_effect",
    )
    .await;

    // and a look-alike is applied only for the operation it is
    refused_as(
        &app,
        &held_case,
        json!({"resolution": "process_as_distinct", "note": "another refund"}),
        "cite_the_operation",
    )
    .await;
    let by_hand = app
        .resolve(
            &held_case,
            json!({
                "resolution": "process_as_distinct",
                "note": "the refund made by hand",
                "authoritative_ref": "re_hand",
            }),
        )
        .await;
    assert_eq!(
        by_hand.json["code"], "operation_consumed",
        "{}",
        by_hand.json
    );

    // Then finance, who sees a second refund at the provider, applies it
    let applied = app
        .resolve(
            &held_case,
            json!({
                "resolution": "process_as_distinct",
                "note": "a second refund",
                "authoritative_ref": "re_second",
            }),
        )
        .await;
    assert_eq!(applied.status, 200, "{}", applied.json);
    app.wait_applied(1).await;
    assert_eq!(downstream.calls().len(), 1);
}

/// Two equal refunds of 700 on `pay_w`, the first's webhook applied and
/// paired by a run, the second (`re_w2`) found missing; the look-up both
/// lists for reconciliation and compares a held delivery's discriminants
/// with the provider's operations. The app, its downstream, the finding
/// and the provider.
async fn an_equal_refund_found_missing() -> (TestApp, Downstream, String, Provider) {
    let now = Utc::now();
    let refunds = [
        ("re_w1", "pay_w", 700, now - Duration::minutes(50)),
        ("re_w2", "pay_w", 700, now - Duration::minutes(40)),
    ];
    let compare = "[lookups.compare]\npayment = \"resource\"\namount = \"amount\"\n\
                   currency = \"currency\"\n\n";
    let (app, downstream, provider, extra) = serving(&refunds, compare).await;
    let first = app.post_signed("hmac", &refund("pay_w", 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(1).await;
    let ran = reconcile(&app, &extra).await;
    assert!(ran.contains("1 matched, 1 missing"), "{ran}");
    let finding = rows(
        &app,
        "SELECT case_id FROM cases WHERE reason = 'missing_effect'",
    )
    .await
    .remove(0);
    (app, downstream, finding, provider)
}

/// Two equal refunds on one payment: the first's webhook came, the
/// second's did not and finance made it by hand. When the second's webhook
/// comes late, its weak key matches the first refund and the provider is
/// asked: it lists two refunds for one effect, which would pay the second
/// again. The operation made by hand is not owed: a person decides, and no
/// one can cite it for an effect.
#[tokio::test]
async fn a_look_up_never_pays_again_an_operation_made_by_hand() {
    // Given the first refund applied and paired by a run, the second found
    // missing and made by hand
    let (app, downstream, finding, _provider) = an_equal_refund_found_missing().await;
    let made = app
        .resolve(
            &finding,
            json!({"resolution": "made_by_hand", "note": "refunded at the bank"}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.json);

    // When the second refund's webhook comes late, and the provider is asked
    let late = app.post_signed("hmac", &refund("pay_w", 700, None)).await;
    assert_eq!(late.json["reason"], "weak_match_critical", "{}", late.json);
    let case = late.json["case_id"].as_str().expect("a case").to_owned();
    app.wait_journal("LookupPerformed", 1).await;

    // Then the look-up leaves it to a person, naming the operation
    let shown = app.get(&format!("/api/cases/{case}")).await;
    assert_eq!(shown.json["status"], "open", "{}", shown.json);
    assert_eq!(
        app.journal_count_containing("LookupPerformed", "re_w2 was made by hand")
            .await,
        1
    );
    // and a person cannot apply it without saying which operation it is,
    // as its page says
    let mut finance = signed_in(&app, "fin", Role::Finance).await;
    let page = finance.get(&format!("/cases/{case}")).await;
    assert!(
        page.body.contains("required to process it as distinct"),
        "{}",
        page.body
    );
    refused_as(
        &app,
        &case,
        json!({"resolution": "process_as_distinct", "note": "the provider lists two"}),
        "cite_the_operation",
    )
    .await;
    // nor cite it for a second refund
    refused_as(
        &app,
        &case,
        json!({
            "resolution": "process_as_distinct",
            "note": "the provider lists two",
            "authoritative_ref": "re_w2",
        }),
        "operation_consumed",
    )
    .await;
    assert_eq!(downstream.calls().len(), 1);
}

/// The late webhook of the second refund came before anyone acted on the
/// finding, and the provider's answer applied it: the refund is paid. Made
/// by hand now would record a second payment as if it were the only one.
#[tokio::test]
async fn an_operation_an_effect_already_stands_for_cannot_be_made_by_hand() {
    let (app, downstream, finding, _provider) = an_equal_refund_found_missing().await;
    let late = app.post_signed("hmac", &refund("pay_w", 700, None)).await;
    assert_eq!(late.json["reason"], "weak_match_critical", "{}", late.json);
    downstream.wait_calls(2).await;
    refused_as(
        &app,
        &finding,
        json!({"resolution": "made_by_hand", "note": "refunded at the bank"}),
        "operation_paid",
    )
    .await;
    assert_eq!(app.count("SELECT COUNT(*) FROM hand_made_holds").await, 0);
}

/// The late webhook of a refund found missing came with a key of its own
/// and was applied before any run paired them: made by hand now would pay
/// it a second time at the bank, and hold nothing worth holding.
#[tokio::test]
async fn a_missing_refund_whose_late_webhook_was_applied_cannot_be_made_by_hand() {
    let made = made_by_hand_after_a_refund_of(700).await;
    assert_eq!(made.status, 409, "{}", made.json);
    assert_eq!(made.json["code"], "operation_paid", "{}", made.json);
    // and a refund of another amount does not stand for it
    let made = made_by_hand_after_a_refund_of(300).await;
    assert_eq!(made.status, 200, "{}", made.json);
}

/// `pay_hand`'s refund of 700 found missing, then a refund of `amount` on
/// `pay_hand` applied, then the finding recorded as made by hand: the answer.
async fn made_by_hand_after_a_refund_of(amount: u64) -> crate::support::app::Reply {
    let (app, downstream, case, _provider) = found_missing().await;
    let applied = app
        .post_signed("hmac", &refund("pay_hand", amount, Some("rr_applied")))
        .await;
    assert_eq!(applied.json["decision"], "process", "{}", applied.json);
    downstream.wait_calls(1).await;
    app.resolve(
        &case,
        json!({"resolution": "made_by_hand", "note": "refunded at the bank"}),
    )
    .await
}

/// A server whose provider has no listing any more (its look-up removed
/// from the configuration) seals nothing: a finding is not recorded as made
/// by hand there, and a delivery held before is still applied only citing
/// the operation it is.
#[tokio::test]
async fn without_the_providers_listing_nothing_is_made_by_hand_and_a_held_delivery_still_cites() {
    // Given a look-alike held for a refund made by hand, and another
    // finding left open
    let now = Utc::now();
    let refunds = [
        ("re_hand", "pay_hand", 700, now - Duration::minutes(50)),
        ("re_open", "pay_open", 500, now - Duration::minutes(45)),
    ];
    let (app, downstream, _provider, extra) = serving(&refunds, "").await;
    let ran = reconcile(&app, &extra).await;
    assert!(ran.contains("2 missing"), "{ran}");
    let finding = |refund: &str| {
        format!(
            "SELECT case_id FROM cases WHERE reason = 'missing_effect' \
             AND CAST(details AS TEXT) LIKE '%{refund}%'"
        )
    };
    let hand = rows(&app, &finding("re_hand")).await.remove(0);
    let made = app
        .resolve(
            &hand,
            json!({"resolution": "made_by_hand", "note": "by hand"}),
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.json);
    let held = app
        .post_signed("hmac", &refund("pay_hand", 700, Some("rr_late")))
        .await;
    assert_eq!(held.json["reason"], "made_by_hand", "{}", held.json);
    let held_case = held.json["case_id"].as_str().expect("a case").to_owned();

    // When a server without the look-up runs on the same database
    let bare = spawn_on(&app.database_url, &downstream.sink_toml(2000), None).await;

    // Then the open finding cannot be made by hand there
    let open = rows(&app, &finding("re_open")).await.remove(0);
    let made_by_hand = json!({"resolution": "made_by_hand", "note": "by hand"});
    refused_as(&bare, &open, made_by_hand, "nothing_to_hold_by").await;
    // and the held delivery is not applied without its operation
    let uncited = json!({"resolution": "process_as_distinct", "note": "another refund"});
    refused_as(&bare, &held_case, uncited, "cite_the_operation").await;
    assert_eq!(downstream.calls().len(), 0);
}

/// A server whose downstream applies every effect and whose look-up reads a
/// provider that made `refunds` (with the `[lookups.compare]` table
/// `compare`, when not empty); the server, its downstream, the provider and
/// the configuration added.
async fn serving(
    refunds: &[crate::support::provider::Refund<'_>],
    compare: &str,
) -> (TestApp, Downstream, Provider, String) {
    let provider = Provider::start(refunds, 10).await;
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let lookup = provider
        .lookup_toml()
        .replace("[reconciliation]", &format!("{compare}[reconciliation]"));
    let extra = format!("{}{lookup}", downstream.sink_toml(2000));
    let app = spawn_app_with(&extra).await;
    (app, downstream, provider, extra)
}

/// Resolves `case` as `body` says, and checks it is refused with `code`.
async fn refused_as(app: &TestApp, case: &str, body: serde_json::Value, code: &str) {
    let reply = app.resolve(case, body).await;
    assert_eq!(reply.status, 409, "{}", reply.json);
    assert_eq!(reply.json["code"], code, "{}", reply.json);
}

/// The late webhook comes while finance records its refund as made by
/// hand: decided after the checks read the ledger, before the resolution
/// commits (the writer held up meanwhile by another transaction). The
/// resolution is refused, to be made again, and made again it finds the
/// refund paid: paid once, and no record claims it was paid by hand too.
#[tokio::test]
async fn a_late_webhook_decided_while_its_refund_is_recorded_as_made_by_hand_refuses_the_record() {
    // Given a missing refund, and a read model that holds the whole journal
    let (app, downstream, case, _provider) = found_missing().await;
    assert_eq!(app.get("/api/deliveries").await.status, 200);
    let ready = app.get("/readyz").await;
    assert_eq!(ready.json["read_model"]["behind"], 0, "{}", ready.json);

    // When its webhook comes while a transaction holds the writer up
    // (SQLite: the write lock; PostgreSQL: new effects), and finance
    // records the refund as made by hand meanwhile
    let holding = AdminChange::begin(&app.database_url).await;
    if holding.postgres {
        holding.execute("LOCK TABLE effects IN SHARE MODE").await;
    }
    let late = refund("pay_hand", 700, Some("rr_late"));
    let (applied, made, ()) = tokio::join!(
        app.post_signed("hmac", &late),
        async {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            app.resolve(
                &case,
                json!({"resolution": "made_by_hand", "note": "refunded at the bank"}),
            )
            .await
        },
        async {
            tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
            holding.commit_once_waited_on().await;
        },
    );

    // Then the webhook is applied, as nothing held it yet, and the record
    // is refused, naming the look-alike that came
    assert_eq!(applied.json["decision"], "process", "{}", applied.json);
    assert_eq!(made.status, 409, "{}", made.json);
    assert_eq!(made.json["code"], "look_alike_arrived", "{}", made.json);
    assert_eq!(app.count("SELECT COUNT(*) FROM hand_made_holds").await, 0);
    // and made again, they find the refund paid
    downstream.wait_calls(1).await;
    refused_as(
        &app,
        &case,
        json!({"resolution": "made_by_hand", "note": "refunded at the bank"}),
        "operation_paid",
    )
    .await;
}

/// The checks of a record read effects in the read model once it holds the
/// journal; when how far it got cannot even be read, nothing says the late
/// webhook is not among the rows it lacks: the record is refused, not
/// trusted, and taken once the read model answers again.
#[tokio::test]
async fn a_read_model_whose_position_cannot_be_read_refuses_the_record_instead_of_trusting_it() {
    use sea_orm::ConnectionTrait;
    // Given a missing refund, and a read model whose checkpoint cannot be read
    let (app, downstream, case, _provider) = found_missing().await;
    let rename = |from: &str, to: &str| format!("ALTER TABLE {from} RENAME TO {to}");
    let away = "projector_checkpoints_away";
    app.db
        .execute_unprepared(&rename("projector_checkpoints", away))
        .await
        .expect("renamed");

    // When finance records it as made by hand
    let made = json!({"resolution": "made_by_hand", "note": "refunded at the bank"});
    let refused = app.resolve(&case, made.clone()).await;
    app.db
        .execute_unprepared(&rename(away, "projector_checkpoints"))
        .await
        .expect("renamed back");

    // Then nothing is recorded: the case stays open, nothing is held
    assert_ne!(refused.status, 200, "{}", refused.json);
    let open = format!("SELECT COUNT(*) FROM cases WHERE case_id = '{case}' AND status = 'open'");
    assert_eq!(app.count(&open).await, 1);
    assert_eq!(app.count("SELECT COUNT(*) FROM hand_made_holds").await, 0);
    // And once the read model answers, the same record is taken
    let taken = app.resolve(&case, made).await;
    assert_eq!(taken.status, 200, "{}", taken.json);
    assert_eq!(app.count("SELECT COUNT(*) FROM hand_made_holds").await, 1);
    assert!(downstream.calls().is_empty());
}
