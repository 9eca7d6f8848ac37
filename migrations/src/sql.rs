//! Runs backend-specific DDL. The schema is written as plain SQL per backend so
//! that what lands in the database (types, triggers) is exactly what we read.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

/// Executes each statement of the script for the connected backend, in order.
pub async fn run(
    manager: &SchemaManager<'_>,
    sqlite: &[&str],
    postgres: &[&str],
) -> Result<(), DbErr> {
    let statements = match manager.get_database_backend() {
        DbBackend::Sqlite => sqlite,
        DbBackend::Postgres => postgres,
        other => {
            return Err(DbErr::Migration(format!(
                "unsupported database backend {other:?}"
            )));
        }
    };
    let db = manager.get_connection();
    for statement in statements {
        db.execute_unprepared(statement).await?;
    }
    Ok(())
}

/// Runs the statements `script` writes for the connected backend, given the
/// type of a timestamp column on it (`TEXT` on SQLite, `TIMESTAMPTZ` on
/// PostgreSQL).
pub async fn run_with_timestamps(
    manager: &SchemaManager<'_>,
    script: fn(&str) -> Vec<String>,
) -> Result<(), DbErr> {
    let sqlite = script("TEXT");
    let postgres = script("TIMESTAMPTZ");
    let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
    let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
    run(manager, &sqlite, &postgres).await
}
