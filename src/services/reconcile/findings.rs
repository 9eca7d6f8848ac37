//! What one reconciliation run found, journaled in one transaction: the
//! discrepancies it opens (each once), the pairs it made by fields (each
//! recorded, `EffectPaired`), and the open findings a pair answers, closed
//! `effect_found`.
//!
//! A pair made by fields holds only if its recording does. Refused because
//! another effect already stands for the operation (one outside the window,
//! cited by a person or paired by an earlier run), the operation was
//! answered, but not by this effect: what the pair would have closed stays
//! open, and this effect, applied within the window, is unexpected after all.

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::DbErr;
use uuid::Uuid;

use super::SharedEngine;
use crate::domain::cases::Resolution;
use crate::domain::delivery::DeliveryId;
use crate::domain::identity::pattern;
use crate::domain::journal::{
    CaseResolved, DiscrepancyFound, DiscrepancyKind, EffectPaired, JournalEvent, ProviderOperation,
    ReconciliationRan,
};
use crate::domain::reconcile::{self, Comparison, Effect, Operation, Window};
use crate::providers::lookup::Lookup;
use crate::store::Tx;
use crate::store::entities::effect;
use crate::store::writer::WriteJob;

/// An event journaled with its delivery, when it has one.
type About<E> = (Option<DeliveryId>, E);

/// What a run found, to journal (`journaled`).
#[derive(Default)]
pub(super) struct Findings {
    /// Discrepancies, each opening its case once.
    pub(super) found: Vec<About<DiscrepancyFound>>,
    /// Open findings answered by a pair that needs no recording (the effect
    /// cites the operation already).
    closing: Vec<About<CaseResolved>>,
    /// Pairs made by fields.
    paired: Vec<Pairing>,
}

/// A pair made by fields, with what it answers if it holds.
struct Pairing {
    delivery: Option<DeliveryId>,
    event: EffectPaired,
    answers: Vec<About<CaseResolved>>,
    /// The effect's own finding, if it was applied within the window: opened
    /// when another effect turns out to stand for the operation.
    otherwise: Option<About<DiscrepancyFound>>,
}

/// The run's side of each pair: the operations (as listed, and as compared)
/// and the effects (as stored, and as compared), index for index.
#[derive(Clone, Copy)]
pub(super) struct Compared<'a> {
    pub listed: &'a [ProviderOperation],
    pub ops: &'a [Operation],
    pub rows: &'a [effect::Model],
    pub effects: &'a [Effect],
    /// The open missing-effect findings, by the operation each stands for.
    pub open_findings: &'a [(String, Uuid)],
}

impl Findings {
    /// What `found` means for `provider` over `window`.
    pub(super) async fn of(
        engine: &SharedEngine,
        provider: &str,
        window: Window,
        compared: Compared<'_>,
        found: &Comparison,
        run_id: Uuid,
    ) -> anyhow::Result<Self> {
        let Compared {
            listed,
            ops,
            rows,
            effects,
            ..
        } = compared;
        let discrepancy = |kind: DiscrepancyKind, subject: String| DiscrepancyFound {
            case_id: reconcile::case_id(kind.as_str(), &subject),
            kind,
            provider: provider.to_owned(),
            window_from: window.from,
            window_to: window.to,
            operation: None,
            effect_id: None,
            key: None,
        };
        let unexpected = |e: usize| {
            let row = &rows[e];
            let mut event = discrepancy(DiscrepancyKind::UnexpectedEffect, row.effect_id.clone());
            event.effect_id = Some(effects[e].effect_id);
            event.key = Some(row.key.clone());
            (row.first_delivery_id.parse().ok(), event)
        };
        let mut findings = Self::default();
        for &i in &found.missing {
            let op = &listed[i];
            let subject = format!("{provider}/{}", op.id);
            let mut event = discrepancy(DiscrepancyKind::MissingEffect, subject);
            event.operation = Some(op.clone());
            findings.found.push((None, event));
        }
        findings
            .found
            .extend(found.unexpected.iter().map(|&e| unexpected(e)));
        let mut answered = answered(engine, provider, compared, found).await?;
        for (n, &(i, e)) in found.matched.iter().enumerate() {
            let answers = answered.remove(&n).unwrap_or_default();
            if effects[e].provider_ref.as_deref() == Some(ops[i].id.as_str()) {
                findings.closing.extend(answers);
                continue;
            }
            let within = effects[e].applied && window.contains(effects[e].created_at);
            findings.paired.push(Pairing {
                delivery: rows[e].first_delivery_id.parse().ok(),
                event: EffectPaired {
                    effect_id: effects[e].effect_id,
                    key: rows[e].key.clone(),
                    operation: ops[i].id.clone(),
                    run_id,
                },
                answers,
                otherwise: within.then(|| unexpected(e)),
            });
        }
        Ok(findings)
    }

