//! PostgreSQL keeps a journal row of up to 8 KB inline and uncompressed
//! instead of compressing (pglz) every row over 2 KB: a delivery's
//! `DeliveryDecided` row is 2–3 KB, and compressing it cost the server more
//! than storing it (measured on 20,000 such rows: 2.15 s to insert them with
//! compression, 0.87 s without; 50 MB against 68 MB). Larger rows are
//! compressed and moved out of line as before. SQLite does not compress.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let postgres = ["ALTER TABLE journal SET (toast_tuple_target = 8160)"];
        sql::run(manager, &[], &postgres).await
    }
}
