//! A database read as it is, for the tests of upgrades: no projector runs
//! there, so nothing waits for the read model (`Counts::settle` would).

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement, TryGetable};

/// The first column of every row of `sql`.
pub async fn first_column<T: TryGetable>(db: &DatabaseConnection, sql: &str) -> Vec<T> {
    let statement = Statement::from_string(db.get_database_backend(), sql.to_owned());
    let rows = db.query_all_raw(statement).await.expect(sql);
    rows.iter()
        .map(|row| row.try_get_by_index::<T>(0).expect(sql))
        .collect()
}

/// Whether an index called `name` exists, on either backend.
pub async fn has_index(db: &DatabaseConnection, name: &str) -> bool {
    let sql = match db.get_database_backend() {
        DbBackend::Postgres => {
            format!("SELECT COUNT(*) FROM pg_indexes WHERE indexname = '{name}'")
        }
        _ => format!("SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = '{name}'"),
    };
    first_column::<i64>(db, &sql).await == [1]
}