    /// The writer job that journals `ran` with these findings.
    pub(super) fn journaled(self, ran: ReconciliationRan) -> JournalRun {
        JournalRun {
            ran,
            findings: self,
        }
    }
}

/// Most failed effects citing an operation one run reads, the latest
/// failures first.
const OWED_MOST: u64 = 1_000;

/// Missing-effect findings for the operations effects cited and then failed
/// (the downstream refused them), each once: such an operation was paired
/// while its effect was in flight, or cited by a look-up or a person, and
/// its window may have been compared before the effect failed. Operations
/// this run lists or carries are left to the comparison.
pub(super) async fn owed(
    engine: &SharedEngine,
    lookup: &Lookup,
    source: Option<&str>,
    window: Window,
    compared: &[ProviderOperation],
) -> anyhow::Result<Vec<About<DiscrepancyFound>>> {
    let types = super::effect_types(engine, lookup);
    let provider = &lookup.provider;
    let rows: Vec<effect::Model> =
        crate::store::reconcile::failed_citing(&engine.db, (provider, source), &types, OWED_MOST)
            .await?
            .into_iter()
            .filter(|row| pattern::matches(&lookup.effect_type, &row.effect_type))
            .filter(|row| {
                compared
                    .iter()
                    .all(|op| Some(&op.id) != row.provider_ref.as_ref())
            })
            .collect();
    let ids: Vec<Uuid> = rows
        .iter()
        .filter_map(|row| {
            let operation = row.provider_ref.as_deref()?;
            Some([
                missing_case(provider, operation),
                failed_case(provider, operation, row),
            ])
        })
        .flatten()
        .collect();
    let known = crate::store::cases::existing_among(&engine.db, &ids).await?;
    let mut owed = Vec::new();
    for row in rows {
        let Some(operation) = row.provider_ref.clone() else {
            continue;
        };
        let Some(case_id) = owed_case(provider, &operation, &row, &known) else {
            continue;
        };
        let effect = super::ledger_effect(engine, lookup, &row).await?;
        owed.push((
            None,
            DiscrepancyFound {
                case_id,
                kind: DiscrepancyKind::MissingEffect,
                provider: provider.clone(),
                window_from: window.from,
                window_to: window.to,
                operation: Some(ProviderOperation {
                    id: operation,
                    amount: effect.amount,
                    currency: effect.currency,
                    status: None,
                    resource: effect.resource,
                    created_at: Some(row.created_at),
                }),
                effect_id: Some(effect.effect_id),
                key: Some(row.key),
            },
        ));
    }
    Ok(owed)
}

/// The missing-effect finding of `provider`'s `operation`.
fn missing_case(provider: &str, operation: &str) -> Uuid {
    reconcile::case_id(
        DiscrepancyKind::MissingEffect.as_str(),
        &format!("{provider}/{operation}"),
    )
}

