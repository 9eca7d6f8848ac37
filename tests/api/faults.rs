//! Storage faults are inputs too: a disk that fills under a running server, a
//! database connection killed while idle or in the middle of a burst. What
//! must hold whatever happens: a delivery answered 2xx is in the journal after
//! a restart, no refund is processed twice, and the server accepts again on
//! its own once the fault is gone.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream;
use serde_json::json;

use crate::support::app::{Reply, TestApp, spawn_app_with, spawn_on};
use crate::support::counts::Counts;

/// A tmpfs of a chosen size, mounted for one test and unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` when this process may not mount (not root): CI runs as root and
    /// then must not skip.
    fn mount(kib: u64) -> Option<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|status| status.success());
        if mounted {
            return Some(Self { dir });
        }
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI must be able to mount a tmpfs (run as root) to test a full disk"
        );
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        None
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Gives the filesystem room again, as an operator freeing space would.
    fn grow(&self, kib: u64) {
        let status = Command::new("mount")
            .args(["-o", &format!("remount,size={kib}k")])
            .arg(self.path())
            .status()
            .expect("mount runs");
        assert!(status.success(), "tmpfs remounted larger");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A refund of about 20 KB with its own reference: a strong key of its own.
fn big_refund(reference: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "type": "refund.created",
        "payment_id": format!("pay_{reference}"),
        "refund_reference": format!("rr_{reference}"),
        "amount": 1500,
        "currency": "EUR",
        "note": "n".repeat(20_000),
    }))
    .expect("json")
}

fn is_2xx(reply: &Reply) -> bool {
    (200..300).contains(&reply.status)
}

/// Every reply each reference got, in the order they came.
#[derive(Default)]
struct Ledger {
    replies: HashMap<usize, Vec<Reply>>,
}

impl Ledger {
    fn record(&mut self, reference: usize, reply: Reply) {
        self.replies.entry(reference).or_default().push(reply);
    }

    fn unacknowledged(&self) -> Vec<usize> {
        let mut refs: Vec<usize> = self
            .replies
            .iter()
            .filter(|(_, replies)| !replies.iter().any(is_2xx))
            .map(|(reference, _)| *reference)
            .collect();
        refs.sort_unstable();
        refs
    }

    fn acknowledged_ids(&self) -> Vec<String> {
        self.replies
            .values()
            .flatten()
            .filter(|reply| is_2xx(reply))
            .map(|reply| reply.json["delivery_id"].as_str().expect("id").to_owned())
            .collect()
    }

    fn count(&self, status: u16) -> usize {
        self.replies
            .values()
            .flatten()
            .filter(|reply| reply.status == status)
            .count()
    }

    /// Each reference was processed exactly once among its acknowledged replies.
    fn assert_each_processed_once(&self) {
        for (reference, replies) in &self.replies {
            let decisions: Vec<&str> = replies
                .iter()
                .filter(|reply| is_2xx(reply))
                .map(|reply| reply.json["decision"].as_str().unwrap_or("?"))
                .collect();
            let processed = decisions.iter().filter(|d| **d == "process").count();
            assert_eq!(processed, 1, "rr_{reference}: {decisions:?}");
        }
    }
}

async fn send_all(app: &TestApp, refs: impl IntoIterator<Item = usize>, ledger: &mut Ledger) {
    let replies: Vec<(usize, Reply)> = stream::iter(refs)
        .map(|reference| async move {
            let reply = app.post_signed("open", &big_refund(reference)).await;
            (reference, reply)
        })
        .buffer_unordered(8)
        .collect()
        .await;
    for (reference, reply) in replies {
        assert!(
            is_2xx(&reply) || reply.status == 503,
            "a delivery is acknowledged or retried, never refused: {} {}",
            reply.status,
            reply.json
        );
        ledger.record(reference, reply);
    }
}

/// Provider retries: resends every unacknowledged reference until each got a
/// 2xx, a few rounds at most.
async fn retry_until_acknowledged(app: &TestApp, ledger: &mut Ledger) {
    for _ in 0..20 {
        let missing = ledger.unacknowledged();
        if missing.is_empty() {
            return;
        }
        send_all(app, missing, ledger).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "still refused once the disk had room: {:?}",
        ledger.unacknowledged()
    );
}

async fn readiness(app: &TestApp) -> u16 {
    app.get("/readyz").await.status
}

