//! `unicity projections rebuild`: clears every projection and replays the
//! journal through the same `apply` the live path uses.

use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, TransactionTrait,
};

use crate::domain::journal::JournalEvent;
use crate::store::entities::journal;
use crate::store::projections::{self, TABLES};

const PAGE: u64 = 2000;

/// Rebuilds all projections in one transaction; returns the events replayed.
pub async fn rebuild(db: &DatabaseConnection) -> Result<u64, DbErr> {
    let txn = db.begin().await?;
    for table in TABLES {
        txn.execute_unprepared(&format!("DELETE FROM {table}"))
            .await?;
    }
    let mut replayed = 0;
    let mut after = i64::MIN;
    loop {
        let rows = journal::Entity::find()
            .filter(journal::Column::Position.gt(after))
            .order_by_asc(journal::Column::Position)
            .limit(PAGE)
            .all(&txn)
            .await?;
        if rows.is_empty() {
            break;
        }
        for row in rows {
            after = row.position;
            let event = JournalEvent::from_stored(&row.event_type, row.event_version, row.data)
                .map_err(|e| DbErr::Custom(format!("journal row {}: {e}", row.position)))?;
            let delivery_id = row.delivery_id.as_deref().and_then(|id| id.parse().ok());
            projections::apply(&txn, delivery_id, &event, row.recorded_at).await?;
            replayed += 1;
        }
    }
    txn.commit().await?;
    Ok(replayed)
}