/// The missing-effect finding of `operation` raised again for one failure
/// of the effect `row`, which cited it: a sender's retry takes the effect
/// back under the same id, and each failure it comes to is owed its own.
fn failed_case(provider: &str, operation: &str, row: &effect::Model) -> Uuid {
    let failed = row.settled_at.unwrap_or(row.created_at).timestamp_micros();
    reconcile::case_id(
        DiscrepancyKind::MissingEffect.as_str(),
        &format!("{provider}/{operation}/failed/{}/{failed}", row.effect_id),
    )
}

/// The finding a failed effect citing `operation` owes, if any, given the
/// findings `known` (each with when it closed; `None`: open). The
/// operation's own finding, first. Once that one exists: nothing while it
/// is open (it says so already) or when it closed after the effect failed
/// (whoever closed it could see the failure); closed before, it answered
/// for an effect then in flight, not for this failure, and a finding of the
/// failed effect's own is owed, once.
fn owed_case(
    provider: &str,
    operation: &str,
    row: &effect::Model,
    known: &std::collections::HashMap<Uuid, Option<DateTime<Utc>>>,
) -> Option<Uuid> {
    let first = missing_case(provider, operation);
    let closed = match known.get(&first) {
        None => return Some(first),
        Some(None) => return None,
        Some(Some(closed)) => *closed,
    };
    let failed = row.settled_at.unwrap_or(row.created_at);
    let again = failed_case(provider, operation, row);
    (closed < failed && !known.contains_key(&again)).then_some(again)
}

/// The open findings each pair of `found.matched` (by its place there)
/// answers: an operation once missing now paired with an applied effect (its
/// webhook came late), an effect once unexpected now paired with an
/// operation (listed late). Each is closed `effect_found`, naming the effect,
/// by the run's job.
async fn answered(
    engine: &SharedEngine,
    provider: &str,
    compared: Compared<'_>,
    found: &Comparison,
) -> anyhow::Result<std::collections::HashMap<usize, Vec<About<CaseResolved>>>> {
    let Compared {
        ops,
        rows,
        effects,
        open_findings,
        ..
    } = compared;
    let mut answers = Vec::new();
    for (n, &(i, e)) in found.matched.iter().enumerate() {
        if !effects[e].applied {
            continue;
        }
        let (operation, effect_id) = (&ops[i].id, effects[e].effect_id);
        let note = format!("operation {operation} paired with applied effect {effect_id}");
        let missing = missing_case(provider, operation);
        answers.push((n, missing, None, note.clone(), effect_id));
        // Raised again for an effect that failed (`owed`): answered too.
        for (_, again) in open_findings
            .iter()
            .filter(|(of, id)| of == operation && *id != missing)
        {
            answers.push((n, *again, None, note.clone(), effect_id));
        }
        let unexpected = DiscrepancyKind::UnexpectedEffect.as_str();
        let unexpected = reconcile::case_id(unexpected, &rows[e].effect_id);
        let delivery = rows[e].first_delivery_id.parse().ok();
        answers.push((n, unexpected, delivery, note, effect_id));
    }
    let ids: Vec<Uuid> = answers.iter().map(|&(_, id, ..)| id).collect();
    let open = crate::store::cases::open_among(&engine.db, &ids).await?;
    let mut by_pair: std::collections::HashMap<usize, Vec<About<CaseResolved>>> =
        std::collections::HashMap::new();
    for (n, case_id, delivery, note, effect_id) in answers {
        if !open.contains(&case_id) {
            continue;
        }
        let resolved = CaseResolved {
            case_id,
            resolution: Resolution::EffectFound,
            resolved_by: "reconciliation".to_owned(),
            note,
            authoritative_ref: None,
            effect_id: Some(effect_id),
            key: None,
            made_by_hand: None,
        };
        by_pair.entry(n).or_default().push((delivery, resolved));
    }
    Ok(by_pair)
}

