//! Projection `deliveries` (one row per delivery, latest decision) and
//! `transport_links` (first reception of each transport identity).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::cases::{self, NewCase};
use super::effects::link_effect;
use super::rows;
use crate::domain::decision::Action;
use crate::domain::journal::{DecisionMade, KeyDerived, Origin};
use crate::store::entities::{delivery, transport_link};

pub(super) async fn insert<C: ConnectionTrait>(
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

pub(super) async fn key_derived<C: ConnectionTrait>(
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

pub(super) async fn decision_made<C: ConnectionTrait>(
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
        cases::open(
            conn,
            NewCase {
                case_id,
                delivery_id: id,
                business_key: e.business_key.as_deref(),
                action: d.action.as_str(),
                reason: d.reason.as_str(),
                lookup_first: d.lookup_first,
                details,
            },
            at,
        )
        .await?;
    }
    if let (Action::Ignore, Some(effect_id)) = (d.action, d.effect_id) {
        link_effect(conn, &effect_id.to_string(), id, at).await?;
    }
    Ok(changed)
}
