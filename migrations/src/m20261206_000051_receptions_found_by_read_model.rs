//! A delivery's reception is found through the deliveries read model, not
//! through an index on the journal written before every 2xx.
//!
//! `journal_delivery_id` had an entry for every journal row of a delivery,
//! its reception's included: one of the entries each delivery wrote before
//! its answer. The read model now keeps the position of the row that
//! journaled the reception (`deliveries.received_position`, set by the
//! projector after the commit), and the index keeps only the rows that
//! follow a reception (a re-decision, a settlement, a case's resolution…),
//! which are few. A reception the projector has not reached yet is read from
//! the journal's tail, past the projector's checkpoint
//! (`store::journal::for_delivery`).
//!
//! The upgrade fills the column from the journal through the old index,
//! then replaces the index; on a large journal, plan it for a quiet moment.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The event types of the row that journals a reception. Written literally
/// in the index's condition and in the queries that must use it.
pub const RECEPTIONS: &str = "'DeliveryDecided', 'DeliveryReceived', 'DeliveryRejected'";

fn script(column_type: &str) -> Vec<String> {
    vec![
        format!("ALTER TABLE deliveries ADD COLUMN received_position {column_type} NULL"),
        format!(
            "UPDATE deliveries SET received_position = (SELECT MIN(j.position) FROM journal j \
             WHERE j.delivery_id = deliveries.delivery_id AND j.event_type IN ({RECEPTIONS}))"
        ),
        "DROP INDEX IF EXISTS journal_delivery_id".to_owned(),
        format!(
            "CREATE INDEX journal_after_reception ON journal (delivery_id, position) \
             WHERE event_type NOT IN ({RECEPTIONS})"
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = script("INTEGER");
        let postgres = script("BIGINT");
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
