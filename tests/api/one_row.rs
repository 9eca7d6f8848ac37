//! A database written before a taken key became one row migrates to the same
//! meaning: live reservations keep their claim, lease and horizon in their
//! effect's row, keys purged at their horizon read as purged, the old table
//! is gone, and running the migration again changes nothing. A database
//! whose reservations and ledger disagree is refused, unchanged.

use chrono::{DateTime, TimeDelta, Utc};
use migration::{Migrator, MigratorTrait, SchemaManager};
use sea_orm::{
    ColumnTrait, ConnectionTrait, Database, DatabaseConnection, DbBackend, EntityTrait,
    QueryFilter, Statement, Value,
};
use unicity::store::entities::{effect, effect_horizon};

use crate::support::app::fresh_database;

/// Migrations shipped before the merge.
const BEFORE_MERGE: u32 = 21;

async fn before_merge() -> (DatabaseConnection, Option<tempfile::TempDir>) {
    let (url, dir) = fresh_database().await;
    let db = Database::connect(url.as_str()).await.expect("connects");
    Migrator::up(&db, Some(BEFORE_MERGE))
        .await
        .expect("old migrations apply");
    (db, dir)
}

/// Runs `sql` with `$n` placeholders on either backend.
async fn exec(db: &DatabaseConnection, sql: &str, values: Vec<Value>) {
    let backend = db.get_database_backend();
    let mut sql = sql.to_owned();
    if backend == DbBackend::Sqlite {
        for n in (1..=values.len()).rev() {
            sql = sql.replace(&format!("${n}"), "?");
        }
    }
    db.execute_raw(Statement::from_sql_and_values(backend, sql, values))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
}

/// A ledger row in the old shape.
async fn ledger(db: &DatabaseConnection, key: &str, status: &str, provider_ref: Option<&str>) {
    let json = if db.get_database_backend() == DbBackend::Postgres {
        "CAST('{}' AS JSONB)"
    } else {
        "'{}'"
    };
    exec(
        db,
        &format!(
            "INSERT INTO effects (effect_id, key, effect_type, criticality, status, sink, result, \
             downstream_ref, provider_ref, first_delivery_id, discriminants, created_at, settled_at, \
             evidence_purged_at) VALUES ($1, $2, 'refund', 'critical', $3, 'record', NULL, NULL, $4, \
             $5, {json}, $6, NULL, NULL)"
        ),
        vec![
            format!("e-{key}").into(),
            key.into(),
            status.into(),
            provider_ref.map(str::to_owned).into(),
            format!("d-{key}").into(),
            at(0).into(),
        ],
    )
    .await;
}

/// A reservation in the old shape.
async fn reservation(
    db: &DatabaseConnection,
    key: &str,
    state: &str,
    token: i64,
    lease_until: Option<DateTime<Utc>>,
) {
    let json = if db.get_database_backend() == DbBackend::Postgres {
        "CAST('{}' AS JSONB)"
    } else {
        "'{}'"
    };
    exec(
        db,
        &format!(
            "INSERT INTO reservations (key, strategy, strength, effect_type, criticality, state, \
             fencing_token, lease_until, first_delivery_id, effect_id, discriminants, expires_at, \
             updated_at) VALUES ($1, 'refund@1', 'weak', 'refund', 'critical', $2, $3, $4, $5, $6, \
             {json}, $7, $8)"
        ),
        vec![
            key.into(),
            state.into(),
            token.into(),
            lease_until.into(),
            format!("d-{key}").into(),
            format!("e-{key}").into(),
            at(3600).into(),
            at(10).into(),
        ],
    )
    .await;
}

async fn row(db: &DatabaseConnection, key: &str) -> effect::Model {
    effect::Entity::find()
        .filter(effect::Column::Key.eq(key))
        .one(db)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{key} has its row"))
}

async fn all_rows(db: &DatabaseConnection) -> Vec<effect::Model> {
    let mut rows = effect::Entity::find().all(db).await.unwrap();
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    rows
}

