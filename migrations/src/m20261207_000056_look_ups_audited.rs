//! A look-up a person asks for is an operator action (`LookupPerformed` and
//! `StatusLookupPerformed` name who asked): the audit trail's partial index
//! takes both in, its list written out as the trail's query writes it. The
//! new index is made under a name of its own before the old one goes, each
//! step safe to run again.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &[
    "CREATE INDEX IF NOT EXISTS journal_audit_trail_2 ON journal (position) \
     WHERE event_type IN ('OperatorLoggedIn', 'LoginFailed', 'OperatorLoggedOut', \
     'OperatorCreated', 'OperatorDisabled', 'OperatorRoleChanged', 'OperatorPasswordChanged', \
     'TokenIssued', 'TokenRevoked', 'SetupCompleted', 'CaseResolved', 'CaseCommented', \
     'CaseAssigned', 'RawBodyRead', 'FixtureExported', 'StrategyReset', 'LegacyEffectsImported', \
     'PasswordLinkIssued', 'LookupPerformed', 'StatusLookupPerformed')",
    "DROP INDEX IF EXISTS journal_audit_trail",
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
