//! Everything sea-orm: connecting (with deliberate SQLite durability settings),
//! migrating, the journal and the raw-body store.

pub mod access;
pub mod bodies;
pub mod breakers;
pub mod bulk;
pub mod cases;
pub mod checkpoint;
pub mod dashboard;
pub mod deferred;
pub mod entities;
mod flush;
pub mod form_tokens;
pub mod id_range;
pub mod journal;
pub mod key_index;
pub mod key_secret;
mod key_state;
pub mod ledger;
pub mod links;
mod look_alike;
pub mod nodelay;
pub mod observe;
pub mod projections;
pub mod projector;
pub mod reconcile;
pub mod reservations;
pub mod search;
pub mod strategy_usage;
pub mod strategy_versions;
mod tx;
mod wal_checkpointer;
pub mod writer;

pub use tx::{Decided, Tx, transaction};
pub use wal_checkpointer::spawn_checkpointer;
pub use writer::{begin_owning_reservations, transaction_owning_reservations};

use std::time::Duration;

use anyhow::Context;
use migration::{Migrator, MigratorTrait};
use sea_orm::sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous};
use sea_orm::{
    ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, TransactionTrait,
};

/// How many pooled connections to open per backend. SQLite has one writer at a
/// time; extra connections serve reads while a write waits on `busy_timeout`.
const SQLITE_POOL: u32 = 4;
const POSTGRES_POOL: u32 = 16;
/// Connections of one group-commit writer on PostgreSQL (see `connect_writer`).
const WRITER_POSTGRES_CONNECTIONS: u32 = 2;

/// SQLite page cache of a pooled (mostly reading) connection.
const SQLITE_CACHE_KIB: u32 = 8 * 1024;
/// SQLite page cache of the group-commit writer's own connection: the index
/// pages every batch reads and writes (transport links, key rows, ledger
/// keys, bodies) stay in memory. At 16 MiB the writer read pages back from the
/// OS on every batch once the database outgrew it; 48 MiB on every pooled
/// connection instead took peak RSS to 266 MB with a million deliveries.
const SQLITE_WRITER_CACHE_KIB: u32 = 64 * 1024;

/// Opens the database named by `url` with Unicity's settings.
///
/// SQLite runs in WAL mode with `synchronous=FULL`: an acknowledged delivery
/// survives a power failure, not only a process crash.
pub async fn connect(url: &str) -> anyhow::Result<DatabaseConnection> {
    open(url, Pool::Shared, Durability::Full).await
}

/// Opens a database with the durability asked for (see `Durability`).
pub async fn connect_with(url: &str, durability: Durability) -> anyhow::Result<DatabaseConnection> {
    open(url, Pool::Shared, durability).await
}

/// The pool a group-commit writer opens for itself (see `Pool::Writer`).
pub async fn connect_writer(url: &str) -> anyhow::Result<DatabaseConnection> {
    open(url, Pool::Writer, Durability::Full).await
}

/// What a commit promises on SQLite (PostgreSQL is left as its server is
/// configured).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: a committed delivery survives a power failure.
    /// Everything that answers a provider or an operator runs so.
    #[default]
    Full,
    /// `synchronous=OFF` and the rollback journal in memory: commits are not
    /// synced to disk and a crash may leave the file unusable. For scratch
    /// databases only (a fixture's or a shadow replay's sandbox), which are
    /// deleted when done and rebuilt from the journal if lost.
    Scratch,
}

/// Which pool `open` makes.
#[derive(Clone, Copy, PartialEq)]
enum Pool {
    /// Readers, and the writer of direct mode.
    Shared,
    /// A group-commit writer's own connections, taken for every batch. They
    /// are not pinged before a batch (a round trip each on PostgreSQL); a
    /// broken one fails its batch, whose callers get an error and retry, and
    /// the writer replaces it (`writer::connection`). sqlx pings a connection
    /// when it goes back to the pool, so on PostgreSQL the writer has two: the
    /// next batch begins on one while the other is pinged (measured: `BEGIN`
    /// 1.2 → 0.66 ms under load), and since 2026-12-06 its `BEGIN` goes out
    /// while the batch before it commits on the other, when jobs are waiting
    /// (`writer::batch`). SQLite: one, with a large page cache.
    Writer,
}

