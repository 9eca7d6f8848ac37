//! Projections: how each journal event changes the derived tables.
//!
//! `apply` is the single place that writes projections. The live path calls it
//! in the transaction that appends the event; `rebuild` replays the journal
//! through it. Where an event is an atomic claim (a reservation, a settlement,
//! an expiry), `apply` returns the rows it changed and the caller appends the
//! event only if the claim succeeded, so replaying the journal reaches the same
//! state as the live run.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::entities::{case, delivery, effect, effect_delivery, reservation, transport_link};
use crate::domain::decision::Action;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{
    DecisionMade, JournalEvent, KeyDerived, KeyReserved, Origin, SettlementOutcome,
};

/// Stable names of the projection tables, in the order `rebuild` clears them.
pub const TABLES: [&str; 6] = [
    "deliveries",
    "transport_links",
    "reservations",
    "effects",
    "effect_deliveries",
    "cases",
];

/// Applies one event; returns the rows its main statement changed.
pub async fn apply<C: ConnectionTrait>(
    conn: &C,
    delivery_id: Option<DeliveryId>,
    event: &JournalEvent,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let id = delivery_id.map(|d| d.to_string()).unwrap_or_default();
    match event {
        JournalEvent::DeliveryReceived(e) => {
            insert_delivery(conn, &id, &e.origin, e.received_at, "received").await
        }
        JournalEvent::DeliveryRejected(e) => {
            insert_delivery(conn, &id, &e.origin, e.received_at, "rejected").await
        }
        JournalEvent::KeyDerived(e) => key_derived(conn, &id, e, at).await,
        JournalEvent::DecisionMade(e) => decision_made(conn, &id, e, at).await,
        JournalEvent::KeyReserved(e) => key_reserved(conn, e, at).await,
        JournalEvent::EffectApplied(e)
        | JournalEvent::EffectFailed(e)
        | JournalEvent::EffectOutcomeUnknown(e) => {
            let rows = reservation::Entity::update_many()
                .col_expr(reservation::Column::State, Expr::value(e.outcome.state()))
                .col_expr(
                    reservation::Column::LeaseUntil,
                    Expr::value(Option::<DateTime<Utc>>::None),
                )
                .col_expr(reservation::Column::UpdatedAt, Expr::value(at))
                .filter(reservation::Column::Key.eq(&e.key))
                .filter(reservation::Column::FencingToken.eq(e.fencing_token))
                .filter(reservation::Column::State.is_in(["reserved", "unknown"]))
                .exec(conn)
                .await?
                .rows_affected;
            if rows == 1 {
                let status = match e.outcome {
                    SettlementOutcome::Applied => "applied",
                    SettlementOutcome::Failed => "failed",
                    SettlementOutcome::Unknown => "unknown",
                };
                effect::Entity::update_many()
                    .col_expr(effect::Column::Status, Expr::value(status))
                    .col_expr(effect::Column::Result, Expr::value(e.result.clone()))
                    .col_expr(
                        effect::Column::AuthoritativeRef,
                        Expr::value(e.authoritative_ref.clone()),
                    )
                    .col_expr(effect::Column::SettledAt, Expr::value(at))
                    .filter(effect::Column::EffectId.eq(e.effect_id.to_string()))
                    .exec(conn)
                    .await?;
                if let Some(case_id) = e.case_id {
                    open_case(
                        conn,
                        case_id,
                        &e.delivery_id.to_string(),
                        Some(&e.key),
                        Action::Reconcile.as_str(),
                        "outcome_unknown",
                        true,
                        serde_json::json!({ "effect_id": e.effect_id, "error": e.error }),
                        at,
                    )
                    .await?;
                }
            }
            Ok(rows)
        }
        JournalEvent::ReservationExpired(e) => {
            let rows = reservation::Entity::update_many()
                .col_expr(reservation::Column::State, Expr::value("unknown"))
                .col_expr(reservation::Column::UpdatedAt, Expr::value(at))
                .filter(reservation::Column::Key.eq(&e.key))
                .filter(reservation::Column::FencingToken.eq(e.fencing_token))
                .filter(reservation::Column::State.eq("reserved"))
                .exec(conn)
                .await?
                .rows_affected;
            if rows == 1 {
                effect::Entity::update_many()
                    .col_expr(effect::Column::Status, Expr::value("unknown"))
                    .filter(effect::Column::EffectId.eq(e.effect_id.to_string()))
                    .exec(conn)
                    .await?;
                open_case(
                    conn,
                    e.case_id,
                    &e.first_delivery_id.to_string(),
                    Some(&e.key),
                    Action::Reconcile.as_str(),
                    "outcome_unknown",
                    true,
                    serde_json::json!({ "effect_id": e.effect_id, "fencing_token": e.fencing_token }),
                    at,
                )
                .await?;
            }
            Ok(rows)
        }
        JournalEvent::KeysPurged(e) => Ok(reservation::Entity::delete_many()
            .filter(reservation::Column::Key.is_in(e.keys.iter().map(String::as_str)))
            .exec(conn)
            .await?
            .rows_affected),
        JournalEvent::EvidencePurged(e) => Ok(effect::Entity::update_many()
            .col_expr(
                effect::Column::Result,
                Expr::value(Option::<serde_json::Value>::None),
            )
            .col_expr(effect::Column::EvidencePurgedAt, Expr::value(at))
            .filter(effect::Column::EffectId.eq(e.effect_id.to_string()))
            .exec(conn)
            .await?
            .rows_affected),
        // Recorded in its own table by the strategy registry, not a projection.
        JournalEvent::StrategyVersionRecorded(_) => Ok(0),
    }
}

