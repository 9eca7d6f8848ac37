//! Rows a transaction writes only at its end, many to a statement.
//!
//! Appending a delivery writes rows nobody reads back before the transaction
//! commits: the journal events, the raw body, the `deliveries` row, the
//! effects-ledger row and the links from deliveries to effects. Collecting them
//! and inserting each table's rows with one multi-row statement just before the
//! commit turns a dozen statements per delivery into a handful per batch, which
//! is what lets one SQLite writer keep up with the disk (issue 5).
//!
//! What may be deferred is a promise of the caller: within one transaction no
//! statement reads a deferred table before `flush`. The writer keeps it by
//! flushing before any job that did not make that promise.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ConnectionTrait, DbErr, EntityTrait};

use super::entities::{delivery, effect, effect_delivery, journal, raw_body};
use crate::domain::delivery::{BodyRef, DeliveryId};
use crate::domain::journal::JournalEvent;

/// Rows per statement: well under SQLite's 32766 and PostgreSQL's 65535 bound
/// parameters for the widest row (`deliveries`, 20 columns).
const ROWS_PER_STATEMENT: usize = 500;

/// Rows waiting for the end of their transaction, in the order they were added.
#[derive(Debug, Default)]
pub struct Deferred {
    bodies: Vec<raw_body::ActiveModel>,
    deliveries: Vec<delivery::ActiveModel>,
    effects: Vec<effect::ActiveModel>,
    effect_links: Vec<effect_delivery::ActiveModel>,
    journal: Vec<journal::ActiveModel>,
}

impl Deferred {
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

    /// A new `deliveries` row (a no-op if the delivery already has one).
    pub fn delivery(&mut self, row: delivery::ActiveModel) {
        self.deliveries.push(row);
    }

    /// A new effects-ledger row (a no-op if the effect is already there).
    pub fn effect(&mut self, row: effect::ActiveModel) {
        self.effects.push(row);
    }

    /// Links a delivery to the effect it asked for.
    pub fn effect_link(&mut self, effect_id: &str, delivery_id: &str, at: DateTime<Utc>) {
        self.effect_links.push(effect_delivery::ActiveModel {
            effect_id: Set(effect_id.to_owned()),
            delivery_id: Set(delivery_id.to_owned()),
            linked_at: Set(at),
        });
    }

    /// Journal events, appended in this order.
    pub fn journal(&mut self, events: Vec<(Option<DeliveryId>, JournalEvent)>, at: DateTime<Utc>) {
        self.journal
            .extend(events.into_iter().map(|(delivery_id, event)| {
                super::journal::row(delivery_id, &event, at)
            }));
    }

    /// Takes over `other`'s rows after this one's.
    pub fn absorb(&mut self, other: Self) {
        self.bodies.extend(other.bodies);
        self.deliveries.extend(other.deliveries);
        self.effects.extend(other.effects);
        self.effect_links.extend(other.effect_links);
        self.journal.extend(other.journal);
    }

    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
            && self.deliveries.is_empty()
            && self.effects.is_empty()
            && self.effect_links.is_empty()
            && self.journal.is_empty()
    }

    /// Writes every row, one statement per table and chunk, and empties self.
    pub async fn flush<C: ConnectionTrait>(&mut self, conn: &C) -> Result<(), DbErr> {
        insert_ignoring_existing(conn, std::mem::take(&mut self.bodies)).await?;
        insert_ignoring_existing(conn, std::mem::take(&mut self.deliveries)).await?;
        insert_ignoring_existing(conn, std::mem::take(&mut self.effects)).await?;
        insert_ignoring_existing(conn, std::mem::take(&mut self.effect_links)).await?;
        // Journal rows have no key to collide on: a plain insert, so that a
        // bug can never silently drop an event.
        let mut rows = std::mem::take(&mut self.journal).into_iter().peekable();
        while rows.peek().is_some() {
            let chunk: Vec<_> = rows.by_ref().take(ROWS_PER_STATEMENT).collect();
            journal::Entity::insert_many(chunk)
                .exec_without_returning(conn)
                .await?;
        }
        Ok(())
    }
}

async fn insert_ignoring_existing<C, A>(conn: &C, rows: Vec<A>) -> Result<(), DbErr>
where
    C: ConnectionTrait,
    A: sea_orm::ActiveModelTrait + Send,
{
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<A> = rows.by_ref().take(ROWS_PER_STATEMENT).collect();
        <A::Entity as EntityTrait>::insert_many(chunk)
            .on_conflict_do_nothing()
            .exec_without_returning(conn)
            .await?;
    }
    Ok(())
}
