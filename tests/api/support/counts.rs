//! What tests count, named after the domain: effects by status, cases,
//! journal events by type, deliveries by decision, rows of the plain tables.
//! Each method is one fixed query; a one-off question stays SQL at its test,
//! through `count`. A test server (`TestApp`) and a reader of another
//! process's database (`Probe`) count the same way.

use std::time::{Duration, Instant};

use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};

use super::app::TestApp;

/// How long a `wait_*` keeps asking before it fails.
const PATIENCE: Duration = Duration::from_secs(15);

/// Counting over a database: `db` is all an implementor gives.
pub trait Counts {
    /// The database counted.
    fn db(&self) -> &DatabaseConnection;

    /// Runs a query returning one integer (counts).
    async fn count(&self, sql: &str) -> i64 {
        let db = self.db();
        let row = db
            .query_one_raw(Statement::from_string(
                db.get_database_backend(),
                sql.to_owned(),
            ))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .expect("one row");
        row.try_get_by_index::<i64>(0).expect("integer")
    }

    /// Waits until `sql` (a count) reaches `expected`, or fails after 15 s.
    async fn wait_for_count(&self, sql: &str, expected: i64) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let value = self.count(sql).await;
            if value == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for `{sql}` = {expected} (still {value})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Effects in any state.
    async fn effects(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM effects").await
    }

    /// Effects in `status` (`pending`, `unknown`, `applied`, `failed`).
    async fn effects_in(&self, status: &str) -> i64 {
        self.count(&effects_in(status)).await
    }

    /// Waits until `n` effects are in `status`.
    async fn wait_effects_in(&self, status: &str, n: i64) {
        self.wait_for_count(&effects_in(status), n).await;
    }

    /// Effects settled applied: made downstream, as far as Unicity knows.
    async fn applied_effects(&self) -> i64 {
        self.effects_in("applied").await
    }

    /// Waits until `n` effects are settled applied.
    async fn wait_applied(&self, n: i64) {
        self.wait_effects_in("applied", n).await;
    }

    /// Effects in a state that may have moved money: any but `failed`.
    async fn live_effects(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM effects WHERE status <> 'failed'")
            .await
    }

    /// Links from a delivery to the effect it made or repeated.
    async fn effect_deliveries(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM effect_deliveries").await
    }

    /// Keys reserved in the fast index, in any state.
    async fn reservations(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM reservations").await
    }

    /// Waits until the fast index holds `n` reservations.
    async fn wait_reservations(&self, n: i64) {
        self.wait_for_count("SELECT COUNT(*) FROM reservations", n)
            .await;
    }

    /// Cases, open or resolved.
    async fn cases(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM cases").await
    }

    /// Cases waiting for a decision.
    async fn open_cases(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM cases WHERE status = 'open'")
            .await
    }

    /// Cases opened for `reason`, open or resolved.
    async fn cases_with(&self, reason: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM cases WHERE reason = '{reason}'"
        ))
        .await
    }

    /// Waits until `n` cases are resolved.
    async fn wait_resolved_cases(&self, n: i64) {
        self.wait_for_count("SELECT COUNT(*) FROM cases WHERE status = 'resolved'", n)
            .await;
    }

    /// Waits until the case `case_id` is resolved.
    async fn wait_case_resolved(&self, case_id: &str) {
        self.wait_for_count(
            &format!(
                "SELECT COUNT(*) FROM cases WHERE case_id = '{case_id}' AND status = 'resolved'"
            ),
            1,
        )
        .await;
    }

    /// Deliveries received, whatever became of them.
    async fn deliveries(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM deliveries").await
    }

    /// Deliveries decided `decision` (`process`, `ignore`, `defer`, ...).
    async fn decided(&self, decision: &str) -> i64 {
        self.count(&decided(decision)).await
    }

    /// Waits until `n` deliveries stand decided `decision`.
    async fn wait_decided(&self, decision: &str, n: i64) {
        self.wait_for_count(&decided(decision), n).await;
    }

    /// Bodies stored, one per distinct byte string.
    async fn raw_bodies(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM raw_bodies").await
    }

    /// Operator sessions, signed in or not.
    async fn sessions(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM sessions").await
    }

    /// Journal rows of every kind.
    async fn journal_rows(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM journal").await
    }

    /// Journal rows that name a delivery.
    async fn delivery_rows(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM journal WHERE delivery_id IS NOT NULL")
            .await
    }

    /// Journal rows of `event_type`, its stored name (`CaseResolved`).
    async fn journal_count(&self, event_type: &str) -> i64 {
        self.count(&journaled(event_type)).await
    }

    /// Waits until the journal holds `n` rows of `event_type`.
    async fn wait_journal(&self, event_type: &str, n: i64) {
        self.wait_for_count(&journaled(event_type), n).await;
    }
}

impl Counts for TestApp {
    fn db(&self) -> &DatabaseConnection {
        &self.db
    }
}

fn effects_in(status: &str) -> String {
    format!("SELECT COUNT(*) FROM effects WHERE status = '{status}'")
}

fn decided(decision: &str) -> String {
    format!("SELECT COUNT(*) FROM deliveries WHERE decision = '{decision}'")
}

fn journaled(event_type: &str) -> String {
    format!("SELECT COUNT(*) FROM journal WHERE event_type = '{event_type}'")
}