async fn open(url: &str, pool: Pool, durability: Durability) -> anyhow::Result<DatabaseConnection> {
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .sqlx_logging(false)
        .connect_timeout(Duration::from_secs(5))
        .acquire_timeout(Duration::from_secs(5));
    if pool == Pool::Writer {
        options
            .max_connections(WRITER_POSTGRES_CONNECTIONS)
            .test_before_acquire(false);
    }
    if url.starts_with("sqlite:") {
        let (journal_mode, synchronous) = match durability {
            Durability::Full => (SqliteJournalMode::Wal, SqliteSynchronous::Full),
            Durability::Scratch => (SqliteJournalMode::Memory, SqliteSynchronous::Off),
        };
        let (connections, cache_kib) = match pool {
            Pool::Shared => (SQLITE_POOL, SQLITE_CACHE_KIB),
            Pool::Writer => (1, SQLITE_WRITER_CACHE_KIB),
        };
        options
            .max_connections(connections)
            .map_sqlx_sqlite_opts(move |o| {
                o.journal_mode(journal_mode)
                    .synchronous(synchronous)
                    .busy_timeout(Duration::from_secs(5))
                    .foreign_keys(true)
                    .create_if_missing(true)
                    // A page rewritten by many commits between checkpoints is
                    // copied to the database file once per checkpoint.
                    .pragma("wal_autocheckpoint", "10000")
                    .pragma("cache_size", format!("-{cache_kib}"))
                    // Savepoint journals (one savepoint per job of a group
                    // commit) stay in memory instead of spilling to temp files.
                    .pragma("temp_store", "MEMORY")
            });
    } else {
        // Every new connection: see `nodelay` (sqlx 0.9.0 leaves Nagle on).
        let servers = std::sync::Arc::new(nodelay::server_addresses(url).await);
        // A writer's statements never change text (`bulk`, `key_index`), so
        // each connection keeps one generic plan per statement. One made
        // while a table was nearly empty would read it whole for as long as
        // the connection lives (measured: key reads at 5 ms each by 20,000
        // deliveries, 3.5x the database's CPU per delivery). A batch finds
        // its rows by key or position, through an index; with sequential
        // scans off the plan uses it whatever the table's size when it was
        // made (a query no index serves is still planned as a scan). Planning
        // every execution instead cost ~15 % more CPU. Set after connecting
        // rather than as a startup option, which some poolers refuse.
        let writer = pool == Pool::Writer;
        options.map_sqlx_postgres_pool_opts(move |pool| {
            let servers = servers.clone();
            pool.after_connect(move |conn, _| {
                nodelay::set_on_connections_to(&servers);
                Box::pin(async move {
                    if writer {
                        use sea_orm::sqlx::Executor as _;
                        conn.execute("SET enable_seqscan = off").await?;
                    }
                    Ok(())
                })
            })
        });
        if pool == Pool::Shared {
            options.max_connections(POSTGRES_POOL);
        }
    }
    Database::connect(options)
        .await
        .with_context(|| format!("cannot connect to the database at {}", redact_url(url)))
}

