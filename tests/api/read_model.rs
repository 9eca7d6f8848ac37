//! The deliveries read model follows the journal after the commit: a
//! delivery's own page never waits for it, a search catches it up before
//! reading, `/readyz` reports its lag, it resumes from its checkpoint after a
//! crash, and on PostgreSQL a slow commit holding a lower journal position is
//! never skipped by one that committed after it.

use std::sync::Arc;
use std::time::Duration;

use sea_orm::{ConnectionTrait, DbBackend, Statement};
use unicity::domain::journal::{JournalEvent, LoginFailed};

use crate::support::app::{TestApp, refund, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::probe::{Probe, assert_same_projections};

/// A server whose projector task applies the journal once an hour: only
/// readers move the read model.
const IDLE_PROJECTOR: &str = "[engine]\nread_model_pace_ms = 3600000\n";

/// Rows of `deliveries` for `id`, read as they are (no waiting).
async fn rows_now(app: &TestApp, id: &str) -> i64 {
    let backend = app.db.get_database_backend();
    let row = app
        .db
        .query_one_raw(Statement::from_string(
            backend,
            format!("SELECT COUNT(*) FROM deliveries WHERE delivery_id = '{id}'"),
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

async fn ready(app: &TestApp) -> serde_json::Value {
    let reply = reqwest::get(format!("{}/readyz", app.address))
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    reply.json().await.unwrap()
}

#[tokio::test]
async fn a_delivery_reads_from_the_journal_at_once_and_a_search_first_catches_the_read_model_up() {
    let app = spawn_app_with(IDLE_PROJECTOR).await;
    // Whatever startup journaled is applied by the first search.
    assert_eq!(app.get("/api/deliveries?limit=1").await.status, 200);

    let posted = app
        .post_signed("hmac", &refund("pay_rm1", 700, Some("rr_rm1")))
        .await;
    assert_eq!(posted.status, 202, "{}", posted.json);
    let id = posted.json["delivery_id"].as_str().unwrap().to_owned();

    // Decided and durable, not yet in the read model, which says so.
    assert_eq!(rows_now(&app, &id).await, 0);
    let behind = ready(&app).await;
    assert!(
        behind["read_model"]["behind"].as_i64().unwrap() >= 1,
        "{behind}"
    );
    assert!(
        behind["read_model"]["lag_ms"].as_i64().is_some(),
        "{behind}"
    );

    // Its own page reads the journal.
    let page = app.get(&format!("/api/deliveries/{id}")).await;
    assert_eq!(page.status, 200, "{}", page.json);
    assert_eq!(page.json["decision"]["action"], "process", "{}", page.json);

    // A search applies the journal up to what was committed before it.
    let found = app.get("/api/deliveries?q=pay_rm1").await;
    assert_eq!(found.status, 200, "{}", found.json);
    let ids: Vec<&str> = found.json["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["delivery_id"].as_str())
        .collect();
    assert_eq!(ids, [id.as_str()], "{}", found.json);
    assert_eq!(found.json["freshness"]["behind"], 0, "{}", found.json);
    assert_eq!(rows_now(&app, &id).await, 1);
    let caught_up = ready(&app).await;
    assert_eq!(caught_up["read_model"]["behind"], 0, "{caught_up}");
}

#[tokio::test]
async fn the_read_model_resumes_from_its_checkpoint_to_the_rows_it_had() {
    let app = spawn_app_with(IDLE_PROJECTOR).await;
    for (n, payment) in ["pay_rr1", "pay_rr2", "pay_rr1", "pay_rr3"]
        .iter()
        .enumerate()
    {
        let reference = format!("rr_{payment}");
        let reply = app
            .post_signed("hmac", &refund(payment, 100 + n as u64, Some(&reference)))
            .await;
        assert!([200, 202].contains(&reply.status), "{}", reply.json);
    }
    let probe = Probe::of(&app.db);
    app.settle().await;
    let before = probe.snapshot().await;
    assert_eq!(app.count("SELECT COUNT(*) FROM deliveries").await, 4);

    // A crash that lost the last stretches: their rows and the checkpoint
    // went together (one transaction), back to some earlier position.
    let backend = app.db.get_database_backend();
    let half = app
        .count("SELECT MIN(position) + 1 FROM journal WHERE event_type = 'DeliveryDecided'")
        .await;
    for sql in [
        format!(
            "DELETE FROM deliveries WHERE delivery_id IN \
             (SELECT delivery_id FROM journal WHERE position > {half} AND delivery_id IS NOT NULL)"
        ),
        format!("UPDATE projector_checkpoints SET position = {half}"),
    ] {
        app.db
            .execute_raw(Statement::from_string(backend, sql))
            .await
            .unwrap();
    }
    assert!(
        probe_rows_now(&app).await < 4,
        "the crash lost rows to replay"
    );
    app.settle().await;
    assert_same_projections(&before, &probe.snapshot().await, &["deliveries"]);

    // Applying again what was applied changes nothing.
    app.db
        .execute_raw(Statement::from_string(
            backend,
            "UPDATE projector_checkpoints SET position = 0".to_owned(),
        ))
        .await
        .unwrap();
    app.settle().await;
    assert_same_projections(&before, &probe.snapshot().await, &["deliveries"]);
}

async fn probe_rows_now(app: &TestApp) -> i64 {
    let row = app
        .db
        .query_one_raw(Statement::from_string(
            app.db.get_database_backend(),
            "SELECT COUNT(*) FROM deliveries".to_owned(),
        ))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

/// PostgreSQL commits transactions in any order. A delivery's commit is held
/// 1.5 s at its end (a deferred trigger) while another transaction appends
/// to the journal after it and commits: the projector must wait for the
/// first rather than move its checkpoint past it.
#[tokio::test]
async fn a_slow_commit_with_a_lower_journal_position_is_never_skipped() {
    let app = Arc::new(spawn_app_with("[engine]\nread_model_pace_ms = 20\n").await);
    if !app.is_postgres() {
        return;
    }
    for sql in [
        "CREATE TABLE slow_commits (n INTEGER NOT NULL)",
        "INSERT INTO slow_commits VALUES (1)",
        "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN \
           IF NEW.event_type = 'DeliveryDecided' THEN \
             UPDATE slow_commits SET n = n - 1 WHERE n > 0; \
             IF FOUND THEN PERFORM pg_sleep(1.5); END IF; \
           END IF; \
           RETURN NULL; \
         END $$",
        "CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON journal \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()",
    ] {
        app.db
            .execute_raw(Statement::from_string(DbBackend::Postgres, sql.to_owned()))
            .await
            .unwrap();
    }
    app.settle().await;

    let slow = {
        let app = app.clone();
        tokio::spawn(async move {
            app.post_signed("hmac", &refund("pay_slow", 700, Some("rr_slow")))
                .await
        })
    };
    // The slow delivery holds its position and waits at its commit; another
    // writer appends after it and commits at once.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!slow.is_finished(), "the delivery's commit is held");
    unicity::store::transaction(&app.db, async |tx| {
        let event = JournalEvent::LoginFailed(LoginFailed {
            name: "someone".to_owned(),
            operator_id: None,
            reason: "unknown_name".to_owned(),
            client: None,
        });
        tx.record(None, event, chrono::Utc::now()).await
    })
    .await
    .unwrap();
    // The projector runs every 20 ms meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let posted = slow.await.unwrap();
    assert_eq!(posted.status, 202, "{}", posted.json);
    let id = posted.json["delivery_id"].as_str().unwrap().to_owned();
    app.settle().await;
    assert_eq!(rows_now(&app, &id).await, 1, "the slow delivery is listed");
}

#[tokio::test]
async fn a_report_says_when_the_read_model_is_behind_and_catch_up_applies_the_journal() {
    let app = spawn_app_with(IDLE_PROJECTOR).await;
    assert_eq!(app.get("/api/deliveries?limit=1").await.status, 200);
    let mut ids = Vec::new();
    for payment in ["pay_cu1", "pay_cu2"] {
        let reply = app
            .post_signed(
                "hmac",
                &refund(payment, 500, Some(&format!("rr_{payment}"))),
            )
            .await;
        assert_eq!(reply.status, 202, "{}", reply.json);
        ids.push(reply.json["delivery_id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        assert_eq!(rows_now(&app, id).await, 0);
    }
    let deliveries = |out: &str| -> i64 {
        let lines: serde_json::Value = serde_json::from_str(out).expect("the list as JSON");
        lines
            .as_array()
            .expect("lines")
            .iter()
            .map(|l| l["deliveries"].as_i64().unwrap_or(0))
            .sum()
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let list = || {
        let mut list =
            crate::support::processes::cli(&app.database_url, IDLE_PROJECTOR, dir.path());
        list.args(["strategies", "list", "--json"]);
        list
    };

    // A report read from the read model says what it leaves out,
    let (out, err) = crate::support::processes::finished_saying(list()).await;
    assert!(err.contains("does not hold the journal's last"), "{err}");
    assert!(err.contains("projections catch-up"), "{err}");
    let before = deliveries(&out);

    // the command applies the journal up to its head,
    let mut catch_up =
        crate::support::processes::cli(&app.database_url, IDLE_PROJECTOR, dir.path());
    catch_up.args(["projections", "catch-up"]);
    let out = crate::support::processes::finished(catch_up).await;
    assert!(out.contains("rows were behind"), "{out}");
    for id in &ids {
        assert_eq!(rows_now(&app, id).await, 1);
    }
    assert_eq!(ready(&app).await["read_model"]["behind"], 0);

    // and the report then counts both deliveries, with nothing to say.
    let (out, err) = crate::support::processes::finished_saying(list()).await;
    assert!(!err.contains("read model"), "{err}");
    assert_eq!(deliveries(&out), before + 2, "{out}");
}

#[tokio::test]
async fn a_journal_row_the_projector_cannot_read_stops_it_in_plain_sight_without_quoting_it() {
    let logs = crate::support::logs::logs();
    // The projector's task runs a round every 20 ms.
    let app = spawn_app_with("[engine]\nread_model_pace_ms = 20\n").await;
    assert_eq!(app.get("/api/deliveries?limit=1").await.status, 200);
    // A decision row no binary can read (a bug's, a damaged disk's), holding
    // a value that must never reach a log or a page.
    let secret = format!("secret-{}", uuid::Uuid::now_v7().simple());
    let bad = unicity::store::entities::journal::ActiveModel {
        position: sea_orm::ActiveValue::NotSet,
        delivery_id: sea_orm::ActiveValue::Set(Some(uuid::Uuid::now_v7().to_string())),
        event_type: sea_orm::ActiveValue::Set("DeliveryDecided".into()),
        event_version: sea_orm::ActiveValue::Set(1),
        data: sea_orm::ActiveValue::Set(serde_json::json!({ "received": secret })),
        recorded_at: sea_orm::ActiveValue::Set(chrono::Utc::now()),
    };
    let position = sea_orm::EntityTrait::insert(bad)
        .exec(&app.db)
        .await
        .expect("a row appended")
        .last_insert_id;
    let posted = app
        .post_signed("hmac", &refund("pay_bad1", 900, Some("rr_bad1")))
        .await;
    assert_eq!(posted.status, 202, "{}", posted.json);

    // A search does not wait out its two seconds for a row it cannot read:
    // it answers at once, saying where the read model stopped.
    let started = std::time::Instant::now();
    let found = app.get("/api/deliveries?q=pay_bad1").await;
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(found.status, 200, "{}", found.json);
    assert_eq!(
        found.json["freshness"]["stopped_at"], position,
        "{}",
        found.json
    );
    assert!(
        found.json["freshness"]["behind"].as_i64().unwrap() >= 2,
        "{}",
        found.json
    );
    let ready = ready(&app).await;
    assert_eq!(ready["read_model"]["stopped_at"], position, "{ready}");

    // The server's log names the row and the kind of fault, once, not once
    // every round; neither it nor a page quotes the value.
    let stop = format!("stopped before journal row {position}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let text = logs.text();
    assert_eq!(text.matches(&stop).count(), 1, "{text}");
    assert!(!text.contains(&secret), "the payload reached the log");
    assert!(!found.json.to_string().contains(&secret));
    let mut browser =
        crate::support::forms::signed_in(&app, "agent-stop", unicity::auth::Role::Support).await;
    // The page found nothing, and says why it may have missed it.
    let page = browser.get("/deliveries?q=pay_bad1").await.body;
    assert!(page.contains("No match for"), "{page}");
    assert!(page.contains(&stop), "{page}");
    assert!(!page.contains(&secret));
}