/// After a restart, every acknowledged delivery is in the journal.
async fn assert_all_journaled_after_restart(url: &str, ledger: &Ledger) {
    let restarted = spawn_on(url, "", None).await;
    let ids = ledger.acknowledged_ids();
    for id in &ids {
        let shown = restarted.delivery(id).await;
        assert_eq!(shown.status, 200, "acknowledged {id} is not in the journal");
    }
    let references = ledger.replies.len() as i64;
    assert_eq!(
        restarted.applied_effects().await,
        references,
        "one refund per reference, no more"
    );
}

#[tokio::test]
async fn a_full_disk_loses_no_acknowledged_delivery_and_heals_without_a_restart() {
    if std::env::var("TEST_DATABASE_URL").is_ok_and(|url| !url.is_empty()) {
        return; // SQLite's disk; the SQLite run covers it.
    }
    let Some(disk) = SmallDisk::mount(3 * 1024) else {
        return;
    };
    let url = format!("sqlite://{}/unicity.db?mode=rwc", disk.path().display());
    let app = spawn_on(&url, "", None).await;
    let mut ledger = Ledger::default();

    // ~6 MB of deliveries into a 3 MiB filesystem.
    send_all(&app, 0..300, &mut ledger).await;
    assert!(ledger.count(503) > 0, "the disk never filled");
    assert!(ledger.count(200) + ledger.count(202) > 0);

    // While full: a delivery that cannot be stored is refused, and the
    // server says it is not ready.
    let mut refused = false;
    for reference in 300..320 {
        let reply = app.post_signed("open", &big_refund(reference)).await;
        let status = reply.status;
        ledger.record(reference, reply);
        if status == 503 {
            refused = true;
            assert_eq!(readiness(&app).await, 503, "/readyz hides a failing writer");
            break;
        }
    }
    assert!(refused, "a full disk accepted deliveries");

    // Room again: no restart, the provider's retries are accepted.
    disk.grow(256 * 1024);
    retry_until_acknowledged(&app, &mut ledger).await;
    let mut ready = false;
    for _ in 0..50 {
        if readiness(&app).await == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "/readyz stays unready once the writer commits again");
    // Retries of acknowledged refunds are duplicates, never a second refund.
    send_all(&app, 0..20, &mut ledger).await;

    ledger.assert_each_processed_once();
    assert_all_journaled_after_restart(&url, &ledger).await;
    eprintln!(
        "full disk: {} references, {} answers 2xx, {} answers 503, all 2xx journaled",
        ledger.replies.len(),
        ledger.count(200) + ledger.count(202),
        ledger.count(503)
    );
}

