//! Who issued each API token and set-password link (`issued_by`: the id of
//! the operator or token that did; null for the host's command line and the
//! first-run setup). Whoever issued one holds its secret, so when that
//! issuer is disabled, demoted or revoked, what they issued is withdrawn in
//! the same transaction. Rows issued before this migration take their
//! issuer from the journal's `TokenIssued`, `PasswordLinkIssued` and
//! `OperatorCreated` events, read through the audit trail's partial index
//! (its list written out as the index writes it). What an issuer already
//! disabled, demoted or revoked issued is withdrawn by the first server to
//! start (`services::access::withdraw_untrusted`), journaled.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const AUDIT_TRAIL: &str = "event_type IN ('OperatorLoggedIn', 'LoginFailed', \
     'OperatorLoggedOut', 'OperatorCreated', 'OperatorDisabled', 'OperatorRoleChanged', \
     'OperatorPasswordChanged', 'TokenIssued', 'TokenRevoked', 'SetupCompleted', 'CaseResolved', \
     'CaseCommented', 'CaseAssigned', 'RawBodyRead', 'FixtureExported', 'StrategyReset', \
     'LegacyEffectsImported', 'PasswordLinkIssued', 'LookupPerformed', 'StatusLookupPerformed')";

/// The statements, given how the backend reads a text field of a journal
/// row's `data` (`field("j", "by.id")`). Each update reads the audit trail
/// once, joined, rather than once per row updated.
fn script(field: fn(&str, &str) -> String) -> Vec<String> {
    let token_issuer = format!(
        "UPDATE api_tokens SET issued_by = issued.by_id
         FROM (SELECT {token} AS token_id, {by} AS by_id FROM journal j
               WHERE {AUDIT_TRAIL} AND j.event_type = 'TokenIssued') AS issued
         WHERE issued.token_id = api_tokens.id AND api_tokens.revoked_at IS NULL",
        by = field("j", "by.id"),
        token = field("j", "token_id"),
    );
    // A newer link replaces the operator's unused one: the live link is the
    // newest handed out for them, by a link or by the invitation.
    let link_issuer = format!(
        "UPDATE password_links SET issued_by = latest.by_id
         FROM (SELECT {operator} AS operator_id, {by} AS by_id FROM journal j
               WHERE j.position IN (
                   SELECT MAX(k.position) FROM journal k
                   WHERE {AUDIT_TRAIL}
                     AND k.event_type IN ('PasswordLinkIssued', 'OperatorCreated')
                   GROUP BY {operator_k})) AS latest
         WHERE latest.operator_id = password_links.operator_id
           AND password_links.used_at IS NULL",
        by = field("j", "by.id"),
        operator = field("j", "operator_id"),
        operator_k = field("k", "operator_id"),
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

fn sqlite_field(row: &str, path: &str) -> String {
    format!("json_extract({row}.data, '$.{path}')")
}

fn postgres_field(row: &str, path: &str) -> String {
    match path.split_once('.') {
        Some((outer, inner)) => format!("({row}.data -> '{outer}' ->> '{inner}')"),
        None => format!("({row}.data ->> '{path}')"),
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
