//! Retention: removing stored effect results once they are old enough, while
//! the effects ledger keeps the effect's identity. A late replay of a purged
//! effect is then sent to reconciliation (`evidence_purged`), never re-applied.

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr};

use crate::domain::journal::{EvidencePurged, JournalEvent};
use crate::store::{ledger, transaction};

/// Purges the stored result of every effect settled before `before`.
pub async fn purge_evidence(
    db: &DatabaseConnection,
    before: DateTime<Utc>,
) -> Result<usize, DbErr> {
    let ids = ledger::evidence_settled_before(db, before).await?;
    let now = Utc::now();
    transaction(db, async |tx| {
        let mut purged = 0;
        for id in ids {
            let Ok(effect_id) = id.parse() else { continue };
            tx.record(
                None,
                JournalEvent::EvidencePurged(EvidencePurged { effect_id }),
                now,
            )
            .await?;
            purged += 1;
        }
        Ok(purged)
    })
    .await
}
