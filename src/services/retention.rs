//! Retention: removing stored effect results once they are old enough, while
//! the effects ledger keeps the effect's identity. A late replay of a purged
//! effect is then sent to reconciliation (`evidence_purged`), never re-applied.

use chrono::{DateTime, Utc};
use sea_orm::{DatabaseConnection, DbErr};

use crate::domain::journal::{EvidencePurged, JournalEvent};
use crate::store::{ledger, transaction};

/// Effects purged per transaction: on SQLite a transaction holds the one
/// write lock, and deliveries wait on it (503 after the busy timeout).
const PURGED_PER_TRANSACTION: usize = 500;

/// Purges the stored result of every effect settled before `before`, a
/// bounded number per transaction; stopped halfway, running it again
/// purges the rest.
pub async fn purge_evidence(
    db: &DatabaseConnection,
    before: DateTime<Utc>,
) -> Result<usize, DbErr> {
    let ids = ledger::evidence_settled_before(db, before).await?;
    let now = Utc::now();
    let mut purged = 0;
    for chunk in ids.chunks(PURGED_PER_TRANSACTION) {
        purged += transaction(db, async |tx| {
            let mut purged = 0;
            for (id, effect_id) in chunk.iter().filter_map(|id| Some((id, id.parse().ok()?))) {
                if !ledger::still_purgeable(tx.connection(), id, before).await? {
                    continue;
                }
                let event = JournalEvent::EvidencePurged(EvidencePurged { effect_id });
                tx.record(None, event, now).await?;
                purged += 1;
            }
            Ok::<_, DbErr>(purged)
        })
        .await?;
    }
    Ok(purged)
}