async fn insert_delivery<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    origin: &Origin,
    received_at: DateTime<Utc>,
    status: &str,
) -> Result<u64, DbErr> {
    let row = delivery::ActiveModel {
        delivery_id: Set(id.to_owned()),
        source: Set(origin.source.clone()),
        tenant: Set(origin.tenant.clone()),
        provider: Set(origin.provider.clone()),
        environment: Set(origin.environment.clone()),
        received_at: Set(received_at),
        status: Set(status.to_owned()),
        event_type: Set(None),
        provider_event_id: Set(None),
        transport_key: Set(None),
        business_key: Set(None),
        strategy: Set(None),
        strength: Set(None),
        decision: Set(None),
        reason: Set(None),
        layer: Set(None),
        reference_delivery_id: Set(None),
        effect_id: Set(None),
        case_id: Set(None),
        decided_at: Set(None),
    };
    delivery::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(rows)
}

async fn key_derived<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    e: &KeyDerived,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let business = e.business.as_ref();
    delivery::Entity::update_many()
        .col_expr(
            delivery::Column::EventType,
            Expr::value(e.event_type.clone()),
        )
        .col_expr(
            delivery::Column::ProviderEventId,
            Expr::value(e.provider_event_id.clone()),
        )
        .col_expr(
            delivery::Column::TransportKey,
            Expr::value(e.transport_key.clone()),
        )
        .col_expr(
            delivery::Column::BusinessKey,
            Expr::value(business.map(|b| b.key.clone())),
        )
        .col_expr(
            delivery::Column::Strategy,
            Expr::value(business.map(|b| b.strategy.clone())),
        )
        .col_expr(
            delivery::Column::Strength,
            Expr::value(business.map(|b| b.strength.as_str().to_owned())),
        )
        .filter(delivery::Column::DeliveryId.eq(id))
        .exec(conn)
        .await?;
    // The first reception of a transport identity; later ones link to it.
    let link = transport_link::ActiveModel {
        transport_key: Set(e.transport_key.clone()),
        first_delivery_id: Set(id.to_owned()),
        body_fingerprint: Set(e.body_fingerprint.clone().unwrap_or_default()),
        business_key: Set(business.map(|b| b.key.clone())),
        created_at: Set(at),
    };
    transport_link::Entity::insert(link)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await
        .map(rows)
}

async fn decision_made<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    e: &DecisionMade,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let d = &e.decision;
    let changed = delivery::Entity::update_many()
        .col_expr(delivery::Column::Decision, Expr::value(d.action.as_str()))
        .col_expr(delivery::Column::Reason, Expr::value(d.reason.as_str()))
        .col_expr(delivery::Column::Layer, Expr::value(e.layer.as_str()))
        .col_expr(
            delivery::Column::ReferenceDeliveryId,
            Expr::value(d.reference_delivery.map(|r| r.to_string())),
        )
        .col_expr(
            delivery::Column::EffectId,
            Expr::value(d.effect_id.map(|r| r.to_string())),
        )
        .col_expr(
            delivery::Column::CaseId,
            Expr::value(e.case_id.map(|r| r.to_string())),
        )
        .col_expr(delivery::Column::DecidedAt, Expr::value(at))
        .filter(delivery::Column::DeliveryId.eq(id))
        .exec(conn)
        .await?
        .rows_affected;
    if let Some(case_id) = e.case_id {
        let details = serde_json::json!({
            "summary": e.summary,
            "differences": d.differences,
            "missing_fields": d.missing_fields,
            "reference_delivery_id": d.reference_delivery,
            "effect_id": d.effect_id,
        });
        open_case(
            conn,
            case_id,
            id,
            e.business_key.as_deref(),
            d.action.as_str(),
            d.reason.as_str(),
            d.lookup_first,
            details,
            at,
        )
        .await?;
    }
    if let (Action::Ignore, Some(effect_id)) = (d.action, d.effect_id) {
        link_effect(conn, &effect_id.to_string(), id, at).await?;
    }
    Ok(changed)
}

