//! The keys' horizons are the projector's (migration 052): an upgrade
//! copies the horizon of every key still in the fast index into
//! `effect_horizons` and drops the index `effects` kept of them, and the
//! sweeper then purges through the table what it purged through the index.

use migration::{Migrator, MigratorTrait};
use sea_orm::ConnectionTrait;

use crate::support::app::fresh_database;
use crate::support::schema::{first_column, has_index};

/// The migrations up to and including 051.
const BEFORE_HORIZONS: u32 = 28;

const EFFECT: &str = "INSERT INTO effects (effect_id, key, effect_type, criticality, state, \
     sink, first_delivery_id, discriminants, created_at, expires_at, key_purged) VALUES ";

#[tokio::test]
async fn an_upgrade_moves_the_horizons_of_the_keys_in_the_fast_index_to_the_projectors_table() {
    let (url, _dir) = fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("connects");
    Migrator::up(&db, Some(BEFORE_HORIZONS))
        .await
        .expect("the migrations before apply");
    assert!(has_index(&db, "effects_horizon").await);
    // Applied and past its horizon; applied within it; purged (no horizon).
    let past = uuid::Uuid::now_v7().to_string();
    let within = uuid::Uuid::now_v7().to_string();
    let purged = uuid::Uuid::now_v7().to_string();
    for (id, key, expires_at, is_purged) in [
        (&past, "k-past", "'2026-12-02T00:00:00Z'", "FALSE"),
        (&within, "k-within", "'2999-01-01T00:00:00Z'", "FALSE"),
        (&purged, "k-purged", "NULL", "TRUE"),
    ] {
        db.execute_unprepared(&format!(
            "{EFFECT} ('{id}', '{key}', 'refund', 'critical', 'applied', 'record', 'd-1', '{{}}', \
             '2026-12-01T00:00:00Z', {expires_at}, {is_purged})"
        ))
        .await
        .expect("an effect");
    }

    unicity::store::migrate(&db)
        .await
        .expect("the rest applies");

    assert!(!has_index(&db, "effects_horizon").await);
    assert!(has_index(&db, "effect_horizons_expiring").await);
    let mut moved = first_column::<String>(&db, "SELECT effect_id FROM effect_horizons").await;
    moved.sort();
    let mut expected = vec![past.clone(), within.clone()];
    expected.sort();
    assert_eq!(moved, expected);

    let now = chrono::Utc::now();
    let due = unicity::store::reservations::past_horizon(&db, now, 10)
        .await
        .expect("the sweeper's read");
    assert_eq!(due, ["k-past"]);
}
