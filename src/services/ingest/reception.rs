//! What a delivery writes below the signature check, as one writer job: its
//! body, its transport claim, its decision and the key it takes, then its
//! rows — read, plan, record, in that order, and each item of a batch the
//! same way, as if it had arrived alone.

use chrono::Utc;
use futures_util::future::BoxFuture;
use sea_orm::DbErr;

use crate::domain::decision::{Identity, TransportMatch};
use crate::domain::delivery::{BodyRef, DeliveryId};
use crate::domain::journal::{DecisionMade, KeyDerived};
use crate::domain::plan::{EffectJob, Plan};
use crate::services::decide::{self, Event};
use crate::services::engine::SharedEngine;
use crate::services::items;
use crate::store::entities::delivery;
use crate::store::key_index::IndexKeys;
use crate::store::writer::WriteJob;
use crate::store::{Decided, Tx, journal};

/// A delivery to decide, prepared outside the writer (`ingest::receive`).
pub(super) struct Reception {
    pub engine: SharedEngine,
    pub id: DeliveryId,
    pub derived: KeyDerived,
    /// Its transport key is the provider's delivery id (else its raw body).
    pub by_provider_id: bool,
    pub identity: Identity,
    pub sink: Option<&'static str>,
    pub body: BodyRef,
    pub raw: Vec<u8>,
    pub journaled: journal::ReceptionText,
    pub row: delivery::ActiveModel,
    /// A batch's items, each a delivery of its own.
    pub items: Vec<items::Prepared>,
    pub keys: IndexKeys,
}

/// What a reception came to, once committed.
pub(super) struct Received {
    pub made: DecisionMade,
    /// The effect to run now that the decision is durable.
    pub job: Option<EffectJob>,
    pub derived: KeyDerived,
    /// Each item's decision, its effect, and the item itself.
    pub decided: Vec<items::Decided>,
    pub item_jobs: Vec<Option<EffectJob>>,
    pub items: Vec<items::Prepared>,
}

impl WriteJob for Reception {
    type Output = Received;

    fn keys(&self) -> Option<IndexKeys> {
        Some(self.keys.clone())
    }

    fn run<'a>(self, tx: &'a mut Tx<'_>) -> BoxFuture<'a, Result<Received, DbErr>> {
        Box::pin(async move {
            let Self {
                engine,
                id,
                derived,
                by_provider_id,
                identity,
                sink,
                body,
                raw,
                journaled,
                row,
                mut items,
                keys: _,
            } = self;
            // Journal and lease times are write times; the reception keeps
            // its arrival time.
            let at = Utc::now();
            tx.body(&body, raw, at);
            let (transport, first) = tx.claim_transport(id, &derived, by_provider_id, at).await?;

            // Each item is decided as if it had arrived alone.
            let mut plans = Vec::with_capacity(items.len());
            for item in &mut items {
                tx.body(&item.body, std::mem::take(&mut item.bytes), at);
                let event = Event {
                    id: item.id,
                    derived: &item.derived,
                    identity: item.identity,
                    sink: item.sink,
                };
                plans
                    .push(decide::event(tx, &engine, &event, TransportMatch::FirstSeen, at).await?);
            }
            let decided: Vec<items::Decided> = items
                .iter()
                .zip(&plans)
                .map(|(item, plan)| items::Decided {
                    delivery_id: item.id,
                    derived: item.derived.clone(),
                    decision: plan.made.clone(),
                })
                .collect();
            // A batch's own decision sums up its items'.
            let plan = match items::summed_up(&decided) {
                Some(made) => Plan { made, take: None },
                None => {
                    let event = Event {
                        id,
                        derived: &derived,
                        identity,
                        sink,
                    };
                    let mut plan = decide::event(tx, &engine, &event, transport, at).await?;
                    plan.made.first_delivery_id = first;
                    plan
                }
            };

            let made = plan.made.clone();
            let job = plan.job();
            let item_jobs = plans.iter().map(Plan::job).collect();
            // The reception's rows, then its items': the batch's own journal
            // row comes first.
            tx.decided(
                Decided {
                    id,
                    row,
                    reception: journaled,
                    derived: &derived,
                    plan,
                },
                at,
            );
            for (item, plan) in items.iter_mut().zip(plans) {
                tx.decided(
                    Decided {
                        id: item.id,
                        row: item.row.clone(),
                        reception: std::mem::take(&mut item.journaled),
                        derived: &item.derived,
                        plan,
                    },
                    at,
                );
            }
            Ok(Received {
                made,
                job,
                derived,
                decided,
                item_jobs,
                items,
            })
        })
    }
}