/// Applies every pending migration. Several processes may start at once on
/// one database: on PostgreSQL they queue on an advisory lock; on SQLite a
/// loser of the race retries once the winner is done.
pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    if backend(db) == DbBackend::Postgres {
        let lock = db.begin().await?;
        lock.execute_unprepared("SELECT pg_advisory_xact_lock(7267356843)")
            .await?;
        let migrated = Migrator::up(db, None).await;
        lock.commit().await?;
        return migrated.context("database migration failed");
    }
    let mut attempt = 0;
    loop {
        match Migrator::up(db, None).await {
            Ok(()) => return Ok(()),
            Err(error) if attempt < 10 => {
                attempt += 1;
                tracing::debug!(%error, attempt, "migration raced another process; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => return Err(error).context("database migration failed"),
        }
    }
}

/// Refuses, changing nothing, a database whose schema is not the one this
/// binary was built for. Commands that only read call it instead of
/// `migrate`: run from an engineer's machine against production, a newer
/// binary would otherwise change the schema under the running servers.
pub async fn require_current_schema(db: &DatabaseConnection) -> anyhow::Result<()> {
    let expected: Vec<String> = Migrator::migrations()
        .iter()
        .map(|m| m.name().to_owned())
        .collect();
    let applied = applied_migrations(db).await?;
    let last = expected.last().map_or("none", String::as_str);
    let at = applied
        .iter()
        .max()
        .map_or("none (an empty database)", String::as_str);
    if let Some(unknown) = applied.iter().filter(|a| !expected.contains(a)).max() {
        anyhow::bail!(
            "the database is at migration {unknown}, newer than this binary knows (it expects {last}): run a newer unicity"
        );
    }
    let pending = expected.iter().filter(|e| !applied.contains(e)).count();
    if pending > 0 {
        anyhow::bail!(
            "the database is at migration {at}, this binary expects {last} ({pending} not applied); \
             run the server or `unicity migrate` first"
        );
    }
    Ok(())
}

/// The names of the migrations applied to `db`, read without creating the
/// table that records them.
async fn applied_migrations(db: &DatabaseConnection) -> anyhow::Result<Vec<String>> {
    const TABLE: &str = "seaql_migrations";
    if !migration::SchemaManager::new(db).has_table(TABLE).await? {
        return Ok(Vec::new());
    }
    let rows = db
        .query_all_raw(sea_orm::Statement::from_string(
            backend(db),
            format!("SELECT version FROM {TABLE}"),
        ))
        .await?;
    Ok(rows
        .iter()
        .map(|row| row.try_get::<String>("", "version"))
        .collect::<Result<_, _>>()?)
}

/// True when the database answers and the journal is there (an O(1) read).
pub async fn ping(db: &DatabaseConnection) -> bool {
    db.execute_unprepared("SELECT position FROM journal ORDER BY position DESC LIMIT 1")
        .await
        .is_ok()
}

/// Which backend a connection talks to, for the few places that must know.
pub fn backend(db: &DatabaseConnection) -> DbBackend {
    db.get_database_backend()
}

/// Hides the passwords of a database URL for logs and errors: the one
/// before the host, and any query parameter that names one
/// (`?password=…`, `sslpassword=…`, which the drivers accept too).
pub fn redact_url(url: &str) -> String {
    let (head, rest) = match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            let userinfo = &url[scheme_end + 3..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            (
                format!("{}{}:***", &url[..scheme_end + 3], user),
                &url[at..],
            )
        }
        _ => (String::new(), url),
    };
    let Some((path, query)) = rest.split_once('?') else {
        return format!("{head}{rest}");
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if name.to_ascii_lowercase().contains("password") => {
                format!("{name}=***")
            }
            _ => pair.to_owned(),
        })
        .collect();
    format!("{head}{path}?{}", pairs.join("&"))
}

/// A fresh, migrated SQLite database in a temporary directory, for unit tests
/// of the store (the directory lives as long as the returned guard).
#[cfg(test)]
pub(crate) async fn test_database() -> (tempfile::TempDir, DatabaseConnection) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = connect(&test_url(&dir)).await.expect("SQLite opens");
    migrate(&db).await.expect("migrations apply");
    (dir, db)
}

/// SQLite's plan for `query`, one step a line (`SCAN deliveries`, `SEARCH
/// deliveries USING INDEX …`).
#[cfg(test)]
pub(crate) async fn sqlite_plan<Q: sea_orm::QueryTrait>(
    db: &DatabaseConnection,
    query: &Q,
) -> Vec<String> {
    sqlite_plan_of(db, query.build(DbBackend::Sqlite)).await
}

