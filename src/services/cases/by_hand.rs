//! Recording a missing effect's operation as made by hand: what its
//! look-alikes are held by, and the checks that it was not paid already
//! (`docs/operating.md`, "Operations made by hand").

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use sea_orm::{ConnectionTrait, DbErr};

use super::settle::CaseError;
use crate::domain::cases::Refusal;
use crate::domain::delivery::DeliveryId;
use crate::domain::journal::{HandMade, JournalEvent, KeySummary, ProviderOperation};
use crate::services::effects::Journaled;
use crate::services::engine::{Engine, SharedEngine};
use crate::services::projector;
use crate::store::Tx;
use crate::store::entities::case;

/// How long before the operation a webhook's effect may have been made
/// (the two clocks differ).
const SKEW_MINUTES: i64 = 5;

/// At most this many journal rows written after `recorded`'s checks are
/// read again in the resolving transaction, a page at a time; more (ten
/// seconds of a busy server's deliveries) are not read inside the writer.
const MOST_SINCE: i64 = 20_000;
const PAGE: u64 = 1_000;

/// The errors a resolving transaction that records an operation as made by
/// hand rolls back with (`Recorded::still_unpaid`).
pub(super) const PAID: &str = "an effect that may have moved money stands for the operation";
pub(super) const UNCHECKED: &str = "more was journaled after the checks than is read again";
pub(super) const ARRIVED: &str = "a delivery like the operation made by hand came after its checks";

/// An operation a person records as made by hand, checked before the
/// resolving transaction (`recorded`), to check again in it.
#[derive(Clone)]
pub(super) struct Recorded {
    pub made: HandMade,
    /// The journal position the checks read the ledger up to.
    checked: i64,
}

impl Recorded {
    /// In the resolving transaction: refused (`PAID`) while an effect that
    /// may have moved money cites the operation, whatever its type (a
    /// person or a look-up cited it): refusing too much costs a reason
    /// typed, too little a second payment; a failed one stands for
    /// nothing, the operation is owed. Refused (`ARRIVED`) when a delivery
    /// that looks like it was journaled after the checks, and
    /// (`UNCHECKED`) when more was than is read again.
    pub(super) async fn still_unpaid(&self, tx: &mut Tx<'_>, engine: &Engine) -> Result<(), DbErr> {
        let cited = crate::store::ledger::cited_by_a_live_effect(
            tx.connection(),
            std::slice::from_ref(&self.made.operation_id),
        )
        .await?;
        if cited {
            return Err(DbErr::Custom(PAID.to_owned()));
        }
        match look_alike_since(tx, engine, &self.made, self.checked).await? {
            Since::Clear => {}
            Since::Arrived => return Err(DbErr::Custom(ARRIVED.to_owned())),
            Since::TooMuch => return Err(DbErr::Custom(UNCHECKED.to_owned())),
        }
        Ok(())
    }
}

/// The operation of the missing-effect finding `case`, recorded as made by
/// hand: refused when the provider listed it without a resource, an amount
/// and a currency (nothing could recognise its webhook), and when an effect
/// that cites no operation and may have moved money has its fields and was
/// made since it: its late webhook may have paid it before a run paired
/// them, and recording it would hide a second payment. With the journal
/// position the checks read up to: what was journaled after it is read
/// again in the resolving transaction (`since_checked`).
pub(super) async fn recorded(
    engine: &SharedEngine,
    case: &case::Model,
) -> Result<Recorded, CaseError> {
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
    // model: brought up to the journal's head first. Every row up to this
    // head is then in it (on PostgreSQL the projector's fence waits for
    // appends under way below it).
    // A read model whose position cannot be read is not trusted either:
    // the error refuses the record (a page would read on regardless).
    let checked = crate::store::projector::head(&engine.db).await?;
    let fresh = projector::caught_up(engine, projector::READ_WAIT).await?;
    if fresh.behind > 0 || fresh.stopped_at.is_some() {
        return Err(Refusal::ReadModelBehind.into());
    }
    let paid = crate::services::reconcile::paid_alike(engine, &made.provider, &operation, since)
        .await
        .map_err(|error| DbErr::Custom(error.to_string()))?;
    if paid {
        return Err(Refusal::OperationPaid.into());
    }
    Ok(Recorded { made, checked })
}

