//! On SQLite the two tables written before every 2xx whose primary key is
//! text but grows with time are stored in that key's order (`WITHOUT
//! ROWID`): `effects` (by `effect_id`, a UUIDv7) and `effect_deliveries` (by
//! `(effect_id, delivery_id)`). A rowid table keyed by text is two B-trees,
//! the rows in rowid order and an automatic index from the key to the rowid,
//! so each insert wrote both; clustered, the row is its key's entry, and a
//! new row lands where the newest ones are. `effects` keeps its UNIQUE `key`
//! (the atomic barrier) and its partial indexes.
//!
//! Not clustered: `transport_links`, keyed by a hash. Clustered, each of its
//! rows (some 250 bytes) landed on a random leaf page of the whole table
//! instead of a small entry on a random page of its index, and more bytes
//! reached the disk per delivery (measured: 52–58 KiB against 46–50). Nor
//! `raw_bodies`, keyed by a hash too and carrying whole bodies.
//!
//! Each table is rebuilt from its own catalog text, so its columns, types
//! and defaults stay exactly as earlier migrations left them, and its
//! indexes are created again from theirs. PostgreSQL is unchanged: its
//! tables are heaps, whatever the key. The migration runs in one
//! transaction and skips a table already clustered, so it is safe to run
//! again.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

#[derive(DeriveMigrationName)]
pub struct Migration;

const TABLES: [&str; 2] = ["effects", "effect_deliveries"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        if manager.get_database_backend() != DbBackend::Sqlite {
            return Ok(());
        }
        let db = manager.get_connection();
        for table in TABLES {
            cluster(db, table).await?;
        }
        Ok(())
    }
}

/// Rebuilds `table` as a `WITHOUT ROWID` table with the same columns, rows
/// and indexes.
async fn cluster<C: ConnectionTrait>(db: &C, table: &str) -> Result<(), DbErr> {
    let ddl = catalog(db, "table", table).await?;
    let Some(ddl) = ddl.into_iter().next() else {
        return Err(DbErr::Migration(format!("table {table} is missing")));
    };
    if ddl.to_ascii_uppercase().contains("WITHOUT ROWID") {
        return Ok(());
    }
    let Some(columns) = ddl.find('(') else {
        return Err(DbErr::Migration(format!(
            "cannot read the definition of {table}"
        )));
    };
    let indexes = catalog(db, "index", table).await?;
    let staged = format!("{table}_clustered");
    let script = [
        format!("DROP TABLE IF EXISTS {staged}"),
        format!(
            "CREATE TABLE {staged} {} WITHOUT ROWID",
            &ddl[columns..].trim_end()
        ),
        format!("INSERT INTO {staged} SELECT * FROM {table}"),
        format!("DROP TABLE {table}"),
        format!("ALTER TABLE {staged} RENAME TO {table}"),
    ];
    for statement in script.iter().chain(indexes.iter()) {
        db.execute_unprepared(statement).await?;
    }
    Ok(())
}

/// The catalog text of a table (`kind` "table") or of the indexes created on
/// it by a statement (`kind` "index"; automatic ones have none).
async fn catalog<C: ConnectionTrait>(
    db: &C,
    kind: &str,
    table: &str,
) -> Result<Vec<String>, DbErr> {
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            DbBackend::Sqlite,
            "SELECT sql FROM sqlite_master WHERE type = ? AND tbl_name = ? AND sql IS NOT NULL \
             ORDER BY name",
            [kind.into(), table.into()],
        ))
        .await?;
    rows.iter()
        .map(|row| row.try_get::<String>("", "sql"))
        .collect()
}
