//! Reads for periodic reconciliation: the effects of a provider in a window,
//! and the runs' figures (`reconciliation_runs`).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, ExprTrait};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
};

use super::entities::{delivery, effect, reconciliation_run};
use crate::domain::reservation::ReservationState;

/// Effect ids are UUIDv7, made when the effect is created (within the same
/// write job as `created_at`): the primary key's range of a time window
/// finds them without an index on `created_at`, one index entry per effect
/// fewer on the write path. The range is this much wider than the window on
/// each side; `created_at` decides.
const ID_CLOCK_MARGIN: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// The smallest UUIDv7, as stored (lower-case, hyphenated), of the
/// millisecond `at`: ids made at or after `at` sort at or after it.
fn v7_floor(at: DateTime<Utc>) -> String {
    let ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    uuid::Uuid::from_bytes(bytes).hyphenated().to_string()
}

/// Effects created in `[from, to)` whose first delivery came from `provider`
/// (and `source`, when given): applied ones, and those still pending or of
/// unknown outcome (see `domain::reconcile`).
pub async fn effects_in_window<C: ConnectionTrait>(
    conn: &C,
    provider: &str,
    source: Option<&str>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<effect::Model>, DbErr> {
    let mut deliveries =
        super::delivery_named_by((effect::Entity, effect::Column::FirstDeliveryId));
    deliveries.and_where(Expr::col((delivery::Entity, delivery::Column::Provider)).eq(provider));
    if let Some(source) = source {
        deliveries.and_where(Expr::col((delivery::Entity, delivery::Column::Source)).eq(source));
    }
    effect::Entity::find()
        .filter(effect::Column::EffectId.gte(v7_floor(from - ID_CLOCK_MARGIN)))
        .filter(effect::Column::EffectId.lt(v7_floor(to + ID_CLOCK_MARGIN)))
        .filter(effect::Column::CreatedAt.gte(from))
        .filter(effect::Column::CreatedAt.lt(to))
        .filter(effect::Column::State.is_in([
            ReservationState::Applied.as_str(),
            ReservationState::Reserved.as_str(),
            ReservationState::Unknown.as_str(),
        ]))
        .filter(Expr::exists(deliveries))
        .order_by_asc(effect::Column::CreatedAt)
        .all(conn)
        .await
}

/// The latest runs, newest first.
pub async fn latest_runs<C: ConnectionTrait>(
    conn: &C,
    limit: u64,
) -> Result<Vec<reconciliation_run::Model>, DbErr> {
    reconciliation_run::Entity::find()
        .order_by_desc(reconciliation_run::Column::RanAt)
        .limit(limit)
        .all(conn)
        .await
}

/// The latest decision of each delivery to `source` received at or after
/// `at`, counted per decision (a simulation's report: a deferred delivery
/// counts as what it was re-decided to).
pub async fn decisions_since<C: ConnectionTrait>(
    conn: &C,
    source: &str,
    at: DateTime<Utc>,
) -> Result<Vec<(Option<String>, i64)>, DbErr> {
    delivery::Entity::find()
        .select_only()
        .column(delivery::Column::Decision)
        .column_as(delivery::Column::DeliveryId.count(), "n")
        .filter(delivery::Column::Source.eq(source))
        .filter(delivery::Column::ReceivedAt.gte(at))
        .group_by(delivery::Column::Decision)
        .into_tuple()
        .all(conn)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_window_bounds_the_ids_made_in_it() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T10:00:00.123Z")
            .unwrap()
            .with_timezone(&Utc);
        let floor = v7_floor(at);
        assert_eq!(floor, "01a2310c-017b-0000-0000-000000000000");
        let ms = u64::try_from(at.timestamp_millis()).unwrap();
        let made = |ms: u64| {
            let ts = uuid::Timestamp::from_unix(
                uuid::NoContext,
                ms / 1000,
                (ms % 1000) as u32 * 1_000_000,
            );
            uuid::Uuid::new_v7(ts).hyphenated().to_string()
        };
        assert!(made(ms) >= floor);
        assert!(made(ms + 1) >= floor);
        assert!(made(ms - 1) < floor);
        // Across a hex digit's carry the text order is still the time order.
        assert!(made(0x0fff_ffff_ffff) < made(0x1000_0000_0000));
    }
}