/// Terminates every other connection to the test's PostgreSQL database: the
/// server's writers and readers, as a failover or an administrator would.
async fn kill_connections(app: &TestApp) -> i64 {
    app.count(
        "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .await
}

#[tokio::test]
async fn a_postgres_connection_killed_while_idle_costs_no_delivery_a_retry() {
    let app = spawn_app_with("").await;
    if !app.is_postgres() {
        return;
    }
    let mut ledger = Ledger::default();
    send_all(&app, 0..4, &mut ledger).await;
    assert!(ledger.unacknowledged().is_empty());
    assert!(
        kill_connections(&app).await > 0,
        "the server had connections"
    );

    // The writer's next batch begins on a fresh connection instead of failing.
    let reply = app.post_signed("open", &big_refund(4)).await;
    assert_eq!(reply.status, 202, "{}", reply.json);
    assert_eq!(reply.json["decision"], "process");
}

#[tokio::test]
async fn postgres_connections_killed_mid_burst_lose_no_acknowledged_delivery() {
    let (url, _) = crate::support::app::fresh_database().await;
    if !url.starts_with("postgres") {
        return;
    }
    let app = spawn_on(&url, "", None).await;
    let mut ledger = Ledger::default();
    let killer = async {
        for _ in 0..5 {
            tokio::time::sleep(Duration::from_millis(40)).await;
            kill_connections(&app).await;
        }
    };
    let burst = async {
        let mut burst = Ledger::default();
        send_all(&app, 0..200, &mut burst).await;
        burst
    };
    let ((), burst) = tokio::join!(killer, burst);
    for (reference, replies) in burst.replies {
        for reply in replies {
            ledger.record(reference, reply);
        }
    }
    retry_until_acknowledged(&app, &mut ledger).await;
    ledger.assert_each_processed_once();
    assert_all_journaled_after_restart(&url, &ledger).await;
}

/// A PostgreSQL table held in EXCLUSIVE mode from a connection of the
/// test's own, as an administrator's long transaction would hold it.
struct Held {
    other: sea_orm::DatabaseConnection,
    holding: sea_orm::DatabaseTransaction,
}

impl Held {
    async fn lock(app: &TestApp, table: &str) -> Self {
        use sea_orm::{ConnectionTrait, TransactionTrait};
        let other = sea_orm::Database::connect(app.database_url.as_str())
            .await
            .expect("a connection");
        let holding = other.begin().await.expect("begun");
        holding
            .execute_unprepared(&format!("LOCK TABLE {table} IN EXCLUSIVE MODE"))
            .await
            .expect("the table held");
        Self { other, holding }
    }

    /// Once a transaction waits on the lock, kills its backend, then lets
    /// the table go.
    async fn kill_the_waiting(self) {
        use sea_orm::ConnectionTrait;
        let waiting = sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT COUNT(*) AS n FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        );
        let started = std::time::Instant::now();
        loop {
            let row = self
                .other
                .query_one_raw(waiting.clone())
                .await
                .expect("read");
            if row
                .expect("a row")
                .try_get::<i64>("", "n")
                .expect("a count")
                > 0
            {
                break;
            }
            assert!(
                started.elapsed().as_secs() < 30,
                "nothing waits on the lock"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.holding
            .execute_unprepared(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock' \
                 AND pid <> pg_backend_pid()",
            )
            .await
            .expect("killed");
        self.holding.rollback().await.expect("released");
    }
}

/// The downstream applied a refund, and the connection writing its
/// settlement was killed (a failover, an administrator): the settlement is
/// written on a fresh connection, not left for the lease to expire into an
/// unknown outcome and a case for a person.
#[tokio::test]
async fn a_settlement_whose_connection_was_killed_is_written_on_a_fresh_one() {
    use crate::support::downstream::{Behaviour, Downstream};
    let downstream = Downstream::start(Behaviour::Apply { delay_ms: 1000 }).await;
    let app = spawn_app_with(&downstream.sink_toml(5000)).await;
    if app.db.get_database_backend() != sea_orm::DbBackend::Postgres {
        return; // A PostgreSQL backend to kill; the PostgreSQL run covers it.
    }
    // Given the effects' table held while a refund's call ends: its
    // settlement waits on the lock
    let body = crate::support::app::refund("pay_kill", 300, Some("rr_kill"));
    let sent = app.post_signed("hmac", &body).await;
    assert_eq!(sent.json["decision"], "process", "{}", sent.json);
    let held = Held::lock(&app, "effects").await;
    // When its connection is killed
    held.kill_the_waiting().await;
    // Then the refund is settled applied all the same
    app.wait_applied(1).await;
    assert_eq!(app.journal_count("EffectOutcomeUnknown").await, 0);
    assert_eq!(downstream.calls().len(), 1);
}

/// With a transaction per delivery (`group_commit = false`) too, readiness
/// comes back with the database, not with the next delivery: a load
/// balancer that sends nothing to an unready server would otherwise never
/// send it any. (On SQLite the read model's projector writes through the
/// writer and heals it by the way; on PostgreSQL nothing else writes.)
#[tokio::test]
async fn without_group_commit_readiness_comes_back_with_the_database_while_nothing_arrives() {
    let app = spawn_app_with("[engine]\ngroup_commit = false\n").await;
    if app.db.get_database_backend() != sea_orm::DbBackend::Postgres {
        return; // A PostgreSQL backend to kill; the PostgreSQL run covers it.
    }
    // Given a delivery's transaction waiting on the journal, and killed
    let held = Held::lock(&app, "journal").await;
    let body = crate::support::app::refund("pay_ready", 300, Some("rr_ready"));
    let killing = held.kill_the_waiting();
    let (refused, ()) = tokio::join!(app.post_signed("hmac", &body), killing);
    assert_eq!(refused.status, 503, "{}", refused.json);
    // When the database is back and no delivery arrives, then the server
    // is ready again on its own
    let mut ready = false;
    for _ in 0..50 {
        if readiness(&app).await == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ready, "/readyz stays unready until a delivery arrives");
}
