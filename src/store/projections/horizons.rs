//! Projection `effect_horizons`: the horizon of each key in the fast index,
//! by its effect, for the sweeper that purges the keys past theirs
//! (`store::reservations::past_horizon`). No decision reads it, so it is
//! not written before the 2xx: it follows the journal after the commit
//! with the deliveries read model (`deliveries::Fold`), and is rebuilt with
//! it. A key's first reservation inserts its effect's row; its purge
//! deletes it.

use std::collections::HashSet;

use sea_orm::sea_query::Query;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::domain::journal::JournalEvent;
use crate::store::bulk;
use crate::store::entities::{effect, effect_horizon};

/// The horizons a stretch of the journal adds and removes.
#[derive(Debug, Default)]
pub struct Horizons {
    /// By key: a purge later in the stretch takes its key's row back here.
    reserved: Vec<(String, effect_horizon::ActiveModel)>,
    /// Keys purged whose row an earlier stretch wrote.
    purged: Vec<String>,
}

impl Horizons {
    /// Folds one event (others are ignored). A retake keeps the row's
    /// horizon: only a key's first reservation has one to add.
    pub fn add(&mut self, event: &JournalEvent) {
        match event {
            JournalEvent::KeyReserved(e) if e.fencing_token == 1 => {
                let row = effect_horizon::ActiveModel {
                    effect_id: Set(e.effect_id.to_string()),
                    expires_at: Set(e.expires_at),
                };
                self.reserved.push((e.key.clone(), row));
            }
            JournalEvent::KeysPurged(e) => {
                let keys: HashSet<&str> = e.keys.iter().map(String::as_str).collect();
                self.reserved
                    .retain(|(key, _)| !keys.contains(key.as_str()));
                self.purged.extend(e.keys.iter().cloned());
            }
            _ => {}
        }
    }

    /// Inserts the stretch's horizons and deletes those of the keys it
    /// purged. A key reserved and purged within the stretch never reaches
    /// the table: in a rebuild its effect's row may not be replayed yet,
    /// and the delete finds the effect by its key.
    pub async fn write<C: ConnectionTrait>(self, conn: &C) -> Result<(), DbErr> {
        let mut reserved: Vec<_> = self.reserved.into_iter().map(|(_, row)| row).collect();
        reserved.sort_by(|a, b| super::text_of(&a.effect_id).cmp(super::text_of(&b.effect_id)));
        bulk::insert(conn, reserved).await?;
        for keys in bulk::statements(self.purged) {
            let effects = Query::select()
                .column(effect::Column::EffectId)
                .from(effect::Entity)
                .and_where(effect::Column::Key.is_in(keys))
                .to_owned();
            effect_horizon::Entity::delete_many()
                .filter(effect_horizon::Column::EffectId.in_subquery(effects))
                .exec(conn)
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use sea_orm::QuerySelect;

    use super::*;
    use crate::domain::delivery::DeliveryId;
    use crate::domain::journal::{KeyReserved, KeysPurged};
    use crate::store::{flush, journal, projector};

    fn reservation() -> KeyReserved {
        let stored = include_str!("../../domain/journal/frozen/KeyReserved.v1.json");
        serde_json::from_str(stored).expect("the frozen sample reads")
    }

    async fn horizons(db: &sea_orm::DatabaseConnection) -> Vec<(String, chrono::DateTime<Utc>)> {
        effect_horizon::Entity::find()
            .select_only()
            .columns([
                effect_horizon::Column::EffectId,
                effect_horizon::Column::ExpiresAt,
            ])
            .into_tuple()
            .all(db)
            .await
            .unwrap()
    }

    /// Journals `event` as the live path does: its claim on the key index
    /// in the transaction (`projections::apply`), the row after it.
    async fn journal(
        db: &sea_orm::DatabaseConnection,
        id: Option<DeliveryId>,
        event: JournalEvent,
    ) {
        let at = Utc::now();
        crate::store::projections::apply(db, id, &event, at)
            .await
            .unwrap();
        flush::insert_journal(db, vec![journal::row(id, &event, at)])
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_keys_horizon_follows_its_reservation_after_the_commit_and_leaves_with_its_purge() {
        let (_dir, db) = crate::store::test_database().await;
        let reserved = reservation();
        let id = Some(reserved.delivery_id);
        journal(&db, id, JournalEvent::KeyReserved(reserved.clone())).await;
        // The claim is in the key index; its horizon waits for the projector.
        assert!(horizons(&db).await.is_empty());
        projector::catch_up(&db, 1_000).await.unwrap();
        assert_eq!(
            horizons(&db).await,
            [(reserved.effect_id.to_string(), reserved.expires_at)]
        );

        // A retake has no horizon of its own to add.
        let mut again = reserved.clone();
        again.fencing_token = 2;
        let mut fold = Horizons::default();
        fold.add(&JournalEvent::KeyReserved(again));
        assert!(fold.reserved.is_empty());

        let purged = KeysPurged {
            keys: vec![reserved.key.clone()],
        };
        // Reserved and purged within one stretch: never written (a rebuild's
        // page writes its horizons before it replays the effect's row).
        let mut fold = Horizons::default();
        fold.add(&JournalEvent::KeyReserved(reserved.clone()));
        fold.add(&JournalEvent::KeysPurged(purged.clone()));
        assert!(fold.reserved.is_empty());
        assert_eq!(fold.purged, std::slice::from_ref(&reserved.key));

        journal(&db, None, JournalEvent::KeysPurged(purged)).await;
        projector::catch_up(&db, 1_000).await.unwrap();
        assert!(horizons(&db).await.is_empty());
    }
}
