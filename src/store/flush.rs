//! Writing what a transaction deferred, just before its commit: every row of
//! `Deferred`, one statement per table and chunk, journal rows last. A claim
//! made in memory (a link, a key, a retake, a settlement) that the
//! database refuses fails the flush, and with it the transaction: nothing of
//! it commits. This is the one place journal rows are written.

use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, EntityName, EntityTrait, IntoActiveModel};

use super::chunks::statements;
use super::deferred::Deferred;
use super::journal as journal_store;
use super::projections;

impl Deferred {
    /// Writes every row, one statement per table and chunk, and empties self.
    /// A claim made in memory that the database refuses fails the flush.
    pub async fn flush<C: ConnectionTrait>(&mut self, conn: &C) -> Result<(), DbErr> {
        let links = std::mem::take(&mut self.links);
        claim_all(
            conn,
            links.into_iter().map(|r| r.into_active_model().reset_all()),
        )
        .await?;
        let keys = std::mem::take(&mut self.keys);
        claim_all(
            conn,
            keys.into_iter().map(|r| r.into_active_model().reset_all()),
        )
        .await?;
        for (claim, at) in std::mem::take(&mut self.retakes) {
            if projections::retake(conn, &claim, at).await? != 1 {
                return Err(stale_claim("key", &claim.key));
            }
        }
        for (settled, at) in std::mem::take(&mut self.settlements) {
            if projections::settle(conn, &settled, at).await? != 1 {
                return Err(stale_claim("settlement", &settled.key));
            }
        }
        insert_ignoring_existing(conn, std::mem::take(&mut self.effect_links)).await?;
        insert_ignoring_existing(conn, std::mem::take(&mut self.cases)).await?;
        insert_ignoring_existing(conn, std::mem::take(&mut self.bodies)).await?;
        insert_ignoring_existing(conn, std::mem::take(&mut self.deferrals)).await?;
        // Journal rows have no key to collide on: a plain insert, so that a
        // bug can never silently drop an event.
        journal_store::insert(conn, std::mem::take(&mut self.journal)).await?;
        Ok(())
    }
}

/// Inserts rows claimed in memory; every one must take.
async fn claim_all<C, A>(conn: &C, rows: impl Iterator<Item = A>) -> Result<(), DbErr>
where
    C: ConnectionTrait,
    A: ActiveModelTrait + Send,
{
    for chunk in statements(rows.collect()) {
        let expected = chunk.len() as u64;
        let inserted = match <A::Entity as EntityTrait>::insert_many(chunk)
            .on_conflict_do_nothing()
            .exec_without_returning(conn)
            .await?
        {
            sea_orm::TryInsertResult::Inserted(n) => n,
            _ => 0,
        };
        if inserted != expected {
            let table = A::Entity::default().table_name();
            return Err(stale_claim(table, "a batch"));
        }
    }
    Ok(())
}

/// A claim made against a read the database no longer agrees with. Never
/// expected under the batch's write lock; failing is the safe answer.
fn stale_claim(what: &str, key: &str) -> DbErr {
    DbErr::Custom(format!(
        "a {what} claim for {key} was refused by the database: nothing in this batch is committed"
    ))
}

async fn insert_ignoring_existing<C, A>(conn: &C, rows: Vec<A>) -> Result<(), DbErr>
where
    C: ConnectionTrait,
    A: sea_orm::ActiveModelTrait + Send,
{
    for chunk in statements(rows) {
        <A::Entity as EntityTrait>::insert_many(chunk)
            .on_conflict_do_nothing()
            .exec_without_returning(conn)
            .await?;
    }
    Ok(())
}
