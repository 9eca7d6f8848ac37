//! On SQLite the effects and their links to deliveries are clustered by
//! their primary key (migration 047): an upgrade keeps
//! their rows, their indexes and the claims those indexes make.
//! PostgreSQL's tables are heaps whatever the key; this test is SQLite's.

use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

use crate::support::app::fresh_database;
use crate::support::counts::Counts;
use crate::support::probe::Probe;

/// The migrations up to and including 046.
const BEFORE_CLUSTERING: u32 = 23;

async fn catalog(db: &DatabaseConnection, name: &str) -> Option<String> {
    db.query_one_raw(Statement::from_string(
        DbBackend::Sqlite,
        format!("SELECT sql FROM sqlite_master WHERE name = '{name}'"),
    ))
    .await
    .unwrap()
    .map(|row| row.try_get_by_index::<String>(0).unwrap())
}

const EFFECT: &str = "INSERT INTO effects (effect_id, key, effect_type, criticality, state, \
     sink, first_delivery_id, discriminants, created_at, expires_at, key_purged, provider_ref) \
     VALUES ";

#[tokio::test]
async fn an_upgrade_clusters_the_keyed_tables_and_keeps_their_rows_indexes_and_claims() {
    if std::env::var("TEST_DATABASE_URL").is_ok_and(|url| !url.is_empty()) {
        return;
    }
    let (url, _dir) = fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("connects");
    Migrator::up(&db, Some(BEFORE_CLUSTERING))
        .await
        .expect("the migrations before apply");
    for statement in [
        format!(
            "{EFFECT} ('e-1', 'k-1', 'refund', 'critical', 'applied', 'record', 'd-1', '{{}}', \
             '2026-12-01T00:00:00Z', '2026-12-02T00:00:00Z', FALSE, 're_1')"
        ),
        "INSERT INTO transport_links (transport_key, first_delivery_id, body_fingerprint, \
         created_at) VALUES ('t-1', 'd-1', 'f-1', '2026-12-01T00:00:00Z')"
            .to_owned(),
        "INSERT INTO effect_deliveries (effect_id, delivery_id, linked_at) VALUES \
         ('e-1', 'd-2', '2026-12-01T00:00:00Z')"
            .to_owned(),
    ] {
        db.execute_unprepared(&statement).await.expect("a row");
    }
    for table in ["effects", "transport_links", "effect_deliveries"] {
        let ddl = catalog(&db, table).await.expect(table);
        assert!(!ddl.contains("WITHOUT ROWID"), "{ddl}");
    }

    unicity::store::migrate(&db)
        .await
        .expect("the rest applies");
    let probe = Probe::of(&db);

    for table in ["effects", "effect_deliveries"] {
        let ddl = catalog(&db, table).await.expect(table);
        assert!(ddl.ends_with("WITHOUT ROWID"), "{ddl}");
        assert_eq!(
            probe.count(&format!("SELECT COUNT(*) FROM {table}")).await,
            1,
            "{table}"
        );
    }
    // Keyed by a hash, the transport links keep their rowid and index.
    let links = catalog(&db, "transport_links")
        .await
        .expect("transport_links");
    assert!(!links.contains("WITHOUT ROWID"), "{links}");
    assert_eq!(probe.count("SELECT COUNT(*) FROM transport_links").await, 1);
    assert_eq!(
        probe
            .count(
                "SELECT COUNT(*) FROM effects WHERE effect_id = 'e-1' AND key = 'k-1' \
             AND state = 'applied' AND key_purged = FALSE AND provider_ref = 're_1' \
             AND expires_at = '2026-12-02T00:00:00Z'"
            )
            .await,
        1
    );
    // (Their horizons have an index of their own since migration 052.)
    for index in ["effects_leased", "effects_provider_ref"] {
        assert!(catalog(&db, index).await.is_some(), "{index} is missing");
    }
    // The key stays the atomic barrier, and a provider's operation justifies
    // one effect of a type.
    let same_key = db
        .execute_unprepared(&format!(
            "{EFFECT} ('e-2', 'k-1', 'refund', 'critical', 'reserved', 'record', 'd-3', '{{}}', \
             '2026-12-01T00:00:00Z', NULL, FALSE, NULL)"
        ))
        .await;
    assert!(same_key.is_err(), "a second row took the key k-1");
    let same_operation = db
        .execute_unprepared(&format!(
            "{EFFECT} ('e-3', 'k-3', 'refund', 'critical', 'reserved', 'record', 'd-4', '{{}}', \
             '2026-12-01T00:00:00Z', NULL, FALSE, 're_1')"
        ))
        .await;
    assert!(same_operation.is_err(), "re_1 justified a second refund");
    let same_link = db
        .execute_unprepared(
            "INSERT INTO effect_deliveries (effect_id, delivery_id, linked_at) VALUES \
             ('e-1', 'd-2', '2026-12-01T00:00:00Z')",
        )
        .await;
    assert!(same_link.is_err(), "a delivery was linked twice");
}
