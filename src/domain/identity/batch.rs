//! Batch deliveries (GoCardless `events[]`, Adyen `notificationItems[]`).
//!
//! Each item is keyed on its own, with the provider's hierarchy for its own
//! event type; `Derivation::items` lists them, each with the item itself.
//! * one item: the delivery *is* that item (its type, key, skips);
//! * several items: the delivery has no business identity of its own. Each
//!   item is decided on its own key and gets its own effect, exactly as if it
//!   had arrived alone (a provider regrouping events — `[A, B]` then
//!   `[B, C]` — never applies one twice). An unresolved item is quarantined
//!   on its own; its siblings are decided all the same. The delivery's event
//!   type is the sorted distinct item types joined with `+`.
//!
//! Deliveries journaled before 2026-12-01 carry a synthetic `batch@1` key over
//! the set of item keys instead; `BATCH_STRATEGY` names it for the upcaster.

use super::types::{Derivation, ItemDerivation};
use std::collections::BTreeSet;

/// The retired synthetic strategy of whole batches (see the module doc).
pub const BATCH_STRATEGY: &str = "batch";

pub(super) fn combine(d: &mut Derivation, items: Vec<ItemDerivation>) {
    if items.len() == 1 {
        d.absorb(items[0].clone());
        d.items = items;
        return;
    }
    let types: BTreeSet<&str> = items
        .iter()
        .filter_map(|i| i.event_type.as_deref())
        .collect();
    d.event_type = Some(types.into_iter().collect::<Vec<_>>().join("+"));
    d.items = items;
}
