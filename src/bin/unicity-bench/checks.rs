//! End-of-run checks that fail the benchmark loudly: no business effect twice
//! (exactly-once), and every acknowledged delivery present in the journal.

use anyhow::{Context, bail};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde::Serialize;

/// What the exactly-once check found.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExactlyOnce {
    /// No `effects` table yet: nothing to check.
    Skipped,
    /// Every key has at most one effect.
    Held { effects: i64, keys: i64 },
}

/// Fails when any effect key appears more than once in `effects`. Skipped (and
/// said so) while the schema has no `effects` table.
pub async fn check_exactly_once(db: &DatabaseConnection) -> anyhow::Result<ExactlyOnce> {
    if !table_exists(db, "effects").await? {
        note!("effects table not present yet: exactly-once check skipped");
        return Ok(ExactlyOnce::Skipped);
    }
    let duplicates = db
        .query_all_raw(raw(
            db,
            r#"SELECT "key", COUNT(*) FROM effects GROUP BY "key" HAVING COUNT(*) > 1 LIMIT 10"#,
        ))
        .await
        .context("exactly-once query on effects failed")?;
    if !duplicates.is_empty() {
        let listed: Vec<String> = duplicates
            .iter()
            .map(|row| {
                let key = row.try_get_by_index::<String>(0).unwrap_or_default();
                let n = row.try_get_by_index::<i64>(1).unwrap_or_default();
                format!("{key} ×{n}")
            })
            .collect();
        bail!(
            "EXACTLY-ONCE VIOLATED: effect keys applied more than once (first {}): {}",
            listed.len(),
            listed.join(", ")
        );
    }
    let effects = count(db, "SELECT COUNT(*) FROM effects").await?;
    let keys = count(db, r#"SELECT COUNT(DISTINCT "key") FROM effects"#).await?;
    Ok(ExactlyOnce::Held { effects, keys })
}

/// Fails when the journal holds fewer receptions than deliveries acknowledged
/// (preloaded history included): a 2xx without a journal entry. A reception
/// is a `DeliveryReceived` row, or a `DeliveryDecided` row that folds one.
pub async fn check_journaled(db: &DatabaseConnection, expected: u64) -> anyhow::Result<i64> {
    let journaled = count(
        db,
        "SELECT COUNT(*) FROM journal WHERE event_type IN ('DeliveryReceived', 'DeliveryDecided')",
    )
    .await?;
    if journaled < expected as i64 {
        bail!(
            "DELIVERIES LOST: {expected} acknowledged (history included) but only {journaled} receptions in the journal"
        );
    }
    Ok(journaled)
}

async fn table_exists(db: &DatabaseConnection, name: &str) -> anyhow::Result<bool> {
    let sql = match db.get_database_backend() {
        DbBackend::Postgres => {
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
        }
        _ => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
    };
    let statement =
        Statement::from_sql_and_values(db.get_database_backend(), sql, [name.to_owned().into()]);
    let row = db
        .query_one_raw(statement)
        .await?
        .context("no answer to a table lookup")?;
    Ok(row.try_get_by_index::<i64>(0)? > 0)
}

async fn count(db: &DatabaseConnection, sql: &str) -> anyhow::Result<i64> {
    let row = db
        .query_one_raw(raw(db, sql))
        .await
        .with_context(|| format!("query failed: {sql}"))?
        .with_context(|| format!("no row: {sql}"))?;
    Ok(row.try_get_by_index::<i64>(0)?)
}

fn raw(db: &DatabaseConnection, sql: &str) -> Statement {
    Statement::from_string(db.get_database_backend(), sql.to_owned())
}
