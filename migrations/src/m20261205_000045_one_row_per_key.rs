//! One row per taken key: the fast key index (`reservations`) is folded into
//! the effects ledger. `effects` gains the reservation's claim
//! (`fencing_token`, `lease_until`), its horizon (`expires_at`) and the purge
//! as a flag (`key_purged`); `status` becomes `state` (`pending` is
//! `reserved`). A taken key then costs one row and one randomly keyed index
//! entry (the UNIQUE `key`, which stays the atomic barrier) instead of two.
//!
//! Rows already past their horizon are the ledger rows with no reservation:
//! they read as purged through the flag's default, never rewritten (the
//! default is a catalog constant on both backends; PostgreSQL's is then set
//! to FALSE, SQLite cannot change one in place and the application always
//! names the column). Only the live reservations are copied.
//!
//! The running leases and the horizons get partial indexes under new names
//! (`effects_leased`, `effects_horizon`); the old ones go with their table.
//! The migration runs in one transaction on both backends and every step is
//! guarded, so it is safe to run again. Before changing anything it checks
//! that each reservation has its ledger row and agrees with it: a database
//! where they disagree is refused, unchanged.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let backend = manager.get_database_backend();
        let pg = backend == DbBackend::Postgres;
        let (big, ts) = if pg {
            ("BIGINT", "TIMESTAMPTZ")
        } else {
            ("INTEGER", "TEXT")
        };
        let db = manager.get_connection();
        let had_reservations = manager.has_table("reservations").await?;
        if had_reservations && manager.has_column("effects", "status").await? {
            preflight(db, backend).await?;
        }
        for (column, ddl) in [
            ("fencing_token", format!("{big} NULL")),
            ("lease_until", format!("{ts} NULL")),
            ("expires_at", format!("{ts} NULL")),
            ("key_purged", "BOOLEAN NOT NULL DEFAULT TRUE".to_owned()),
        ] {
            if !manager.has_column("effects", column).await? {
                db.execute_unprepared(&format!("ALTER TABLE effects ADD COLUMN {column} {ddl}"))
                    .await?;
            }
        }
        if manager.has_column("effects", "status").await? {
            db.execute_unprepared("ALTER TABLE effects RENAME COLUMN status TO state")
                .await?;
        }
        db.execute_unprepared("UPDATE effects SET state = 'reserved' WHERE state = 'pending'")
            .await?;
        if had_reservations {
            db.execute_unprepared(
                "UPDATE effects SET state = r.state, fencing_token = r.fencing_token, \
                 lease_until = r.lease_until, expires_at = r.expires_at, key_purged = FALSE \
                 FROM reservations r WHERE r.key = effects.key",
            )
            .await?;
        }
        if pg {
            db.execute_unprepared("ALTER TABLE effects ALTER COLUMN key_purged SET DEFAULT FALSE")
                .await?;
        }
        for statement in [
            "CREATE INDEX IF NOT EXISTS effects_leased ON effects (lease_until) \
             WHERE state = 'reserved'",
            "CREATE INDEX IF NOT EXISTS effects_horizon ON effects (expires_at) \
             WHERE expires_at IS NOT NULL",
            "DROP TABLE IF EXISTS reservations",
        ] {
            db.execute_unprepared(statement).await?;
        }
        if pg {
            db.execute_unprepared("ANALYZE effects").await?;
        }
        Ok(())
    }
}

/// Refuses, before any change, a database whose reservations and ledger rows
/// do not pair up one to one: merging them would lose or invent a claim.
async fn preflight<C: ConnectionTrait>(db: &C, backend: DbBackend) -> Result<(), DbErr> {
    let checks = [
        (
            "reservations without their ledger row",
            "SELECT r.key AS key FROM reservations r \
             WHERE NOT EXISTS (SELECT 1 FROM effects e WHERE e.key = r.key)",
        ),
        (
            "reservations whose ledger row names another effect or first delivery",
            "SELECT r.key AS key FROM reservations r JOIN effects e ON e.key = r.key \
             WHERE e.effect_id <> r.effect_id OR e.first_delivery_id <> r.first_delivery_id",
        ),
        (
            "reservations whose ledger row is in another state",
            "SELECT r.key AS key FROM reservations r JOIN effects e ON e.key = r.key \
             WHERE NOT (e.status = r.state OR (e.status = 'pending' AND r.state = 'reserved'))",
        ),
        (
            "ledger rows past their horizon that are not applied",
            "SELECT e.key AS key FROM effects e \
             WHERE NOT EXISTS (SELECT 1 FROM reservations r WHERE r.key = e.key) \
             AND e.status <> 'applied'",
        ),
    ];
    for (what, sql) in checks {
        let rows = db
            .query_all_raw(Statement::from_string(backend, format!("{sql} LIMIT 5")))
            .await?;
        if rows.is_empty() {
            continue;
        }
        let keys: Vec<String> = rows
            .iter()
            .filter_map(|r| r.try_get::<String>("", "key").ok())
            .collect();
        return Err(DbErr::Migration(format!(
            "cannot merge reservations into the effects ledger: {what} (for example {}). \
             Rebuild the projections from the journal with the previous release \
             (`unicity projections rebuild`), then start this one again",
            keys.join(", ")
        )));
    }
    Ok(())
}
