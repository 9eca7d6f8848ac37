//! Operations made by hand: a person closed a missing effect saying the
//! provider's operation was applied outside Unicity. Its resource, amount
//! and currency, sealed under the key secret, hold the deliveries that look
//! like it for a person: the operation's webhook may still come, under a
//! key nothing else could find; and its id, which no effect may cite and no
//! look-up may count as owed. A projection of `CaseResolved`, rebuilt
//! from the journal with the cases.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

fn tables(ts: &str) -> Vec<String> {
    vec![
        format!(
            "CREATE TABLE hand_made_holds (
                seal         TEXT NOT NULL,
                case_id      TEXT NOT NULL,
                provider     TEXT NOT NULL,
                operation_id TEXT NOT NULL,
                held_at      {ts} NOT NULL,
                PRIMARY KEY (seal, case_id)
            )"
        ),
        "CREATE INDEX hand_made_holds_operation ON hand_made_holds (operation_id, provider)"
            .to_owned(),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = tables("TEXT");
        let postgres = tables("TIMESTAMPTZ");
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