async fn key_reserved<C: ConnectionTrait>(
    conn: &C,
    e: &KeyReserved,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let effect_id = e.effect_id.to_string();
    let delivery_id = e.delivery_id.to_string();
    let discriminants = serde_json::to_value(&e.discriminants).unwrap_or_default();
    let claimed = if e.fencing_token == 1 {
        let row = reservation::ActiveModel {
            key: Set(e.key.clone()),
            strategy: Set(e.strategy.clone()),
            strength: Set(e.strength.as_str().to_owned()),
            effect_type: Set(e.effect_type.clone()),
            criticality: Set(e.criticality.as_str().to_owned()),
            state: Set("reserved".to_owned()),
            fencing_token: Set(1),
            lease_until: Set(Some(e.lease_until)),
            first_delivery_id: Set(delivery_id.clone()),
            effect_id: Set(effect_id.clone()),
            discriminants: Set(discriminants.clone()),
            expires_at: Set(e.expires_at),
            updated_at: Set(at),
        };
        reservation::Entity::insert(row)
            .on_conflict_do_nothing_on([reservation::Column::Key])
            .exec_without_returning(conn)
            .await
            .map(rows)?
    } else {
        // A retry after a definitive failure without effect: take the key back
        // only if nobody else did since (compare-and-set on the token).
        reservation::Entity::update_many()
            .col_expr(reservation::Column::State, Expr::value("reserved"))
            .col_expr(
                reservation::Column::FencingToken,
                Expr::value(e.fencing_token),
            )
            .col_expr(
                reservation::Column::LeaseUntil,
                Expr::value(Some(e.lease_until)),
            )
            .col_expr(reservation::Column::UpdatedAt, Expr::value(at))
            .filter(reservation::Column::Key.eq(&e.key))
            .filter(reservation::Column::FencingToken.eq(e.fencing_token - 1))
            .filter(reservation::Column::State.eq("failed"))
            .exec(conn)
            .await?
            .rows_affected
    };
    if claimed != 1 {
        return Ok(claimed);
    }
    let ledger = effect::ActiveModel {
        effect_id: Set(effect_id.clone()),
        key: Set(e.key.clone()),
        effect_type: Set(e.effect_type.clone()),
        criticality: Set(e.criticality.as_str().to_owned()),
        status: Set("pending".to_owned()),
        sink: Set(e.sink.clone()),
        result: Set(None),
        authoritative_ref: Set(None),
        first_delivery_id: Set(delivery_id.clone()),
        discriminants: Set(discriminants),
        created_at: Set(at),
        settled_at: Set(None),
        evidence_purged_at: Set(None),
    };
    effect::Entity::insert(ledger)
        .on_conflict_do_nothing_on([effect::Column::EffectId])
        .exec_without_returning(conn)
        .await?;
    effect::Entity::update_many()
        .col_expr(effect::Column::Status, Expr::value("pending"))
        .filter(effect::Column::EffectId.eq(&effect_id))
        .exec(conn)
        .await?;
    link_effect(conn, &effect_id, &delivery_id, at).await?;
    Ok(claimed)
}

async fn link_effect<C: ConnectionTrait>(
    conn: &C,
    effect_id: &str,
    delivery_id: &str,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let link = effect_delivery::ActiveModel {
        effect_id: Set(effect_id.to_owned()),
        delivery_id: Set(delivery_id.to_owned()),
        linked_at: Set(at),
    };
    effect_delivery::Entity::insert(link)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await?;
    Ok(())
}

#[expect(
    clippy::too_many_arguments,
    reason = "one column each; a struct would only rename them"
)]
async fn open_case<C: ConnectionTrait>(
    conn: &C,
    case_id: uuid::Uuid,
    delivery_id: &str,
    business_key: Option<&str>,
    action: &str,
    reason: &str,
    lookup_first: bool,
    details: serde_json::Value,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let row = case::ActiveModel {
        case_id: Set(case_id.to_string()),
        delivery_id: Set(delivery_id.to_owned()),
        business_key: Set(business_key.map(str::to_owned)),
        action: Set(action.to_owned()),
        reason: Set(reason.to_owned()),
        status: Set("open".to_owned()),
        lookup_first: Set(lookup_first),
        details: Set(details),
        opened_at: Set(at),
        resolved_at: Set(None),
    };
    case::Entity::insert(row)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await?;
    Ok(())
}

/// Rows written by an insert that may have done nothing.
fn rows(result: sea_orm::TryInsertResult<u64>) -> u64 {
    match result {
        sea_orm::TryInsertResult::Inserted(n) => n,
        _ => 0,
    }
}
