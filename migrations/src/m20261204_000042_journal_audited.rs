//! The audit trail reads the journal's operator actions newest first: a
//! partial index over those rows only, so that a page costs the same however
//! many deliveries the journal holds, and a delivery's own rows add no entry
//! to it.

use sea_orm_migration::prelude::*;

use crate::sql;

#[derive(DeriveMigrationName)]
pub struct Migration;

const BOTH: &[&str] = &["CREATE INDEX journal_audited ON journal (position) \
     WHERE event_type IN ('OperatorLoggedIn', 'LoginFailed', 'OperatorLoggedOut', \
     'OperatorCreated', 'OperatorDisabled', 'OperatorRoleChanged', 'OperatorPasswordChanged', \
     'TokenIssued', 'TokenRevoked', 'SetupCompleted', 'CaseResolved', 'CaseCommented', \
     'CaseAssigned', 'RawBodyRead', 'FixtureExported', 'StrategyReset', 'LegacyEffectsImported')"];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        sql::run(manager, BOTH, BOTH).await
    }
}
