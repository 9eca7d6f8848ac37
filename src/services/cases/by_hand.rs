//! Recording a missing effect's operation as made by hand: what its
//! look-alikes are held by, and the checks that it was not paid already
//! (`docs/operating.md`, "Operations made by hand").

use chrono::{DateTime, Duration, Utc};
use sea_orm::DbErr;

use super::settle::CaseError;
use crate::domain::cases::Refusal;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{HandMade, ProviderOperation};
use crate::services::effects::Journaled;
use crate::services::engine::SharedEngine;
use crate::store::Tx;
use crate::store::entities::case;

/// How long before the operation a webhook's effect may have been made
/// (the two clocks differ).
const SKEW_MINUTES: i64 = 5;

/// The operation of the missing-effect finding `case`, recorded as made by
/// hand: refused when the provider listed it without a resource, an amount
/// and a currency (nothing could recognise its webhook), and when an effect
/// that cites no operation and may have moved money has its fields and was
/// made since it: its late webhook may have paid it before a run paired
/// them, and recording it would hide a second payment.
pub(super) async fn recorded(
    engine: &SharedEngine,
    case: &case::Model,
) -> Result<HandMade, CaseError> {
    let (made, operation) = hand_made(engine, case).ok_or(Refusal::NothingToHoldBy)?;
    // Without a listing of the provider nothing seals its deliveries: the
    // hold would hold nothing.
    let sealed = engine
        .lookups
        .iter()
        .any(|l| l.provider == made.provider && l.listing.is_some());
    if !sealed {
        return Err(Refusal::NothingToHoldBy.into());
    }
    let since = operation
        .created_at
        .or_else(|| window_from(case))
        .unwrap_or(case.opened_at)
        - Duration::minutes(SKEW_MINUTES);
    // Effects are found by their first delivery's provider, in the read
    // model: brought up to the journal's head first.
    let fresh = crate::services::projector::before_reading(engine).await;
    if fresh.behind > 0 || fresh.stopped_at.is_some() {
        return Err(Refusal::ReadModelBehind.into());
    }
    let paid = crate::services::reconcile::paid_alike(engine, &made.provider, &operation, since)
        .await
        .map_err(|error| DbErr::Custom(error.to_string()))?;
    if paid {
        return Err(Refusal::OperationPaid.into());
    }
    Ok(made)
}

/// Whether an effect of the provider's that may have moved money cites the
/// operation made by hand, as the resolving transaction sees it (a person
/// or a look-up cited it for an effect), whatever its type: refusing too
/// much costs a reason typed, too little a second payment. A failed one stands for nothing:
/// the operation is owed.
pub(super) async fn cited(tx: &mut Tx<'_>, made: &HandMade) -> Result<bool, DbErr> {
    crate::store::ledger::cited_by_a_live_effect(
        tx.connection(),
        std::slice::from_ref(&made.operation_id),
    )
    .await
}

/// The seal of a journaled delivery, from its body, as at its reception
/// (the seal is not journaled): `None` without a key, a body, or a listing
/// of its provider that compares its effect type.
pub(crate) async fn sealed(
    engine: &SharedEngine,
    journaled: &Journaled,
) -> Result<Option<String>, DbErr> {
    let Some(key) = &journaled.key else {
        return Ok(None);
    };
    if engine
        .lookup_for(key)
        .is_none_or(|(_, l)| l.listing.is_none())
    {
        return Ok(None);
    }
    Ok(match journaled.event(engine).await? {
        Some(event) => engine.held_as(key, &event),
        None => None,
    })
}

/// Whether the delivery `delivery_id` looks like an operation a person made
/// by hand: processed as distinct, it must cite the operation it is.
pub async fn held(engine: &SharedEngine, delivery_id: DeliveryId) -> Result<bool, DbErr> {
    let journaled = Journaled::read(&engine.db, delivery_id).await?;
    match sealed(engine, &journaled).await? {
        Some(seal) => crate::store::ledger::made_by_hand(&engine.db, &seal).await,
        None => Ok(false),
    }
}

/// What the operation of a missing-effect finding is recognised by when a
/// delivery asks for it (`domain::reconcile::hand_made_seal`), with the
/// operation; `None` when the provider listed it without a resource, an
/// amount or a currency.
fn hand_made(engine: &SharedEngine, case: &case::Model) -> Option<(HandMade, ProviderOperation)> {
    let provider = case.details.get("provider")?.as_str()?;
    let operation: ProviderOperation =
        serde_json::from_value(case.details.get("operation")?.clone()).ok()?;
    let seal = crate::domain::reconcile::hand_made_seal(
        &engine.key_secret,
        provider,
        (
            operation.resource.as_deref(),
            operation.amount.as_ref(),
            operation.currency.as_ref(),
        ),
    )?;
    let made = HandMade {
        provider: provider.to_owned(),
        operation_id: operation.id.clone(),
        seal,
    };
    Some((made, operation))
}

/// The start of the window the finding was found in.
fn window_from(case: &case::Model) -> Option<DateTime<Utc>> {
    serde_json::from_value(case.details.get("window_from")?.clone()).ok()
}