#[tokio::test]
async fn live_reservations_and_purged_keys_keep_their_meaning_in_one_row_per_key() {
    let (db, _dir) = before_merge().await;
    let lease = at(30);
    ledger(&db, "k:running", "pending", None).await;
    reservation(&db, "k:running", "reserved", 1, Some(lease)).await;
    ledger(&db, "k:applied", "applied", Some("op_1")).await;
    reservation(&db, "k:applied", "applied", 1, None).await;
    ledger(&db, "k:failed", "failed", None).await;
    reservation(&db, "k:failed", "failed", 2, None).await;
    ledger(&db, "k:unknown", "unknown", None).await;
    reservation(&db, "k:unknown", "unknown", 1, Some(lease)).await;
    ledger(&db, "k:purged", "applied", None).await;

    Migrator::up(&db, None).await.expect("the merge applies");

    let manager = SchemaManager::new(&db);
    assert!(!manager.has_table("reservations").await.unwrap());
    assert!(!manager.has_column("effects", "status").await.unwrap());
    assert!(
        manager
            .has_index("effects", "effects_leased")
            .await
            .unwrap()
    );
    // The horizons the merge kept moved to the projector's table since.
    assert!(
        manager
            .has_index("effect_horizons", "effect_horizons_expiring")
            .await
            .unwrap()
    );

    let running = row(&db, "k:running").await;
    assert_eq!(running.state, "reserved");
    assert_eq!(running.fencing_token, Some(1));
    assert_eq!(running.lease_until, Some(lease));
    assert_eq!(running.expires_at, Some(at(3600)));
    assert!(!running.key_purged);
    let applied = row(&db, "k:applied").await;
    assert_eq!(
        (
            applied.state.as_str(),
            applied.fencing_token,
            applied.lease_until
        ),
        ("applied", Some(1), None)
    );
    assert_eq!(applied.provider_ref.as_deref(), Some("op_1"));
    assert!(!applied.key_purged);
    let failed = row(&db, "k:failed").await;
    assert_eq!(
        (failed.state.as_str(), failed.fencing_token),
        ("failed", Some(2))
    );
    let unknown = row(&db, "k:unknown").await;
    assert_eq!(
        (unknown.state.as_str(), unknown.lease_until),
        ("unknown", Some(lease))
    );
    let purged = row(&db, "k:purged").await;
    assert_eq!(purged.state, "applied");
    assert!(purged.key_purged);
    assert_eq!(
        (purged.fencing_token, purged.lease_until, purged.expires_at),
        (None, None, None)
    );
    assert_eq!(all_rows(&db).await.len(), 5, "one row per key, none added");
    // Every key but the purged one keeps its horizon, for the sweeper.
    let mut with_horizon = effect_horizon::Entity::find()
        .all(&db)
        .await
        .unwrap()
        .into_iter()
        .map(|h| (h.effect_id, h.expires_at))
        .collect::<Vec<_>>();
    with_horizon.sort();
    let mut expected = Vec::new();
    for key in ["k:running", "k:applied", "k:failed", "k:unknown"] {
        let r = row(&db, key).await;
        expected.push((r.effect_id, r.expires_at.expect("a horizon")));
    }
    expected.sort();
    assert_eq!(with_horizon, expected);

    // Running it again (a SQLite process that lost the race) changes nothing.
    let before = all_rows(&db).await;
    Migrator::migrations()[BEFORE_MERGE as usize]
        .up(&manager)
        .await
        .expect("the merge runs again");
    assert_eq!(all_rows(&db).await, before);

    // A key written now is in the fast index; its default is never relied on.
    let now = Utc::now();
    let fresh = effect::Model {
        key: "k:new".to_owned(),
        effect_id: "e-k:new".to_owned(),
        expires_at: Some(now + TimeDelta::hours(1)),
        key_purged: false,
        ..running
    };
    effect::Entity::insert(sea_orm::IntoActiveModel::into_active_model(fresh))
        .exec_without_returning(&db)
        .await
        .unwrap();
    assert!(!row(&db, "k:new").await.key_purged);
}

#[tokio::test]
async fn a_reservation_without_its_ledger_row_refuses_the_merge_and_changes_nothing() {
    let (db, _dir) = before_merge().await;
    ledger(&db, "k:paired", "applied", None).await;
    reservation(&db, "k:paired", "applied", 1, None).await;
    reservation(&db, "k:alone", "reserved", 1, Some(at(30))).await;

    let refused = Migrator::up(&db, None).await.unwrap_err();
    assert!(
        refused.to_string().contains("without their ledger row"),
        "{refused}"
    );
    assert!(refused.to_string().contains("k:alone"), "{refused}");
    let manager = SchemaManager::new(&db);
    assert!(manager.has_table("reservations").await.unwrap());
    assert!(manager.has_column("effects", "status").await.unwrap());
    assert!(!manager.has_column("effects", "key_purged").await.unwrap());
}

#[tokio::test]
async fn a_ledger_row_past_its_horizon_that_is_not_applied_refuses_the_merge() {
    let (db, _dir) = before_merge().await;
    ledger(&db, "k:stray", "pending", None).await;

    let refused = Migrator::up(&db, None).await.unwrap_err();
    assert!(refused.to_string().contains("not applied"), "{refused}");
    assert!(
        SchemaManager::new(&db)
            .has_table("reservations")
            .await
            .unwrap()
    );
}