/// SQLite's plan for a built statement, as `sqlite_plan`.
#[cfg(test)]
pub(crate) async fn sqlite_plan_of(
    db: &DatabaseConnection,
    built: sea_orm::Statement,
) -> Vec<String> {
    use sea_orm::TransactionTrait;
    let explain = sea_orm::Statement::from_sql_and_values(
        DbBackend::Sqlite,
        format!("EXPLAIN QUERY PLAN {}", built.sql),
        built.values.map(|v| v.0).unwrap_or_default(),
    );
    // EXPLAIN plans against the schema its connection last read: on a
    // pooled connection opened before the migrations, that is the schema of
    // before them (an index since dropped). A read on the same connection
    // first brings it up to date.
    let txn = db.begin().await.expect("a read transaction");
    txn.execute_unprepared("SELECT COUNT(*) FROM sqlite_master")
        .await
        .expect("the schema reads");
    let plan = txn
        .query_all_raw(explain)
        .await
        .expect("a plan")
        .iter()
        .map(|row| row.try_get::<String>("", "detail").expect("a step"))
        .collect();
    txn.commit().await.expect("the read ends");
    plan
}

/// The URL of `test_database`'s database in `dir`.
#[cfg(test)]
pub(crate) fn test_url(dir: &tempfile::TempDir) -> String {
    format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("unicity.db").display()
    )
}

/// `SELECT 1 FROM deliveries WHERE deliveries.delivery_id = <row>`: the
/// delivery a row of another table names, as an `EXISTS` probe on its
/// primary key to which callers add their conditions.
pub(crate) fn delivery_named_by(
    row: impl sea_orm::sea_query::IntoColumnRef,
) -> sea_orm::sea_query::SelectStatement {
    use sea_orm::sea_query::{Expr, ExprTrait, Query};
    let mut probe = Query::select();
    probe
        .expr(Expr::val(1))
        .from(entities::delivery::Entity)
        .and_where(
            Expr::col((
                entities::delivery::Entity,
                entities::delivery::Column::DeliveryId,
            ))
            .equals(row),
        );
    probe
}

/// A SQLite pragma's value as `T` (`page_count`, `journal_mode`, …).
#[cfg(test)]
pub(crate) async fn pragma<T: sea_orm::TryGetable>(db: &DatabaseConnection, name: &str) -> T {
    let row = db
        .query_one_raw(sea_orm::Statement::from_string(
            DbBackend::Sqlite,
            format!("PRAGMA {name}"),
        ))
        .await
        .expect("the pragma reads")
        .expect("one row");
    row.try_get_by_index(0).expect("a value")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sqlite_syncs_every_commit_to_its_wal_unless_the_database_is_a_scratch_one() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let full = connect(&test_url(&dir)).await.expect("SQLite opens");
        assert_eq!(pragma::<i64>(&full, "synchronous").await, 2, "FULL");
        assert_eq!(pragma::<String>(&full, "journal_mode").await, "wal");
        let other = tempfile::tempdir().expect("a temporary directory");
        let scratch = connect_with(&test_url(&other), Durability::Scratch)
            .await
            .expect("SQLite opens");
        assert_eq!(pragma::<i64>(&scratch, "synchronous").await, 0, "OFF");
        assert_eq!(pragma::<String>(&scratch, "journal_mode").await, "memory");
    }

    #[tokio::test]
    async fn a_database_behind_the_binary_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = connect(&test_url(&dir)).await.expect("SQLite opens");
        let refused = require_current_schema(&db).await.unwrap_err().to_string();
        assert!(refused.contains("none (an empty database)"), "{refused}");
        assert!(refused.contains("unicity migrate"), "{refused}");
        let manager = migration::SchemaManager::new(&db);
        assert!(!manager.has_table("seaql_migrations").await.unwrap());
        migrate(&db).await.expect("migrations apply");
        require_current_schema(&db)
            .await
            .expect("the schema is current");
    }

    #[test]
    fn redact_url_hides_only_the_password() {
        assert_eq!(
            redact_url("postgres://app:s3cret@db:5432/unicity"),
            "postgres://app:***@db:5432/unicity"
        );
        assert_eq!(
            redact_url("sqlite://unicity.db?mode=rwc"),
            "sqlite://unicity.db?mode=rwc"
        );
        assert_eq!(
            redact_url("postgres://db/unicity?user=app&password=s3cret&sslmode=require"),
            "postgres://db/unicity?user=app&password=***&sslmode=require"
        );
        assert_eq!(
            redact_url("postgres://app:s3cret@db/unicity?sslpassword=k3y"),
            "postgres://app:***@db/unicity?sslpassword=***"
        );
    }
}
