//! What tests count, named after the domain: effects by status or by the
//! provider's operation, reservations by state, cases by reason, status or
//! resolution, journal events by type (about a delivery, holding a text),
//! deliveries by decision, rows of the plain tables.
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

    /// Waits until the deliveries read model holds every journal row
    /// committed so far (it follows the journal after each commit), or
    /// fails after 15 s: a count then reads what the requests before it did.
    async fn settle(&self) {
        read_model_caught_up(self.db()).await;
    }

    /// Runs a query returning one integer (counts), once the read model
    /// has caught up (`settle`).
    async fn count(&self, sql: &str) -> i64 {
        self.settle().await;
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

    /// Effects in `state` (`reserved`, `unknown`, `applied`, `failed`).
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
        self.count("SELECT COUNT(*) FROM effects WHERE state <> 'failed'")
            .await
    }

    /// Effects applied for the provider's operation `provider_ref` (the
    /// reference a case was resolved with), in any state.
    async fn effects_for_operation(&self, provider_ref: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM effects WHERE provider_ref = '{provider_ref}'"
        ))
        .await
    }

    /// Effects applied for the provider's operation `provider_ref` whose
    /// ledger row also holds the downstream's own id for them.
    async fn effects_for_operation_with_downstream_ref(&self, provider_ref: &str) -> i64 {
        self.count(&for_operation_with_downstream_ref(provider_ref))
            .await
    }

    /// Waits until `n` effects for `provider_ref` hold the downstream's id.
    async fn wait_effects_for_operation_with_downstream_ref(&self, provider_ref: &str, n: i64) {
        self.wait_for_count(&for_operation_with_downstream_ref(provider_ref), n)
            .await;
    }

    /// Links from a delivery to the effect it made or repeated.
    async fn effect_deliveries(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM effect_deliveries").await
    }

    /// Keys reserved in the fast index (not purged at their horizon), in
    /// any state.
    async fn reservations(&self) -> i64 {
        self.count(IN_FAST_INDEX).await
    }

    /// Waits until the fast index holds `n` reservations.
    async fn wait_reservations(&self, n: i64) {
        self.wait_for_count(IN_FAST_INDEX, n).await;
    }

    /// Waits until `n` reservations are in `state` (`reserved`, `applied`,
    /// `failed`, `unknown`).
    async fn wait_reservations_in(&self, state: &str, n: i64) {
        self.wait_for_count(&reservations_in(state), n).await;
    }

    /// Reservations in `state` whose key was last taken with `fencing_token`
    /// (1 on the first attempt, 2 on the retry after it, ...).
    async fn reservations_at(&self, state: &str, fencing_token: i64) -> i64 {
        self.count(&reservations_at(state, fencing_token)).await
    }

    /// Waits until `n` reservations are in `state` with `fencing_token`.
    async fn wait_reservations_at(&self, state: &str, fencing_token: i64, n: i64) {
        self.wait_for_count(&reservations_at(state, fencing_token), n)
            .await;
    }

    /// Transport links: one per distinct raw body, one per message id.
    async fn transport_links(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM transport_links").await
    }

    /// Waits until `n` strategies stand tripped (their collision breaker open).
    async fn wait_tripped_strategies(&self, n: i64) {
        self.wait_for_count("SELECT COUNT(*) FROM strategy_breakers", n)
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

    /// Cases opened for `reason` that stand `status` (`open`, `resolved`).
    async fn cases_with_status(&self, reason: &str, status: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM cases WHERE reason = '{reason}' AND status = '{status}'"
        ))
        .await
    }

    /// Cases resolved with `resolution` (`process_as_distinct`,
    /// `confirm_duplicate`, `reject`, ...).
    async fn cases_resolved_as(&self, resolution: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM cases WHERE resolution = '{resolution}'"
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

    /// Deliveries that carry no decision (refused before one was made).
    async fn undecided(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM deliveries WHERE decision IS NULL")
            .await
    }

    /// Bodies stored, one per distinct byte string.
    async fn raw_bodies(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM raw_bodies").await
    }

    /// Operator sessions, signed in or not.
    async fn sessions(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM sessions").await
    }

    /// Strategy versions recorded as first used (`strategy_versions`).
    async fn strategy_versions(&self) -> i64 {
        self.count("SELECT COUNT(*) FROM strategy_versions").await
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

    /// Journal rows of `event_type` about the delivery `delivery_id`.
    async fn journal_count_about(&self, event_type: &str, delivery_id: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM journal WHERE event_type = '{event_type}' \
             AND delivery_id = '{delivery_id}'"
        ))
        .await
    }

    /// Journal rows, of any kind, whose payload holds `text` anywhere.
    async fn journal_rows_containing(&self, text: &str) -> i64 {
        self.count(&format!(
            "SELECT COUNT(*) FROM journal WHERE CAST(data AS TEXT) LIKE '%{text}%'"
        ))
        .await
    }

    /// Journal rows of `event_type` whose payload holds `text` (a LIKE
    /// pattern: `%` stands for any text between two parts, `_` for any one
    /// character).
    async fn journal_count_containing(&self, event_type: &str, text: &str) -> i64 {
        self.count(&journaled_containing(event_type, text)).await
    }

    /// Waits until `n` rows of `event_type` hold `text` in their payload.
    async fn wait_journal_containing(&self, event_type: &str, text: &str, n: i64) {
        self.wait_for_count(&journaled_containing(event_type, text), n)
            .await;
    }
}

