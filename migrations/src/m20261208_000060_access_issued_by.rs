//! Who issued each API token and set-password link (`issued_by`: the id of
//! the operator or token that did; null for the host's command line and the
//! first-run setup). Whoever issued one holds its secret, so when that
//! issuer is disabled, demoted or revoked, what they issued is withdrawn in
//! the same transaction. Rows issued before this migration take their
//! issuer from the journal's `TokenIssued`, `PasswordLinkIssued` and
//! `OperatorCreated` events, read through the audit trail's partial index
//! (its list written out as the index writes it).

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const AUDIT_TRAIL: &str = "event_type IN ('OperatorLoggedIn', 'LoginFailed', \
     'OperatorLoggedOut', 'OperatorCreated', 'OperatorDisabled', 'OperatorRoleChanged', \
     'OperatorPasswordChanged', 'TokenIssued', 'TokenRevoked', 'SetupCompleted', 'CaseResolved', \
     'CaseCommented', 'CaseAssigned', 'RawBodyRead', 'FixtureExported', 'StrategyReset', \
     'LegacyEffectsImported', 'PasswordLinkIssued', 'LookupPerformed', 'StatusLookupPerformed')";

/// The statements, given how the backend reads a text field of `data`
/// (`field("j", "$.by.id")`).
fn script(field: fn(&str) -> String) -> Vec<String> {
    let token_issuer = format!(
        "UPDATE api_tokens SET issued_by = (
             SELECT {by} FROM journal j
             WHERE {AUDIT_TRAIL} AND j.event_type = 'TokenIssued'
               AND {token} = api_tokens.id
             ORDER BY j.position DESC LIMIT 1)",
        by = field("by.id"),
        token = field("token_id"),
    );
    // A newer link replaces the operator's unused one: the live link is the
    // newest handed out for them, by a link or by the invitation.
    let link_issuer = format!(
        "UPDATE password_links SET issued_by = (
             SELECT {by} FROM journal j
             WHERE {AUDIT_TRAIL}
               AND j.event_type IN ('PasswordLinkIssued', 'OperatorCreated')
               AND {operator} = password_links.operator_id
             ORDER BY j.position DESC LIMIT 1)
         WHERE used_at IS NULL",
        by = field("by.id"),
        operator = field("operator_id"),
    );
    vec![
        "ALTER TABLE api_tokens ADD COLUMN issued_by TEXT NULL".to_owned(),
        "ALTER TABLE password_links ADD COLUMN issued_by TEXT NULL".to_owned(),
        "CREATE INDEX api_tokens_issued_by ON api_tokens (issued_by)".to_owned(),
        "CREATE INDEX password_links_issued_by ON password_links (issued_by)".to_owned(),
        token_issuer,
        link_issuer,
    ]
}

fn sqlite_field(path: &str) -> String {
    format!("json_extract(j.data, '$.{path}')")
}

fn postgres_field(path: &str) -> String {
    match path.split_once('.') {
        Some((outer, inner)) => format!("(j.data -> '{outer}' ->> '{inner}')"),
        None => format!("(j.data ->> '{path}')"),
    }
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sqlite = script(sqlite_field);
        let postgres = script(postgres_field);
        let sqlite: Vec<&str> = sqlite.iter().map(String::as_str).collect();
        let postgres: Vec<&str> = postgres.iter().map(String::as_str).collect();
        sql::run(manager, &sqlite, &postgres).await
    }
}
