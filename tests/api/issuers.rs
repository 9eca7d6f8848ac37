//! An upgrade records who issued each API token and set-password link
//! (migration 060) from the journal, so that disabling an admin withdraws
//! what they issued before the upgrade too, and leaves what the host issued.

use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DatabaseConnection, EntityTrait};
use unicity::domain::journal::{
    Actor, JournalEvent, OperatorCreated, PasswordLinkIssued, TokenIssued,
};
use unicity::services::access;
use uuid::Uuid;

use crate::support::app::fresh_database;

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

async fn operator(db: &DatabaseConnection, id: Uuid, name: &str) {
    run(
        db,
        &format!(
            "INSERT INTO operators (id, name, role, password_hash, enabled, created_at) \
             VALUES ('{id}', '{name}', 'admin', 'x', TRUE, '2026-12-01T00:00:00Z')"
        ),
    )
    .await;
}

async fn token(db: &DatabaseConnection, id: Uuid, name: &str, by: Actor) {
    run(
        db,
        &format!(
            "INSERT INTO api_tokens (id, name, role, token_hash, created_at) \
             VALUES ('{id}', '{name}', 'admin', 'hash-{name}', '2026-12-01T00:00:00Z')"
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
}

#[tokio::test]
async fn an_upgrade_finds_who_issued_each_token_and_link_and_disabling_them_withdraws_it() {
    let (url, _dir) = fresh_database().await;
    let db = unicity::store::connect(&url).await.expect("connects");
    Migrator::up(&db, Some(BEFORE_ISSUERS))
        .await
        .expect("the migrations before apply");

    // Given, before the upgrade: ada and bob, admins; bob's token, a token
    // that token issued, and the host's token; a link bob handed out for
    // ada and one the host's invitation made for cy
    let (ada, bob, cy) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    operator(&db, ada, "ada").await;
    operator(&db, bob, "bob").await;
    operator(&db, cy, "cy").await;
    let bob_actor = Actor::Operator {
        id: bob,
        name: "bob".to_owned(),
    };
    let (script, chained, host) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    token(&db, script, "script", bob_actor.clone()).await;
    let script_actor = Actor::Token {
        id: script,
        name: "script".to_owned(),
    };
    token(&db, chained, "chained", script_actor).await;
    token(&db, host, "host", Actor::Cli).await;
    for (operator_id, name, by) in [(ada, "ada", bob_actor.clone()), (cy, "cy", Actor::Cli)] {
        run(
            &db,
            &format!(
                "INSERT INTO password_links (token_hash, operator_id, created_at, expires_at) \
                 VALUES ('link-{name}', '{operator_id}', '2026-12-01T00:00:00Z', \
                 '2099-01-01T00:00:00Z')"
            ),
        )
        .await;
        let event = if name == "cy" {
            JournalEvent::OperatorCreated(OperatorCreated {
                operator_id,
                name: name.to_owned(),
                role: "admin".to_owned(),
                by,
            })
        } else {
            JournalEvent::PasswordLinkIssued(PasswordLinkIssued {
                operator_id,
                name: name.to_owned(),
                by,
            })
        };
        journal(&db, event).await;
    }

    // When the upgrade runs and bob is disabled
    Migrator::up(&db, None).await.expect("the upgrade applies");
    let withdrawn = access::disable_operator(&db, "bob", Actor::Cli)
        .await
        .expect("disabled")
        .expect("bob was enabled");

    // Then bob's token, the token it issued and bob's link are withdrawn,
    // and the host's token and link stand
    assert_eq!(withdrawn.tokens, ["script", "chained"]);
    assert_eq!(withdrawn.links, 1);
    let live: Vec<String> = access::tokens(&db)
        .await
        .unwrap()
        .into_iter()
        .filter(|t| t.revoked_at.is_none())
        .map(|t| t.name)
        .collect();
    assert_eq!(live, ["host"]);
    let links: Vec<String> = unicity::store::entities::password_link::Entity::find()
        .all(&db)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.operator_id)
        .collect();
    assert_eq!(links, [cy.to_string()]);
}
