//! Projections `effects` (one row per taken key: the fast key index and its
//! atomic claims while the key is within its horizon, the ledger beyond it)
//! and `effect_deliveries` (who else asked for each
//! effect: the delivery that created it is the ledger row's
//! `first_delivery_id`, not a link row of its own).

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait,
    IntoActiveModel, QueryFilter,
};

use crate::domain::cases::Resolution;
use crate::domain::journal::{
    CaseResolved, EffectPaired, EffectSettled, EvidencePurged, KeyReserved, KeysPurged,
    ReservationExpired, SettlementOutcome,
};
use crate::domain::reservation::ReservationState;
use crate::store::deferred::Deferred;
use crate::store::entities::{effect, effect_delivery};

pub(super) async fn reserved<C: ConnectionTrait>(
    conn: &C,
    e: &KeyReserved,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let mut rows = Deferred::default();
    let claimed = reserve(conn, &mut rows, e, None, at).await?;
    rows.flush(conn).await?;
    Ok(claimed)
}

/// Claims the key of `e`: an insert of its one row that does nothing if the
/// key is taken, or for a new attempt a compare-and-set on the fencing token.
/// Returns the rows claimed (1 or 0). The row is written at once, since the
/// next delivery's decision reads it; the delivery's link to it is deferred.
///
/// `applied` is the settlement of an effect applied in this same transaction
/// (a `record` sink): the row is written settled, as replaying `e` then
/// `applied` would leave it, in one insert instead of an insert and an update.
pub async fn reserve<C: ConnectionTrait>(
    conn: &C,
    rows: &mut Deferred,
    e: &KeyReserved,
    applied: Option<&EffectSettled>,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let folded =
        applied.filter(|s| e.fencing_token == 1 && s.outcome == SettlementOutcome::Applied);
    let claimed = if e.fencing_token == 1 {
        let row = effect::Model {
            effect_id: e.effect_id.to_string(),
            key: e.key.clone(),
            effect_type: e.effect_type.clone(),
            criticality: e.criticality.as_str().to_owned(),
            state: folded
                .map_or(ReservationState::Reserved, |s| {
                    s.outcome.reservation_state()
                })
                .as_str()
                .to_owned(),
            fencing_token: Some(1),
            lease_until: folded.is_none().then_some(e.lease_until),
            expires_at: Some(e.expires_at),
            key_purged: false,
            sink: e.sink.clone(),
            result: folded.and_then(|s| s.result.clone()),
            downstream_ref: folded.and_then(|s| s.authoritative_ref.clone()),
            provider_ref: e.provider_ref.clone(),
            first_delivery_id: e.delivery_id.to_string(),
            discriminants: serde_json::to_value(&e.discriminants).unwrap_or_default(),
            created_at: at,
            settled_at: folded.map(|_| at),
            evidence_purged_at: None,
        };
        match current(conn, rows, &e.key).await? {
            Some(Some(_)) => 0,
            Some(None) => {
                rows.effect(row);
                1
            }
            None => effect::Entity::insert(row.into_active_model().reset_all())
                .on_conflict_do_nothing_on([effect::Column::Key])
                .exec_without_returning(conn)
                .await
                .map(super::rows)?,
        }
    } else {
        match current(conn, rows, &e.key).await? {
            Some(found) => {
                let retakable = found.filter(|r| {
                    r.state == ReservationState::Failed.as_str()
                        && r.fencing_token == Some(e.fencing_token - 1)
                });
                match retakable {
                    Some(mut row) => {
                        row.state = ReservationState::Reserved.as_str().to_owned();
                        row.fencing_token = Some(e.fencing_token);
                        row.lease_until = Some(e.lease_until);
                        if let Some(index) = rows.index() {
                            index.set_row(row);
                        }
                        rows.retake(e.clone(), at);
                        1
                    }
                    None => 0,
                }
            }
            None => retake(conn, e, at).await?,
        }
    };
    if claimed != 1 {
        return Ok(claimed);
    }
    if let (Some(settlement), None) = (applied, folded) {
        // Not foldable: the row exists already, settle it in place.
        if rows.index().is_some() {
            rows.settlement(settlement.clone(), at);
        } else {
            rows.flush(conn).await?;
            super::settle(conn, settlement, at).await?;
        }
    }
    Ok(claimed)
}

/// With an index: the key's row as the index knows it (read now if the
/// index had not loaded the key). Without one: `None`, ask the database.
async fn current<C: ConnectionTrait>(
    conn: &C,
    rows: &mut Deferred,
    key: &str,
) -> Result<Option<Option<effect::Model>>, DbErr> {
    let Some(index) = rows.index() else {
        return Ok(None);
    };
    if let Some(known) = index.row(key) {
        return Ok(Some(known.cloned()));
    }
    let found = effect::Entity::find()
        .filter(effect::Column::Key.eq(key))
        .one(conn)
        .await?;
    match &found {
        Some(row) => index.set_row(row.clone()),
        None => index.set_absent(key),
    }
    Ok(Some(found))
}

