//! Rows a transaction writes only at its end, many to a statement.
//!
//! Appending a delivery writes rows nobody reads back before the transaction
//! commits: the journal events, the raw body, the links from deliveries to effects
//! and the rows of deferred deliveries. Collecting them and inserting each table's rows with one multi-row statement just before the
//! commit turns a dozen statements per delivery into a handful per batch, which
//! is what lets one SQLite writer keep up with the disk.
//!
//! What may be deferred is a promise of the caller: within one transaction no
//! statement reads a deferred table before `flush`. The writer keeps it by
//! flushing before any job that did not make that promise. Writing them is
//! `store::flush`, which alone calls back into projections (retakes and
//! settlements): this buffer only collects.

use chrono::{DateTime, Utc};
use sea_orm::ActiveValue::Set;

use super::entities::{case, deferred_delivery, effect, effect_delivery, raw_body, transport_link};
use super::journal as journal_store;
use super::key_index::KeyIndex;
use crate::domain::delivery::{BodyRef, DeliveryId};
use crate::domain::journal::{EffectSettled, JournalEvent, KeyReserved};

/// Rows waiting for the end of their transaction, in the order they were added.
///
/// With an index (`with_index`), transport links and keys are claimed
/// in memory against it and written here too; without one, claims go straight
/// to the database and only append-only rows wait.
#[derive(Debug, Default)]
pub struct Deferred {
    pub(super) links: Vec<transport_link::Model>,
    pub(super) keys: Vec<effect::Model>,
    pub(super) retakes: Vec<(KeyReserved, DateTime<Utc>)>,
    pub(super) settlements: Vec<(EffectSettled, DateTime<Utc>)>,
    pub(super) bodies: Vec<raw_body::ActiveModel>,
    pub(super) deferrals: Vec<deferred_delivery::ActiveModel>,
    pub(super) effect_links: Vec<effect_delivery::ActiveModel>,
    pub(super) cases: Vec<case::ActiveModel>,
    pub(super) journal: Vec<journal_store::Row>,
    pub(super) index: Option<KeyIndex>,
}

impl Deferred {
    /// Claims are made against `index` (see `key_index`).
    pub fn with_index(index: KeyIndex) -> Self {
        Self {
            index: Some(index),
            ..Self::default()
        }
    }

    /// The index claims are made against, if any.
    pub fn index(&mut self) -> Option<&mut KeyIndex> {
        self.index.as_mut()
    }

    /// Gives back the index, with what this transaction claimed.
    pub fn take_index(&mut self) -> Option<KeyIndex> {
        self.index.take()
    }

    /// A transport link claimed in the index.
    pub fn link(&mut self, row: transport_link::Model) {
        if let Some(index) = &mut self.index {
            index.set_link(row.clone());
        }
        self.links.push(row);
    }

    /// A key's new row (its effect) claimed in the index.
    pub fn effect(&mut self, row: effect::Model) {
        if let Some(index) = &mut self.index {
            index.set_row(row.clone());
        }
        self.keys.push(row);
    }

    /// A reservation taken back (fencing token moved on) in the index.
    pub fn retake(&mut self, claim: KeyReserved, at: DateTime<Utc>) {
        self.retakes.push((claim, at));
    }

    /// A settlement that could not be folded into its reservation's rows.
    pub fn settlement(&mut self, settled: EffectSettled, at: DateTime<Utc>) {
        self.settlements.push((settled, at));
    }

    /// A case to open.
    pub fn case(&mut self, row: case::ActiveModel) {
        self.cases.push(row);
    }

    /// Stores `raw` under its hash (a no-op for bytes already stored).
    pub fn body(&mut self, body: &BodyRef, raw: Vec<u8>, at: DateTime<Utc>) {
        self.bodies.push(raw_body::ActiveModel {
            sha256: Set(body.sha256.clone()),
            body: Set(Some(raw)),
            size: Set(i64::try_from(body.size).unwrap_or(i64::MAX)),
            stored_at: Set(at),
            redacted_at: Set(None),
        });
    }

    /// A deferred delivery's row, when it waits on a key (a no-op if it
    /// already has one).
    pub fn deferral(&mut self, row: Option<deferred_delivery::ActiveModel>) {
        self.deferrals.extend(row);
    }

    /// Links a delivery to the effect it asked for.
    pub fn effect_link(&mut self, effect_id: &str, delivery_id: &str, at: DateTime<Utc>) {
        self.effect_links.push(effect_delivery::ActiveModel {
            effect_id: Set(effect_id.to_owned()),
            delivery_id: Set(delivery_id.to_owned()),
            linked_at: Set(at),
        });
    }

    /// Journal rows built ahead with their times, appended in this order.
    pub fn journal_rows(&mut self, rows: Vec<journal_store::Row>) {
        self.journal.extend(rows);
    }

    /// Journal events, appended in this order.
    pub fn journal(&mut self, events: Vec<(Option<DeliveryId>, JournalEvent)>, at: DateTime<Utc>) {
        self.journal.extend(
            events
                .into_iter()
                .map(|(delivery_id, event)| journal_store::row(delivery_id, &event, at)),
        );
    }

    /// Takes over `other`'s rows after this one's (not its index).
    pub fn absorb(&mut self, other: Self) {
        self.links.extend(other.links);
        self.keys.extend(other.keys);
        self.retakes.extend(other.retakes);
        self.settlements.extend(other.settlements);
        self.bodies.extend(other.bodies);
        self.deferrals.extend(other.deferrals);
        self.effect_links.extend(other.effect_links);
        self.cases.extend(other.cases);
        self.journal.extend(other.journal);
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
            && self.keys.is_empty()
            && self.retakes.is_empty()
            && self.settlements.is_empty()
            && self.bodies.is_empty()
            && self.deferrals.is_empty()
            && self.effect_links.is_empty()
            && self.cases.is_empty()
            && self.journal.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sea_orm::{ActiveModelTrait, EntityTrait, IntoActiveModel};

    use super::*;

    fn link(key: &str, first: &str) -> transport_link::Model {
        transport_link::Model {
            transport_key: key.to_owned(),
            first_delivery_id: first.to_owned(),
            body_fingerprint: "f".to_owned(),
            business_key: None,
            created_at: Utc::now(),
        }
    }

    #[tokio::test]
    async fn a_claim_made_in_memory_that_the_database_already_holds_fails_the_flush() {
        let (_dir, db) = crate::store::test_database().await;
        transport_link::Entity::insert(link("t1", "first").into_active_model().reset_all())
            .exec_without_returning(&db)
            .await
            .unwrap();

        let mut fresh = Deferred::default();
        fresh.link(link("t2", "second"));
        fresh.flush(&db).await.unwrap();

        let mut stale = Deferred::default();
        stale.link(link("t1", "second"));
        let refused = stale.flush(&db).await.unwrap_err();
        assert!(
            refused.to_string().contains("refused by the database"),
            "{refused}"
        );
        let kept = transport_link::Entity::find_by_id("t1".to_owned())
            .one(&db)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(kept.first_delivery_id, "first");
    }
}