impl Counts for TestApp {
    fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// A search makes the server apply the journal up to its head before it
    /// reads; then the checkpoint is read as for any database.
    async fn settle(&self) {
        let _ = self
            .client
            .get(format!("{}/api/deliveries?limit=1", self.address))
            .send()
            .await;
        read_model_caught_up(self.db()).await;
    }
}

/// Waits until the deliveries read model of `db` holds every journal row
/// committed so far, or fails after 15 s (at once when either cannot be
/// read).
pub async fn read_model_caught_up(db: &DatabaseConnection) {
    use unicity::store::projector;
    let deadline = Instant::now() + PATIENCE;
    loop {
        // A test that broke the database on purpose counts what is left.
        let (Ok(head), Ok(at)) = (
            projector::head(db).await,
            projector::checkpoint(db, projector::DELIVERIES).await,
        ) else {
            return;
        };
        if at >= head {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the deliveries read model stays at {at}, behind the journal's {head}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn effects_in(state: &str) -> String {
    format!("SELECT COUNT(*) FROM effects WHERE state = '{state}'")
}

/// Keys in the fast index: rows of `effects` not purged at their horizon.
const IN_FAST_INDEX: &str = "SELECT COUNT(*) FROM effects WHERE key_purged = FALSE";

fn decided(decision: &str) -> String {
    format!("SELECT COUNT(*) FROM deliveries WHERE decision = '{decision}'")
}

fn journaled(event_type: &str) -> String {
    format!("SELECT COUNT(*) FROM journal WHERE event_type = '{event_type}'")
}

fn for_operation_with_downstream_ref(provider_ref: &str) -> String {
    format!(
        "SELECT COUNT(*) FROM effects WHERE provider_ref = '{provider_ref}' \
         AND downstream_ref IS NOT NULL"
    )
}

fn reservations_in(state: &str) -> String {
    format!("SELECT COUNT(*) FROM effects WHERE key_purged = FALSE AND state = '{state}'")
}

fn reservations_at(state: &str, fencing_token: i64) -> String {
    format!(
        "SELECT COUNT(*) FROM effects WHERE key_purged = FALSE AND state = '{state}' \
         AND fencing_token = {fencing_token}"
    )
}

fn journaled_containing(event_type: &str, text: &str) -> String {
    format!(
        "SELECT COUNT(*) FROM journal WHERE event_type = '{event_type}' \
         AND CAST(data AS TEXT) LIKE '%{text}%'"
    )
}
