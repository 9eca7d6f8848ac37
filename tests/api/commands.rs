//! The commands an engineer runs against the live database from a laptop,
//! run as the real binary: those that only read record no strategy version,
//! apply no migration, and ask for no secret they never use.

use sea_orm::ConnectionTrait;
use unicity::config::KEY_SECRET_ENV;

use crate::support::app::{fresh_database, spawn_app_with};
use crate::support::counts::Counts;
use crate::support::processes::{cli, finished, refused};
use crate::versions::{refund_hierarchy, refund_strategy, version};

/// The deployed configuration: `vref@1` alone.
fn deployed() -> String {
    let v1 = version(1, "1h", &["amount"]);
    format!(
        "{}{}",
        refund_strategy("vref", &v1),
        refund_hierarchy("vref")
    )
}

/// An engineer's local file: the deployed `vref@1` and an experimental
/// `vref@2` no server ever ran.
fn experimenting() -> String {
    let v1 = version(1, "1h", &["amount"]);
    let v2 = version(2, "1h", &["amount", "currency"]);
    format!(
        "{}{}{}",
        refund_strategy("vref", &v1),
        refund_strategy("vref", &v2),
        refund_hierarchy("vref")
    )
}

#[tokio::test]
async fn listing_strategies_with_a_version_only_the_local_file_knows_records_nothing() {
    // Given a server that recorded its strategy versions,
    let app = spawn_app_with(&deployed()).await;
    let versions = app.strategy_versions().await;
    let recorded = app.journal_count("StrategyVersionRecorded").await;
    let journal = app.journal_rows().await;
    assert!(versions > 0 && recorded > 0);

    // when an engineer lists the strategies with a file holding an
    // experimental version,
    let dir = tempfile::tempdir().expect("temp dir");
    let mut list = cli(&app.database_url, &experimenting(), dir.path());
    list.args(["strategies", "list"]);
    let printed = finished(list).await;

    // then the list shows it, and the database knows nothing of it: the
    // day the real `vref@2` ships, it is recorded as it is then.
    assert!(printed.contains("vref@2"), "{printed}");
    assert_eq!(app.strategy_versions().await, versions);
    assert_eq!(app.journal_count("StrategyVersionRecorded").await, recorded);
    assert_eq!(app.journal_rows().await, journal);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM strategy_versions WHERE name = 'vref' AND version = 2")
            .await,
        0
    );
}

#[tokio::test]
async fn commands_that_verify_no_signature_run_without_the_signing_or_key_secrets() {
    let app = spawn_app_with(&deployed()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    for args in [
        &["strategies", "list"][..],
        &["corpus", "report"],
        &["observe", "report", "--source", "stripe"],
    ] {
        // An engineer's environment holds none of the production secrets.
        let mut command = cli(&app.database_url, &deployed(), dir.path());
        command
            .env_remove(KEY_SECRET_ENV)
            .env_remove("TEST_STRIPE_SECRETS")
            .args(args);
        finished(command).await;
    }
}

#[tokio::test]
async fn reading_commands_refuse_a_database_behind_the_binary_and_leave_it_as_it_was() {
    // Given a database whose last migration this binary has and it has not,
    let (url, _dir) = fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("database");
    unicity::store::migrate(&db).await.expect("migrations");
    let last: String = db
        .query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT MAX(version) FROM seaql_migrations".to_owned(),
        ))
        .await
        .expect("read")
        .expect("a row")
        .try_get_by_index(0)
        .expect("a name");
    db.execute_unprepared(&format!(
        "DELETE FROM seaql_migrations WHERE version = '{last}'"
    ))
    .await
    .expect("delete");
    let applied = || async {
        let row = db
            .query_one_raw(sea_orm::Statement::from_string(
                db.get_database_backend(),
                "SELECT COUNT(*) FROM seaql_migrations".to_owned(),
            ))
            .await
            .expect("read")
            .expect("a row");
        row.try_get_by_index::<i64>(0).expect("a count")
    };
    let before = applied().await;

    let dir = tempfile::tempdir().expect("temp dir");
    let candidate = dir.path().join("candidate.toml");
    std::fs::write(&candidate, experimenting()).expect("candidate");
    let case = uuid::Uuid::now_v7().to_string();
    let out = dir.path().display().to_string();
    let candidate = candidate.display().to_string();
    for args in [
        &["strategies", "list"][..],
        &["corpus", "report"],
        &["observe", "report", "--source", "stripe"],
        &["replay", "--strategies", &candidate],
        &["fixtures", "export", "--case", &case, "--out", &out],
        &["strategies", "retire", "norefid-refund-ref@1", "--dry-run"],
    ] {
        // when a command that reads runs on it,
        let mut command = cli(&url, &experimenting(), dir.path());
        command.args(args);
        let said = refused(command).await;
        // then it refuses, saying what to run,
        assert!(said.contains(&last), "{args:?}: {said}");
        assert!(said.contains("unicity migrate"), "{args:?}: {said}");
        // and migrated nothing, recorded nothing.
        assert_eq!(applied().await, before, "{args:?} migrated");
    }
    let versions: i64 = db
        .query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) FROM strategy_versions".to_owned(),
        ))
        .await
        .expect("read")
        .expect("a row")
        .try_get_by_index(0)
        .expect("a count");
    assert_eq!(versions, 0);
}

