//! Rebuilt from the journal, every projection table reads as it did live,
//! including what case resolutions wrote: the link of a delivery confirmed
//! as a duplicate, the effect processed as distinct with the provider
//! operation it consumed, the downstream's id beside it.

use unicity::auth::{Principal, PrincipalKind, Role};
use unicity::domain::cases::Resolution;
use unicity::services::cases::{self, Resolve};
use unicity::services::engine::Engine;

use crate::support::app::{TestApp, refund, spawn_app_with, test_settings};
use crate::support::counts::Counts;
use crate::support::downstream::{Behaviour, Downstream};
use crate::support::forms::operator;
use crate::support::probe::{Probe, assert_same_projections};

/// A weak match on pay_rb held in a case; returns the case.
async fn look_alike(app: &TestApp, payment: &str, applied: i64) -> uuid::Uuid {
    let first = app.post_signed("hmac", &refund(payment, 700, None)).await;
    assert_eq!(first.json["decision"], "process", "{}", first.json);
    app.wait_applied(applied).await;
    let second = app.post_signed("hmac", &refund(payment, 700, None)).await;
    assert_eq!(
        second.json["reason"], "weak_match_critical",
        "{}",
        second.json
    );
    second.json["case_id"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn resolved_cases_read_the_same_after_a_rebuild_in_every_table() {
    // Given one case confirmed as a duplicate and one processed as distinct
    // citing the provider's operation
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 0 }).await;
    let app = spawn_app_with(&downstream.sink_toml(2000)).await;
    let duplicate = look_alike(&app, "pay_rb_1", 1).await;
    let distinct = look_alike(&app, "pay_rb_2", 2).await;
    let settings = test_settings(&app.database_url, &downstream.sink_toml(2000));
    let engine = Engine::open(
        &settings.database_url,
        settings.catalog,
        settings.key_secret,
        settings.sinks,
        settings.lookups,
        settings.engine,
    )
    .await
    .expect("engine");
    let fay = operator(&app, "fay", Role::Finance).await;
    for (case_id, resolution, reference) in [
        (duplicate, Resolution::ConfirmDuplicate, None),
        (distinct, Resolution::ProcessAsDistinct, Some("re_rb_2")),
    ] {
        cases::resolve(
            &engine,
            Resolve {
                case_id,
                resolution,
                by: Principal {
                    kind: PrincipalKind::Operator,
                    id: fay,
                    name: "fay".to_owned(),
                    role: Role::Finance,
                },
                note: "checked with the provider".to_owned(),
                authoritative_ref: reference.map(str::to_owned),
            },
        )
        .await
        .expect("resolved");
    }
    downstream.wait_calls(3).await;
    app.wait_for_count(
        "SELECT COUNT(*) FROM effects WHERE provider_ref = 're_rb_2' AND state = 'applied'",
        1,
    )
    .await;
    let linked = format!(
        "SELECT COUNT(*) FROM effect_deliveries WHERE delivery_id = \
         (SELECT delivery_id FROM cases WHERE case_id = '{duplicate}')"
    );
    assert_eq!(app.count(&linked).await, 1, "the duplicate is linked live");

    // When the projections are rebuilt from the journal
    let probe = Probe::of(&app.db);
    let live = probe.snapshot().await;
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    let rebuilt = probe.snapshot().await;

    // Then every table reads the same, the duplicate's link included
    assert_same_projections(
        &live,
        &rebuilt,
        &["deliveries", "effects", "effect_deliveries", "cases"],
    );
    assert_eq!(
        app.count(&linked).await,
        1,
        "the duplicate is linked rebuilt"
    );
}

#[tokio::test]
async fn a_rebuild_while_effects_settle_loses_no_settlement_and_equals_the_live_state() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    // Given a downstream that answers each refund 100 ms after it is asked,
    // and the projections rebuilt again and again from another connection
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 100 }).await;
    let app = spawn_app_with(&downstream.sink_toml(5000)).await;
    let running = Arc::new(AtomicBool::new(true));
    let rebuilt = Arc::new(AtomicU32::new(0));
    let rebuilds = tokio::spawn({
        let (db, running, rebuilt) = (app.db.clone(), running.clone(), rebuilt.clone());
        async move {
            while running.load(Ordering::Relaxed) {
                // SQLite: busy beside a writer's batch now and then.
                if unicity::services::projections::rebuild(&db).await.is_ok() {
                    rebuilt.fetch_add(1, Ordering::Relaxed);
                }
                tokio::task::yield_now().await;
            }
        }
    });
    // When refunds arrive meanwhile, each retried as a provider would until
    // it is acknowledged, and the downstream applies every one
    const REFUNDS: i64 = 12;
    for n in 0..REFUNDS {
        let body = refund(&format!("pay_rbl_{n}"), 700, Some(&format!("rr_rbl_{n}")));
        let mut reply = app.post_signed("hmac", &body).await;
        for _ in 0..50 {
            if reply.status == 202 {
                break;
            }
            assert_eq!(reply.status, 503, "{}", reply.json);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            reply = app.post_signed("hmac", &body).await;
        }
        assert_eq!(reply.status, 202, "{}", reply.json);
    }
    downstream.wait_calls(REFUNDS as usize).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    running.store(false, Ordering::Relaxed);
    rebuilds.await.expect("rebuild loop");
    assert!(rebuilt.load(Ordering::Relaxed) > 0, "a rebuild ran");
    // Then every settlement was recorded: each refund applied once, none
    // left reserved to expire as unknown,
    app.wait_applied(REFUNDS).await;
    assert_eq!(app.live_effects().await, REFUNDS);
    assert_eq!(downstream.calls().len(), REFUNDS as usize);
    // and one more rebuild reads as the live state did.
    let probe = Probe::of(&app.db);
    let live = probe.snapshot().await;
    unicity::services::projections::rebuild(&app.db)
        .await
        .expect("rebuild");
    let again = probe.snapshot().await;
    assert_same_projections(&live, &again, &["deliveries", "effects"]);
}

/// On PostgreSQL a rebuild starts from the journal's fence, which waits for
/// appends under way; one that holds the journal's lock longer than the
/// fence waits at a time (a batch's slow commit) delays the rebuild
/// instead of failing it.
#[tokio::test]
async fn a_rebuild_waits_out_an_append_that_holds_the_journal_longer_than_one_try() {
    let app = spawn_app_with("").await;
    if !app.is_postgres() {
        return; // SQLite's rebuild waits on its write lock, as every writer
    }
    let first = app
        .post_signed("hmac", &refund("pay_fence", 500, Some("rr_fence")))
        .await;
    assert_eq!(first.status, 202, "{}", first.json);
    // An append under way: the journal's lock, held shared for 400 ms.
    let appending = crate::support::held::AdminChange::begin(&app.database_url).await;
    appending
        .execute("SELECT pg_advisory_xact_lock_shared(1970170218, 0)")
        .await;
    let released = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        appending.commit_once_waited_on().await;
    });

    let replayed = unicity::services::projections::rebuild(&app.db).await;

    released.await.expect("released");
    let replayed = replayed.expect("the rebuild waits for the append");
    assert_eq!(replayed.rows as i64, app.journal_rows().await);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM deliveries WHERE decision = 'process'")
            .await,
        1
    );
}
