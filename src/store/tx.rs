//! One write transaction as a job sees it: named operations on what a
//! decision reads (a transport link, a key's rows in the fast index or the ledger)
//! and claims (a link, a reservation, a re-decision), the rows it defers, and
//! the events it journals.
//!
//! Whether claims are made against a group-commit batch's key index or in the
//! database (direct mode, or a job that may read anything) is decided here,
//! by the rows the writer hands the job (`Deferred::with_index` or not), never
//! by the caller. A job given an index writes nothing itself: it claims in
//! memory, defers its rows and `append`s its events; `record` and `claim`,
//! which apply a projection at once, are for jobs without one.

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DatabaseTransaction, DbErr, TransactionTrait};

use super::deferred::Deferred;
use super::entities::{effect, migrated_key, transport_link};
use super::key_index::IndexKeys;
use super::key_state::{self, KeyState};
use super::projections::{self, deliveries, migrations};
use super::{journal, ledger, links, reservations};
use crate::domain::decision::TransportMatch;
use crate::domain::delivery::{BodyRef, DeliveryId};
use crate::domain::journal::{JournalEvent, KeyDerived, KeySummary, KeyTaken};
use crate::domain::plan::{self, Given, Plan};
use crate::domain::reservation::ReservationState;

/// A new delivery and its planned decision, to record (`Tx::decided`).
pub struct Decided<'a> {
    pub id: DeliveryId,
    /// What its deferral row would hold (`deliveries::Arrival`).
    pub arrival: &'a deliveries::Arrival,
    pub reception: journal::ReceptionText,
    pub derived: &'a KeyDerived,
    pub plan: Plan,
}

/// A job's handle on the write transaction it runs in.
pub struct Tx<'t> {
    txn: &'t DatabaseTransaction,
    rows: Deferred,
    /// Events and rows journaled through this handle, in the order they
    /// were recorded; events are serialised only at the end.
    events: Vec<Entry>,
}

/// One entry of a job's journal: an event, or a row made by the job.
enum Entry {
    Event(Option<DeliveryId>, Box<JournalEvent>, DateTime<Utc>),
    Row(journal::Row),
}