/// A run and what it found, journaled as a writer job: each pair made by
/// fields recorded (and what it answers closed, if it holds), each finding
/// answered otherwise closed, each discrepancy's case opened once (a claim),
/// then the run recorded with its figures.
pub(super) struct JournalRun {
    ran: ReconciliationRan,
    findings: Findings,
}

impl WriteJob for JournalRun {
    type Output = ReconciliationRan;

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<ReconciliationRan, DbErr>> {
        Box::pin(async move {
            let Self { mut ran, findings } = self;
            let at = Utc::now();
            let mut found = findings.found;
            let mut closing = findings.closing;
            for pairing in findings.paired {
                let event = JournalEvent::EffectPaired(pairing.event.clone());
                if tx.claim(pairing.delivery, &event, at).await? {
                    closing.extend(pairing.answers);
                    continue;
                }
                // Cited meanwhile (by a person): it stands for another
                // operation; nothing else changes. Still citing nothing:
                // another effect stands for this operation.
                let held = tx.reservation(&pairing.event.key).await?;
                if held.is_none_or(|row| row.provider_ref.is_some()) {
                    continue;
                }
                ran.matched = ran.matched.saturating_sub(1);
                if let Some(unexpected) = pairing.otherwise {
                    ran.unexpected += 1;
                    found.push(unexpected);
                }
            }
            for (delivery, resolved) in closing {
                // Closed meanwhile by a person: nothing to do.
                tx.claim(delivery, &JournalEvent::CaseResolved(resolved), at)
                    .await?;
            }
            for (delivery, event) in found {
                if tx
                    .claim(delivery, &JournalEvent::DiscrepancyFound(event), at)
                    .await?
                {
                    ran.opened += 1;
                }
            }
            tx.record(None, JournalEvent::ReconciliationRan(ran.clone()), at)
                .await?;
            Ok(ran)
        })
    }
}

/// Whether an effect of `provider` that cites no operation, made since
/// `since` and that may have moved money, has `operation`'s resource,
/// amount and currency (as a run pairs them): the operation's late webhook
/// may have paid it already, and recording it as made by hand would hide a
/// second payment. More than `MOST_ALIKE` candidates (effects that cite
/// nothing, of a type a listing of the provider compares) cannot be ruled
/// out: true, without reading their bodies (no more than one beyond are
/// read from the ledger).
pub(crate) async fn paid_alike(
    engine: &SharedEngine,
    provider: &str,
    operation: &ProviderOperation,
    since: DateTime<Utc>,
) -> anyhow::Result<bool> {
    const MOST_ALIKE: usize = 5_000;
    let op = Operation {
        id: operation.id.clone(),
        resource: operation.resource.clone(),
        amount: operation.amount.clone(),
        currency: operation.currency.clone(),
        status: operation.status.clone(),
        created_at: operation.created_at,
        carried: false,
        by_hand: false,
        cited_only: false,
    };
    let listings: Vec<&Lookup> = engine
        .lookups
        .iter()
        .filter(|l| l.provider == provider && l.listing.is_some())
        .collect();
    let types: Vec<&str> = listings.iter().map(|l| l.effect_type.as_str()).collect();
    let rows = crate::store::reconcile::uncited_in_window(
        &engine.db,
        provider,
        &types,
        (since, Utc::now() + chrono::Duration::minutes(1)),
        MOST_ALIKE as u64 + 1,
    )
    .await?;
    let candidates: Vec<(&effect::Model, &Lookup)> = rows
        .iter()
        .filter_map(|row| {
            let lookup = listings
                .iter()
                .find(|l| pattern::matches(&l.effect_type, &row.effect_type))?;
            Some((row, *lookup))
        })
        .collect();
    // The ledger had more than are read: some were not.
    if rows.len() > MOST_ALIKE {
        return Ok(true);
    }
    for (row, lookup) in candidates {
        let effect = super::ledger_effect(engine, lookup, row).await?;
        if reconcile::same_fields(&op, &effect) {
            return Ok(true);
        }
    }
    Ok(false)
}
