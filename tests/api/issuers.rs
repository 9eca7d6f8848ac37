//! An upgrade records who issued each API token and set-password link
//! (migration 060) from the journal. A server, as it starts, withdraws what
//! an issuer no longer trusted still has live — an admin disabled or
//! demoted, a token revoked, before the upgrade — and disabling an admin
//! afterwards withdraws what they issued before it, leaving what the host
//! issued.

use migration::{Migrator, MigratorTrait};
use reqwest::StatusCode;
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait};
use unicity::auth::secrets;
use unicity::domain::journal::{
    Actor, JournalEvent, OperatorCreated, PasswordLinkIssued, TokenIssued,
};
use unicity::services::access;
use uuid::Uuid;

use crate::support::app::{TestApp, fresh_database, spawn_on};
use crate::support::counts::Counts;

/// The migrations up to and including 059.
const BEFORE_ISSUERS: u32 = 36;

async fn run(db: &DatabaseConnection, sql: &str) {
    db.execute_unprepared(sql).await.expect(sql);
}

async fn journal(db: &DatabaseConnection, event: JournalEvent) {
    let data = event.data_text().replace('\'', "''");
    run(
        db,
        &format!(
            "INSERT INTO journal (delivery_id, event_type, event_version, data, recorded_at) \
             VALUES (NULL, '{}', 1, '{data}', '2026-12-01T00:00:00Z')",
            event.event_type()
        ),
    )
    .await;
}

/// An operator as an earlier release left it, and the actor they act as.
async fn operator(db: &DatabaseConnection, name: &str, role: &str, enabled: bool) -> Actor {
    let id = Uuid::now_v7();
    run(
        db,
        &format!(
            "INSERT INTO operators (id, name, role, password_hash, enabled, created_at) \
             VALUES ('{id}', '{name}', '{role}', 'x', {enabled}, '2026-12-01T00:00:00Z')"
        ),
    )
    .await;
    Actor::Operator {
        id,
        name: name.to_owned(),
    }
}

/// A token `by` issued, as an earlier release left it, revoked or not; the
/// actor it acts as.
async fn token(db: &DatabaseConnection, name: &str, by: Actor, revoked: bool) -> Actor {
    let id = Uuid::now_v7();
    let revoked_at = if revoked {
        "'2026-12-02T00:00:00Z'"
    } else {
        "NULL"
    };
    run(
        db,
        &format!(
            "INSERT INTO api_tokens (id, name, role, token_hash, created_at, revoked_at) \
             VALUES ('{id}', '{name}', 'admin', '{}', '2026-12-01T00:00:00Z', {revoked_at})",
            secrets::digest(&secret(name))
        ),
    )
    .await;
    journal(
        db,
        JournalEvent::TokenIssued(TokenIssued {
            token_id: id,
            name: name.to_owned(),
            role: "admin".to_owned(),
            expires_at: None,
            by,
        }),
    )
    .await;
    Actor::Token {
        id,
        name: name.to_owned(),
    }
}

/// The bearer secret of the token `name`.
fn secret(name: &str) -> String {
    format!("uni_test_{name}")
}

/// An unused set-password link for `operator`, as the event `event` left
/// it.
async fn link(db: &DatabaseConnection, operator: &Actor, event: JournalEvent) {
    let Actor::Operator { id, name } = operator else {
        unreachable!()
    };
    run(
        db,
        &format!(
            "INSERT INTO password_links (token_hash, operator_id, created_at, expires_at) \
             VALUES ('link-{name}', '{id}', '2026-12-01T00:00:00Z', '2099-01-01T00:00:00Z')"
        ),
    )
    .await;
    journal(db, event).await;
}

async fn api(app: &TestApp, token: &str) -> StatusCode {
    reqwest::Client::new()
        .get(format!("{}/api/deliveries", app.address))
        .bearer_auth(secret(token))
        .send()
        .await
        .expect("answered")
        .status()
}

async fn live_tokens(db: &DatabaseConnection) -> Vec<String> {
    access::tokens(db)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.revoked_at.is_none() && !t.name.starts_with("test-"))
        .map(|t| t.name)
        .collect()
}

#[tokio::test]
async fn an_upgrade_finds_who_issued_each_grant_and_withdraws_what_the_untrusted_issued() {
    let (url, dir) = fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("connects");
    Migrator::up(&db, Some(BEFORE_ISSUERS))
        .await
        .expect("the migrations before apply");

    // Given, before the upgrade: ada and bob, admins; carl, an admin since
    // disabled; dan, an admin since demoted; each issued a token, bob's
    // token issued another, and a token since revoked issued one; the host
    // issued one too
    let ada = operator(&db, "ada", "admin", true).await;
    let bob = operator(&db, "bob", "admin", true).await;
    let carl = operator(&db, "carl", "admin", false).await;
    let dan = operator(&db, "dan", "support", true).await;
    let cy = operator(&db, "cy", "finance", true).await;
    let erin = operator(&db, "erin", "finance", true).await;
    let script = token(&db, "script", bob.clone(), false).await;
    token(&db, "chained", script, false).await;
    token(&db, "host", Actor::Cli, false).await;
    token(&db, "carl-token", carl.clone(), false).await;
    token(&db, "dan-token", dan.clone(), false).await;
    let old = token(&db, "old", Actor::Cli, true).await;
    token(&db, "orphan", old, false).await;
    // And bob handed out a link for ada and invited cy; the host a link for
    // erin
    let id = |actor: &Actor| actor.issuer().expect("an operator");
    let handed = |operator: &Actor, by: &Actor| {
        JournalEvent::PasswordLinkIssued(PasswordLinkIssued {
            operator_id: id(operator),
            name: "-".to_owned(),
            by: by.clone(),
        })
    };
    link(&db, &ada, handed(&ada, &bob)).await;
    let invited = JournalEvent::OperatorCreated(OperatorCreated {
        operator_id: id(&cy),
        name: "cy".to_owned(),
        role: "finance".to_owned(),
        by: bob.clone(),
    });
    link(&db, &cy, invited).await;
    link(&db, &erin, handed(&erin, &Actor::Cli)).await;

    // When a server starts on it (the upgrade runs)
    let app = spawn_on(&url, "", dir).await;

    // Then what carl, dan and the revoked token issued is refused, as the
    // server's act, and the rest works
    for refused in ["carl-token", "dan-token", "orphan"] {
        assert_eq!(
            api(&app, refused).await,
            StatusCode::UNAUTHORIZED,
            "{refused}"
        );
    }
    for works in ["script", "chained", "host"] {
        assert_eq!(api(&app, works).await, StatusCode::OK, "{works}");
    }
    assert_eq!(
        app.count(
            "SELECT COUNT(*) FROM journal WHERE event_type = 'TokenRevoked' \
             AND CAST(data AS TEXT) LIKE '%\"kind\":\"server\"%'"
        )
        .await,
        3
    );

    // When bob is disabled
    let withdrawn = access::disable_operator(&app.db, "bob", Actor::Cli)
        .await
        .expect("disabled")
        .expect("bob was enabled");

    // Then his token, the token it issued, his link and his invitation are
    // withdrawn; the host's token and link stand
    assert_eq!(withdrawn.tokens, ["script", "chained"]);
    assert_eq!(withdrawn.links, 2);
    assert_eq!(live_tokens(&app.db).await, ["host"]);
    let links: Vec<String> = unicity::store::entities::password_link::Entity::find()
        .all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.operator_id)
        .collect();
    assert_eq!(links, [id(&erin).to_string()]);
}
