//! An administrator's change held open while the server acts: a
//! transaction on a connection of the test's own that, on SQLite, holds the
//! database's write lock from its first statement (`BEGIN IMMEDIATE`) and,
//! on PostgreSQL, the rows it writes. A race between a person's action and
//! a change to their account is played by committing it once the action
//! waits on it.

use std::time::{Duration, Instant};

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, SqliteTransactionMode,
    TransactionOptions, TransactionTrait,
};

pub struct AdminChange {
    _connection: DatabaseConnection,
    change: DatabaseTransaction,
    pub postgres: bool,
}

impl AdminChange {
    /// Begins the change on a new connection to `database_url`.
    pub async fn begin(database_url: &str) -> Self {
        let connection = sea_orm::Database::connect(database_url)
            .await
            .expect("a connection");
        let postgres = connection.get_database_backend() == DbBackend::Postgres;
        let immediate = TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..Default::default()
        };
        let change = connection
            .begin_with_options(immediate)
            .await
            .expect("begun");
        Self {
            _connection: connection,
            change,
            postgres,
        }
    }

    /// Runs `sql` in the change.
    pub async fn execute(&self, sql: &str) {
        self.change
            .execute_unprepared(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    /// Commits once the server waits on the change: on PostgreSQL once a
    /// backend of its database waits on a lock, on SQLite after long enough
    /// for the server's writer to be waiting on the write lock.
    pub async fn commit_once_waited_on(self) {
        self.commit_once_waiting(1).await;
    }

    /// `commit_once_waited_on`, once `waiting` backends wait on a lock (on
    /// PostgreSQL: this change's, or one another waiter holds).
    pub async fn commit_once_waiting(self, waiters: i64) {
        if self.postgres {
            let waiting = sea_orm::Statement::from_string(
                DbBackend::Postgres,
                "SELECT COUNT(*) AS n FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
            );
            let started = Instant::now();
            loop {
                let row = self
                    ._connection
                    .query_one_raw(waiting.clone())
                    .await
                    .expect("read")
                    .expect("a row");
                if row.try_get::<i64>("", "n").expect("a count") >= waiters {
                    break;
                }
                assert!(started.elapsed().as_secs() < 30, "nothing waits on it");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } else {
            tokio::time::sleep(Duration::from_millis(700)).await;
        }
        self.change.commit().await.expect("the change committed");
    }
}

/// `GET path` with a new engineer's token, answered while an admin's
/// change demoting that token to support waited on it: committed once the
/// request's write waits on the change.
pub async fn get_while_its_token_is_demoted(
    app: &crate::support::app::TestApp,
    path: &str,
) -> reqwest::Response {
    let token = crate::support::app::issue_token(&app.db, unicity::auth::Role::Engineer).await;
    let demoting = AdminChange::begin(&app.database_url).await;
    demoting
        .execute("UPDATE api_tokens SET role = 'support' WHERE role = 'engineer'")
        .await;
    let request = app
        .client
        .get(format!("{}{path}", app.address))
        .bearer_auth(token);
    let asking = tokio::spawn(async move { request.send().await.expect("answered") });
    demoting.commit_once_waited_on().await;
    asking.await.expect("no panic")
}