/// Runs `work` in a write transaction of its own, outside the writer (an
/// operator's, a strategy's, a breaker's or a retention action), through the
/// same `Tx` the writer's jobs use: its events reach the journal the one way
/// they all do, with the rows it deferred, just before the commit. An error
/// rolls everything back.
///
/// On SQLite it is `IMMEDIATE`: the database's writer from its first read,
/// waiting its turn. A deferred transaction that read, then wrote after the
/// writer had committed (a batch, the read model's projector) would fail at
/// once (`SQLITE_BUSY_SNAPSHOT`, which no busy timeout waits out).
pub async fn transaction<T, E>(
    db: &DatabaseConnection,
    work: impl AsyncFnOnce(&mut Tx<'_>) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<DbErr>,
{
    let immediate = sea_orm::TransactionOptions {
        sqlite_transaction_mode: Some(sea_orm::SqliteTransactionMode::Immediate),
        ..sea_orm::TransactionOptions::default()
    };
    let txn = db.begin_with_options(immediate).await?;
    let mut tx = Tx::new(&txn, Deferred::default());
    let value = work(&mut tx).await?;
    tx.into_rows().flush(&txn).await?;
    txn.commit().await?;
    Ok(value)
}

impl<'t> Tx<'t> {
    /// A job's handle: claims go through `rows`' index if it has one.
    pub(crate) fn new(txn: &'t DatabaseTransaction, rows: Deferred) -> Self {
        Self {
            txn,
            rows,
            events: Vec::new(),
        }
    }

    /// What the job left to write: its deferred rows, its events last.
    pub(crate) fn into_rows(mut self) -> Deferred {
        let rows = self
            .events
            .into_iter()
            .map(|entry| match entry {
                Entry::Event(delivery_id, event, at) => journal::row(delivery_id, &event, at),
                Entry::Row(row) => row,
            })
            .collect();
        self.rows.journal_rows(rows);
        self.rows
    }

    /// The transaction itself, for the store's own state tables (operators,
    /// tokens, strategy versions) written beside the events, and for tests
    /// that read what a batch holds. Never for the journal.
    pub(crate) fn connection(&self) -> &DatabaseTransaction {
        self.txn
    }

    /// How `derived`'s transport identity matched, with its first reception:
    /// claimed for `delivery_id` when this is that reception (`FirstSeen`).
    pub async fn claim_transport(
        &mut self,
        delivery_id: DeliveryId,
        derived: &KeyDerived,
        by_header: bool,
        at: DateTime<Utc>,
    ) -> Result<(TransportMatch, Option<DeliveryId>), DbErr> {
        let link = self
            .claim_transport_link(&delivery_id.to_string(), derived, at)
            .await?;
        let first = link.as_ref().and_then(|l| l.first_delivery_id.parse().ok());
        let ours = derived.body_fingerprint.as_deref().unwrap_or_default();
        let seen = link.as_ref().map(|l| (first, l.body_fingerprint.as_str()));
        Ok((plan::transport_match(seen, ours, by_header), first))
    }

    /// The link of `derived`'s transport key, or `None` after claiming it
    /// for `delivery_id` (its first reception).
    async fn claim_transport_link(
        &mut self,
        delivery_id: &str,
        derived: &KeyDerived,
        at: DateTime<Utc>,
    ) -> Result<Option<transport_link::Model>, DbErr> {
        let key = &derived.transport_key;
        let Some(index) = self.rows.index() else {
            if deliveries::insert_transport_link(self.txn, delivery_id, derived, at).await? == 1 {
                return Ok(None);
            }
            return links::find(self.txn, key).await;
        };
        if index.link(key).is_none() {
            let keys = IndexKeys {
                transport: Some(key.clone()),
                business: Vec::new(),
            };
            index.load(self.txn, [&keys]).await?;
        }
        let known = index.link(key).flatten().cloned();
        if known.is_none() {
            self.rows
                .link(deliveries::transport_link(delivery_id, derived, at));
        }
        Ok(known)
    }

    /// The rows of `keys` (a key and older versions' keys), in the fast
    /// index or purged from it. Without an index, on PostgreSQL, they stay
    /// locked until the commit.
    async fn rows(&mut self, keys: &[String]) -> Result<Vec<effect::Model>, DbErr> {
        let Some(index) = self.indexed(keys).await? else {
            return reservations::for_decision(self.txn, keys).await;
        };
        Ok(keys
            .iter()
            .filter_map(|k| index.row(k).flatten().cloned())
            .collect())
    }

    /// The index, once it knows the rows of the business keys `keys`.
    async fn indexed(
        &mut self,
        keys: &[String],
    ) -> Result<Option<&mut super::key_index::KeyIndex>, DbErr> {
        let Some(index) = self.rows.index() else {
            return Ok(None);
        };
        let keys = IndexKeys {
            transport: None,
            business: keys.to_vec(),
        };
        if !index.covers(&keys) {
            index.load(self.txn, [&keys]).await?;
        }
        Ok(Some(index))
    }

    /// The ledger rows of keys no index holds (retired versions' keys).
    async fn retired_ledger(&self, keys: &[String]) -> Result<Vec<effect::Model>, DbErr> {
        ledger::of_keys(self.txn, keys).await
    }

    /// Every effect under the business keys `keys` that may have moved
    /// money (see `ledger::live_effects`), as this transaction sees them: a
    /// job without an index sees every row written before it.
    pub async fn live_effects(&self, keys: &[String]) -> Result<Vec<effect::Model>, DbErr> {
        ledger::live_effects(self.txn, keys).await
    }

    /// The effects of `effect_type` citing one of the provider operations
    /// `refs`.
    pub async fn citing(
        &self,
        effect_type: &str,
        refs: &[String],
    ) -> Result<Vec<effect::Model>, DbErr> {
        ledger::citing(self.txn, effect_type, refs).await
    }

    /// The effects migrated keys among `keys` stand for (see `migrations`).
    pub async fn migrated_effects(
        &self,
        keys: &[String],
    ) -> Result<Vec<(migrated_key::Model, effect::Model)>, DbErr> {
        migrations::migrated_effects(self.txn, keys).await
    }

    /// The row of `key` as the database holds it now (a job without an
    /// index).
    pub async fn reservation(&self, key: &str) -> Result<Option<effect::Model>, DbErr> {
        reservations::find(self.txn, key).await
    }

    /// The open case the expiry of `effect_id`'s lease under
    /// `fencing_token` opened, filed under the key's first delivery.
    pub async fn open_expiry(
        &self,
        first_delivery_id: &str,
        effect_id: uuid::Uuid,
        fencing_token: i64,
    ) -> Result<Option<uuid::Uuid>, DbErr> {
        super::cases::open_expiry(self.txn, first_delivery_id, effect_id, fencing_token).await
    }

    /// Claims `taken`'s key (see `projections::reserve`); false when the
    /// key is taken. What taking it journals is recorded with the decision
    /// (`decided`) or by `append_taken`.
    pub async fn reserve(&mut self, taken: &KeyTaken, at: DateTime<Utc>) -> Result<bool, DbErr> {
        let took = projections::reserve(
            self.txn,
            &mut self.rows,
            &taken.reserved,
            taken.applied.as_ref(),
            at,
        )
        .await?;
        Ok(took == 1)
    }

    /// Plans a decision on `given`'s key against what exists for it and
    /// takes the key the plan names, atomically. There is no
    /// check-then-insert: taking the key is an insert that does nothing on
    /// conflict (or a compare-and-set on the fencing token), and a plan that
    /// loses the race is made again against the winner's row. The plan comes
    /// back for the caller to record in this transaction (`decided`).
    pub async fn decide_key(&mut self, given: &Given<'_>) -> Result<Plan, DbErr> {
        let (key, at) = (given.key, given.at);
        // On PostgreSQL a loser of the insert race waits for the winner's
        // commit, then sees its row: two passes always suffice; the third is
        // a safety net.
        for _ in 0..3 {
            // `None`: a reservation committed between two reads; look again.
            let Some(state) = self.key_state(key, given.route.migrations_possible).await? else {
                continue;
            };
            let evidence = state.evidence(key, at);
            let mut plan = plan::keyed(given, evidence.clone());
            // Whatever would apply it: a person may have made its operation
            // by hand (`domain::decision`, the last rule).
            if plan.take.is_some()
                && let Some(seal) = &key.held_as
                && ledger::made_by_hand(self.txn, seal).await?
            {
                let held = plan::Evidence {
                    made_by_hand: true,
                    ..evidence.clone()
                };
                plan = plan::keyed(given, held);
            }
            // A delivery lacking a field a strategy above its own requires
            // may be an operation applied under that strategy's key, which
            // its own never meets (`KeySummary::lacking`).
            if plan.take.is_some()
                && let Some(lacking) = &key.lacking
                && let Some(found) = super::look_alike::find(self.txn, key, lacking).await?
            {
                let held = plan::Evidence {
                    look_alike: Some(found),
                    ..evidence
                };
                plan = plan::keyed(given, held);
            }
            if let Some(take) = &plan.take
                && !self.reserve(take, at).await?
            {
                continue;
            }
            return Ok(plan);
        }
        // Never reached in practice; the delivery's provider retries.
        Err(DbErr::Custom(
            "reservation contended three times".to_owned(),
        ))
    }

    /// What exists for `key` (see `KeyState`): a row in the fast index
    /// under any key in force, else the applied effect a purged row still
    /// proves, else what a retired version left. `None` for a purged row not
    /// applied (only applied keys are purged: never expected).
    async fn key_state(
        &mut self,
        key: &KeySummary,
        migrations_possible: bool,
    ) -> Result<Option<KeyState>, DbErr> {
        let keys = key.in_force();
        let (purged, live): (Vec<_>, Vec<_>) = self
            .rows(&keys)
            .await?
            .into_iter()
            .partition(|r| r.key_purged);
        if let Some((row, through)) = key_state::pick(&keys, live, |row| &row.key) {
            return Ok(Some(KeyState::Reserved { row, through }));
        }
        if let Some((effect, through)) = key_state::pick(&keys, purged, |row| &row.key) {
            if effect.state != ReservationState::Applied.as_str() {
                return Ok(None);
            }
            return Ok(Some(KeyState::Ledger { effect, through }));
        }
        // A migrated key is looked for even when no retired version keys
        // this delivery (one that no longer reads a field its retry lacks,
        // or a version since removed): an effect it carried is the same
        // effect.
        if key.retired_keys.is_empty() && !migrations_possible {
            return Ok(Some(KeyState::Nothing));
        }
        if let Some((alias, effect)) = self.migrated_effects(&keys).await?.into_iter().next() {
            return Ok(Some(KeyState::Migrated { alias, effect }));
        }
        let retired = self.retired_ledger(&key.retired_keys).await?;
        Ok(Some(match retired.into_iter().next() {
            Some(effect) => KeyState::Retired { effect },
            None => KeyState::Nothing,
        }))
    }

    /// Claims the re-decision of a deferred delivery; false when another
    /// re-decider has it or it is decided.
    pub async fn claim_redecision(&self, delivery_id: &str) -> Result<bool, DbErr> {
        deliveries::claim_redecision(self.txn, delivery_id).await
    }

    /// Applies `event` to the projections and journals it.
    pub async fn record(
        &mut self,
        delivery_id: Option<DeliveryId>,
        event: JournalEvent,
        at: DateTime<Utc>,
    ) -> Result<(), DbErr> {
        projections::apply(self.txn, delivery_id, &event, at).await?;
        self.append(delivery_id, &event, at);
        Ok(())
    }

    /// Applies an atomic claim (a settlement, an expiry, a resolution…);
    /// journals it and returns true only if exactly one row took it.
    pub async fn claim(
        &mut self,
        delivery_id: Option<DeliveryId>,
        event: &JournalEvent,
        at: DateTime<Utc>,
    ) -> Result<bool, DbErr> {
        if projections::apply(self.txn, delivery_id, event, at).await? != 1 {
            return Ok(false);
        }
        self.append(delivery_id, event, at);
        Ok(true)
    }

    /// Journals an event whose projection the caller wrote (a folded row
    /// equal to what `apply` would write).
    pub fn append(
        &mut self,
        delivery_id: Option<DeliveryId>,
        event: &JournalEvent,
        at: DateTime<Utc>,
    ) {
        self.events
            .push(Entry::Event(delivery_id, Box::new(event.clone()), at));
    }

    /// Journals a key this transaction took (`reserve`), whose projection
    /// the claim wrote.
    pub fn append_taken(&mut self, taken: KeyTaken, at: DateTime<Utc>) {
        let delivery_id = taken.reserved.delivery_id;
        for event in taken.events() {
            self.append(Some(delivery_id), &event, at);
        }
    }

    /// Journals rows the job made, in order, after what it journaled so far.
    fn journal_rows(&mut self, rows: Vec<journal::Row>) {
        self.events.extend(rows.into_iter().map(Entry::Row));
    }

    /// Stores a raw body under its hash (see `Deferred::body`).
    pub fn body(&mut self, body: &BodyRef, raw: Vec<u8>, at: DateTime<Utc>) {
        self.rows.body(body, raw, at);
    }

    /// A new delivery decided: what its decision writes (a case, a link, a
    /// deferral row) and its journal rows (see `journal::decided`). Its row
    /// in the deliveries read model follows from those (`projector`).
    pub fn decided(&mut self, delivery: Decided, at: DateTime<Utc>) {
        let Decided {
            id,
            arrival,
            reception,
            derived,
            plan,
        } = delivery;
        deliveries::decided(&mut self.rows, arrival, &id.to_string(), &plan.made, at);
        let rows = journal::decided(id, reception, derived, plan.take, &plan.made, at);
        self.journal_rows(rows);
    }

    /// Links a delivery to the effect it asked for.
    pub fn effect_link(&mut self, effect_id: &str, delivery_id: &str, at: DateTime<Utc>) {
        self.rows.effect_link(effect_id, delivery_id, at);
    }
}