/// A retry after a definitive failure without effect takes the key back only
/// if nobody else did since (compare-and-set on the token); its effect is
/// pending again. Returns the keys taken back (1 or 0).
pub(crate) async fn retake<C: ConnectionTrait>(
    conn: &C,
    e: &KeyReserved,
    _at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(effect::Entity::update_many()
        .col_expr(
            effect::Column::State,
            Expr::value(ReservationState::Reserved.as_str()),
        )
        .col_expr(effect::Column::FencingToken, Expr::value(e.fencing_token))
        .col_expr(effect::Column::LeaseUntil, Expr::value(Some(e.lease_until)))
        .filter(effect::Column::Key.eq(&e.key))
        .filter(effect::Column::FencingToken.eq(e.fencing_token - 1))
        .filter(effect::Column::State.eq(ReservationState::Failed.as_str()))
        .exec(conn)
        .await?
        .rows_affected)
}

pub(crate) async fn settled<C: ConnectionTrait>(
    conn: &C,
    e: &EffectSettled,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(effect::Entity::update_many()
        .col_expr(effect::Column::State, Expr::value(e.outcome.state()))
        .col_expr(
            effect::Column::LeaseUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(effect::Column::Result, Expr::value(e.result.clone()))
        .col_expr(
            effect::Column::DownstreamRef,
            Expr::value(e.authoritative_ref.clone()),
        )
        .col_expr(effect::Column::SettledAt, Expr::value(at))
        .filter(effect::Column::Key.eq(&e.key))
        .filter(effect::Column::FencingToken.eq(e.fencing_token))
        .filter(effect::Column::State.is_in([
            ReservationState::Reserved.as_str(),
            ReservationState::Unknown.as_str(),
        ]))
        .exec(conn)
        .await?
        .rows_affected)
}

pub(super) async fn expired<C: ConnectionTrait>(
    conn: &C,
    e: &ReservationExpired,
    _at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(effect::Entity::update_many()
        .col_expr(
            effect::Column::State,
            Expr::value(ReservationState::Unknown.as_str()),
        )
        .filter(effect::Column::Key.eq(&e.key))
        .filter(effect::Column::FencingToken.eq(e.fencing_token))
        .filter(effect::Column::State.eq(ReservationState::Reserved.as_str()))
        .exec(conn)
        .await?
        .rows_affected)
}

/// A delivery whose case was resolved as a duplicate of an effect is linked
/// to that effect, from the resolution itself: a rebuild replays the link
/// with the case.
pub(super) async fn resolved_as_duplicate<C: ConnectionTrait>(
    conn: &C,
    delivery_id: &str,
    e: &CaseResolved,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let (Resolution::ConfirmDuplicate, Some(effect_id)) = (e.resolution, e.effect_id) else {
        return Ok(());
    };
    if delivery_id.is_empty() {
        return Ok(());
    }
    let link = effect_delivery::ActiveModel {
        effect_id: Set(effect_id.to_string()),
        delivery_id: Set(delivery_id.to_owned()),
        linked_at: Set(at),
    };
    effect_delivery::Entity::insert(link)
        .on_conflict_do_nothing()
        .exec_without_returning(conn)
        .await?;
    Ok(())
}

/// Keys past their horizon leave the fast index: their row stays as the
/// ledger's, flagged, with its claim and horizon cleared.
pub(super) async fn keys_purged<C: ConnectionTrait>(
    conn: &C,
    e: &KeysPurged,
) -> Result<u64, DbErr> {
    Ok(effect::Entity::update_many()
        .col_expr(effect::Column::KeyPurged, Expr::value(true))
        .col_expr(
            effect::Column::FencingToken,
            Expr::value(Option::<i64>::None),
        )
        .col_expr(
            effect::Column::LeaseUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .col_expr(
            effect::Column::ExpiresAt,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
        .filter(effect::Column::Key.is_in(e.keys.iter().map(String::as_str)))
        .filter(effect::Column::KeyPurged.eq(false))
        .exec(conn)
        .await?
        .rows_affected)
}

pub(super) async fn evidence_purged<C: ConnectionTrait>(
    conn: &C,
    e: &EvidencePurged,
    at: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(effect::Entity::update_many()
        .col_expr(
            effect::Column::Result,
            Expr::value(Option::<serde_json::Value>::None),
        )
        .col_expr(effect::Column::EvidencePurgedAt, Expr::value(at))
        .filter(effect::Column::EffectId.eq(e.effect_id.to_string()))
        .exec(conn)
        .await?
        .rows_affected)
}

/// A reconciliation's pairing: the effect stands for the operation from now
/// on (its provider reference), while it cites nothing and no effect of its
/// type cites the operation (the unique index's rule). Returns the rows
/// changed: 0 when either holds already.
pub(super) async fn paired<C: ConnectionTrait>(conn: &C, e: &EffectPaired) -> Result<u64, DbErr> {
    let Some(row) = effect::Entity::find_by_id(e.effect_id.to_string())
        .one(conn)
        .await?
    else {
        return Ok(0);
    };
    if row.key != e.key || row.provider_ref.is_some() {
        return Ok(0);
    }
    let cited = effect::Entity::find()
        .filter(effect::Column::EffectType.eq(row.effect_type.as_str()))
        .filter(effect::Column::ProviderRef.eq(e.operation.as_str()))
        .one(conn)
        .await?;
    if cited.is_some() {
        return Ok(0);
    }
    Ok(effect::Entity::update_many()
        .col_expr(
            effect::Column::ProviderRef,
            Expr::value(Some(e.operation.clone())),
        )
        .filter(effect::Column::EffectId.eq(e.effect_id.to_string()))
        .filter(effect::Column::ProviderRef.is_null())
        .exec(conn)
        .await?
        .rows_affected)
}