/// Whether the provider operation `cited` for an effect under `key` was
/// made by hand: no effect may stand for it.
pub(super) async fn made(
    tx: &mut Tx<'_>,
    engine: &Engine,
    key: &KeySummary,
    cited: &str,
) -> Result<bool, DbErr> {
    let Some(provider) = engine.provider_of(key) else {
        return Ok(false);
    };
    let ids = [cited.to_owned()];
    let made = crate::store::ledger::made_by_hand_among(tx.connection(), &provider, &ids).await?;
    Ok(!made.is_empty())
}

/// Whether a delivery keyed `key` looks like an operation made by hand
/// (its seal is held), whatever held it: its own hold, a look-alike's, a
/// look-up that named the operation.
pub(super) async fn holds(tx: &mut Tx<'_>, key: &KeySummary) -> Result<bool, DbErr> {
    match &key.held_as {
        Some(seal) => crate::store::ledger::made_by_hand(tx.connection(), seal).await,
        None => Ok(false),
    }
}

/// What was journaled after the checks before the resolving transaction.
enum Since {
    Clear,
    /// A delivery that looks like the operation.
    Arrived,
    /// More rows than `MOST_SINCE`.
    TooMuch,
}

/// Whether a delivery journaled after position `checked` looks like the
/// operation made by hand (`HandMade::seal`), its late webhook maybe
/// applied: the checks before the transaction could not see it. The writer
/// orders the transaction with every decision, so a look-alike decided
/// after it is held, and one decided before it is found here, whatever came
/// of it.
async fn look_alike_since(
    tx: &mut Tx<'_>,
    engine: &Engine,
    made: &HandMade,
    checked: i64,
) -> Result<Since, DbErr> {
    let conn = tx.connection();
    let head = crate::store::projector::head(conn).await?;
    if head - checked > MOST_SINCE {
        return Ok(Since::TooMuch);
    }
    // Each delivery's events, in journal order, a page of rows at a time.
    let mut order: HashMap<DeliveryId, usize> = HashMap::new();
    let mut deliveries: Vec<(DeliveryId, Vec<JournalEvent>)> = Vec::new();
    let mut after = checked;
    while after < head {
        let page = crate::store::journal::page_after(conn, after, PAGE)
            .await
            .map_err(|error| DbErr::Custom(error.to_string()))?;
        let Some(last) = page.last().map(|stored| stored.position) else {
            break;
        };
        after = last;
        for stored in page {
            let Some(id) = stored.delivery_id else {
                continue;
            };
            let at = *order.entry(id).or_insert_with(|| {
                deliveries.push((id, Vec::new()));
                deliveries.len() - 1
            });
            deliveries[at].1.push(stored.event);
        }
    }
    for (id, events) in deliveries {
        // Only what may have taken a key since: a reception, a decision
        // made again, a resolution, a key taken again. An effect's answer,
        // a look-up or an expiry changes an effect the checks already read
        // (they count every one that did not fail).
        let takes = |event: &JournalEvent| {
            matches!(
                event,
                JournalEvent::DeliveryReceived(_)
                    | JournalEvent::DecisionMade(_)
                    | JournalEvent::KeyReserved(_)
                    | JournalEvent::CaseResolved(_)
            )
        };
        if !events.iter().any(takes) {
            continue;
        }
        // Received since: its events are all here. Otherwise (re-decided,
        // or its case resolved since) its reception is older.
        let received = events
            .iter()
            .any(|event| matches!(event, JournalEvent::DeliveryReceived(_)));
        let journaled = if received {
            Journaled::of(events)
        } else {
            Journaled::read(conn, id).await?
        };
        let provider = journaled
            .key
            .as_ref()
            .and_then(|key| engine.provider_of(key));
        if provider.as_deref() == Some(made.provider.as_str())
            && sealed_on(conn, engine, &journaled).await?.as_deref() == Some(made.seal.as_str())
        {
            return Ok(Since::Arrived);
        }
    }
    Ok(Since::Clear)
}

/// The seal of a journaled delivery, from its body, as at its reception
/// (the seal is not journaled): `None` without a key, a body, or a listing
/// of its provider that compares its effect type.
pub(crate) async fn sealed(
    engine: &SharedEngine,
    journaled: &Journaled,
) -> Result<Option<String>, DbErr> {
    sealed_on(&engine.db, engine, journaled).await
}

/// `sealed`, its body read through `conn`.
async fn sealed_on<C: ConnectionTrait>(
    conn: &C,
    engine: &Engine,
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
    Ok(match journaled.event_on(conn, engine).await? {
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
