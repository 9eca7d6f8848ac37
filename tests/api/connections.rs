//! How Unicity's database connections are set up.

use futures_util::future::join_all;
use sea_orm::TransactionTrait;
use unicity::store::{self, nodelay};

/// sqlx 0.9.0 opens PostgreSQL connections with Nagle's algorithm on; a
/// batch's insert larger than a socket buffer then waited ~40 ms for a delayed
/// ACK. Every connection Unicity opens must have `TCP_NODELAY`. (SQLite run:
/// there is no socket to check.)
#[tokio::test]
async fn every_postgres_connection_unicity_opens_has_nagle_off() {
    let Ok(url) = std::env::var("TEST_DATABASE_URL") else {
        return;
    };
    let servers = nodelay::server_addresses(&url).await;
    assert!(
        !servers.is_empty(),
        "TEST_DATABASE_URL should reach PostgreSQL over TCP"
    );
    let db = store::connect(&url).await.expect("PostgreSQL opens");
    // Four connections held at once: the pool has to open them.
    let held: Vec<_> = join_all((0..4).map(|_| db.begin()))
        .await
        .into_iter()
        .map(|txn| txn.expect("a transaction begins"))
        .collect();
    let writer = store::connect_writer(&url).await.expect("writer opens");
    let writing = writer.begin().await.expect("the writer begins");

    // Other tests of this process hold connections of their own; at least
    // the five held here (four pooled, the writer's) must have the option
    // (without it, none would).
    let without_nagle = nodelay::connections_to(&servers)
        .into_iter()
        .filter(|&(_, nodelay)| nodelay)
        .count();
    assert!(
        without_nagle > held.len(),
        "{without_nagle} connections to {servers:?} have TCP_NODELAY"
    );
    drop(writing);
    drop(held);
}