/// An age no date can be that old is refused in words, not with a panic.
#[tokio::test]
async fn a_retention_age_beyond_any_date_is_refused_with_a_clear_error() {
    let app = spawn_app_with("").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let mut command = cli(&app.database_url, "", dir.path());
    command.args([
        "retention",
        "purge-evidence",
        "--older-than-days",
        "4000000000",
    ]);
    let said = refused(command).await;
    assert!(said.contains("reaches before any date"), "{said}");
    assert!(!said.contains("panicked"), "{said}");
}

#[tokio::test]
async fn a_breaker_reset_of_a_version_nobody_has_fails_and_of_an_untripped_one_says_so() {
    let app = spawn_app_with("").await;
    let dir = tempfile::tempdir().expect("temp dir");
    let reset = |strategy: &str| {
        let mut command = cli(&app.database_url, "", dir.path());
        command.args(["breaker", "reset", strategy, "--reason", "checked by hand"]);
        command
    };
    // A mistyped name@version is an error naming it
    let said = refused(reset("norefid-refund-fingerprnt@1")).await;
    assert!(said.contains("norefid-refund-fingerprnt@1"), "{said}");
    assert!(said.contains("strategies list"), "{said}");
    // A configured version that is not tripped is said so, and succeeds
    let printed = finished(reset("norefid-refund-fingerprint@1")).await;
    assert!(printed.contains("was not tripped"), "{printed}");
    assert_eq!(app.journal_count("StrategyReset").await, 0);
}

#[tokio::test]
async fn reconciling_with_a_version_only_the_local_file_knows_records_nothing() {
    // Given a server that recorded its strategy versions
    let app = spawn_app_with(&deployed()).await;
    let versions = app.strategy_versions().await;
    // When an engineer reconciles with a file holding an experimental one
    let dir = tempfile::tempdir().expect("temp dir");
    let mut reconcile = cli(&app.database_url, &experimenting(), dir.path());
    let now = chrono::Utc::now();
    reconcile.args([
        "reconcile",
        "--from",
        &(now - chrono::Duration::hours(1)).to_rfc3339(),
        "--to",
        &now.to_rfc3339(),
    ]);
    // (nothing here lists operations: it stops there)
    let said = refused(reconcile).await;
    assert!(said.contains("list_url"), "{said}");
    // Then the database knows nothing of the experiment
    assert_eq!(app.strategy_versions().await, versions);
    assert_eq!(
        app.count("SELECT COUNT(*) FROM strategy_versions WHERE name = 'vref' AND version = 2")
            .await,
        0
    );
}

/// Commands that derive keys or seal values compare the key secret with
/// the one the servers recorded: run from a machine with another, a
/// migration would move effects to keys no server derives, and a late
/// retry would be paid again.
#[tokio::test]
async fn commands_that_derive_keys_refuse_another_key_secret() {
    let app = spawn_app_with(&deployed()).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let legacy = dir.path().join("legacy.csv");
    std::fs::write(&legacy, "reference,resource,amount,applied_at\n").expect("legacy file");
    let legacy = legacy.to_str().expect("a path");
    let other = "another-key-secret-0123456789abcdef";
    for args in [
        &["strategies", "migrate", "norefid-refund-ref@1"][..],
        &["strategies", "retire", "norefid-refund-ref@1", "--dry-run"],
        &["observe", "import", "--source", "hmac", legacy],
    ] {
        let mut command = cli(&app.database_url, &deployed(), dir.path());
        command.env(KEY_SECRET_ENV, other).args(args);
        let said = refused(command).await;
        assert!(said.contains("sealed with"), "{args:?}: {said}");
        assert!(!said.contains(other), "{said}");
    }
    // With the servers' secret, they run.
    let mut command = cli(&app.database_url, &deployed(), dir.path());
    command.args(["observe", "import", "--source", "hmac", legacy]);
    finished(command).await;
}
