//! The scenario `unicity simulate` plays, drawn from a seed: the refunds the
//! provider really makes, and how their webhooks are delivered. Pure: the
//! same seed and sizes give the same plan.

use serde_json::{Value, json};

use super::prng::{SplitMix64, base36};

/// How one operation's webhook reaches Unicity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Sent once, with the provider's refund reference (a strong key).
    Plain,
    /// The same bytes sent again after a backoff (a transport retry).
    Retry,
    /// Sent again re-encoded: another send time, members reordered,
    /// whitespace; no reference, so only the provider's API can tell.
    Reencoded,
    /// Two legitimate refunds of the same amount on one payment, no
    /// reference: the seed's case study.
    EqualPair,
    /// Two legitimate refunds whose webhooks are byte for byte the same.
    IdenticalPair,
    /// Sent once, then the same reference comes back with another amount
    /// (the provider's bug: a collision, left for a person).
    Collision,
    /// The downstream applies the effect, then answers too late.
    Timeout,
    /// Never delivered: only reconciliation can see it.
    Dropped,
    /// Held during the provider's outage, then sent three times at once.
    Burst,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::Plain,
        Kind::Retry,
        Kind::Reencoded,
        Kind::EqualPair,
        Kind::IdenticalPair,
        Kind::Collision,
        Kind::Timeout,
        Kind::Dropped,
        Kind::Burst,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Retry => "retry",
            Kind::Reencoded => "re-encoded retry",
            Kind::EqualPair => "equal refunds",
            Kind::IdenticalPair => "identical repeats",
            Kind::Collision => "collision",
            Kind::Timeout => "downstream timeout",
            Kind::Dropped => "dropped delivery",
            Kind::Burst => "outage then burst",
        }
    }

    /// The kind named on the command line (`plain`, `retry`, `reencoded`,
    /// `equal`, `identical`, `collision`, `timeout`, `dropped`, `burst`).
    pub fn parse(text: &str) -> Option<Kind> {
        let short = [
            "plain",
            "retry",
            "reencoded",
            "equal",
            "identical",
            "collision",
            "timeout",
            "dropped",
            "burst",
        ];
        short.iter().position(|s| *s == text).map(|i| Kind::ALL[i])
    }

    /// Operations the provider makes for one item of this kind.
    pub fn operations(self) -> usize {
        match self {
            Kind::EqualPair | Kind::IdenticalPair => 2,
            _ => 1,
        }
    }

    /// Weight in the default mix (out of 100).
    fn weight(self) -> u64 {
        match self {
            Kind::Plain => 30,
            Kind::Retry | Kind::Reencoded => 12,
            Kind::EqualPair | Kind::Timeout | Kind::Burst => 10,
            Kind::IdenticalPair | Kind::Collision | Kind::Dropped => 5,
        }
    }
}

/// One payment's refunds and how they are delivered.
#[derive(Debug, Clone)]
pub struct Item {
    pub kind: Kind,
    pub payment: String,
    pub amount: u64,
    /// The provider's refund ids (one per operation).
    pub refunds: Vec<String>,
    pub reference: Option<String>,
    /// Pause before each send after the first (backoff), in milliseconds.
    pub backoff_ms: u64,
}

/// Draws `count` items from `seed`; `only` restricts the mix to some kinds.
/// Every kind in the mix appears at least once when `count` allows.
pub fn plan(seed: u64, count: usize, only: &[Kind]) -> Vec<Item> {
    let kinds: Vec<Kind> = if only.is_empty() {
        Kind::ALL.to_vec()
    } else {
        only.to_vec()
    };
    let total: u64 = kinds.iter().map(|k| k.weight()).sum();
    let mut rng = SplitMix64::new(seed);
    (0..count)
        .map(|i| {
            let kind = match kinds.get(i) {
                Some(kind) => *kind,
                None => {
                    let mut draw = rng.below(total);
                    *kinds
                        .iter()
                        .find(|k| {
                            let hit = draw < k.weight();
                            draw = draw.saturating_sub(k.weight());
                            hit
                        })
                        .unwrap_or(&Kind::Plain)
                }
            };
            let tag = base36(rng.next_u64(), 10);
            let with_reference = matches!(
                kind,
                Kind::Plain | Kind::Retry | Kind::Collision | Kind::Timeout | Kind::Burst
            );
            Item {
                kind,
                payment: format!("pay_sim_{tag}"),
                amount: 100 * (1 + rng.below(50)),
                refunds: (0..kind.operations())
                    .map(|n| format!("re_sim_{tag}_{n}"))
                    .collect(),
                reference: with_reference.then(|| format!("rr_sim_{tag}")),
                backoff_ms: 200 + rng.below(600),
            }
        })
        .collect()
}

/// The webhook body of a refund of `item`, as the provider encodes it:
/// `sent_at` is the send attempt's time (absent for identical repeats),
/// `variant` changes the encoding (member order, whitespace), not the facts.
pub fn body(item: &Item, amount: u64, sent_at: Option<&str>, variant: bool) -> Vec<u8> {
    let mut members: Vec<(&str, Value)> = vec![
        ("type", json!("refund.created")),
        ("payment_id", json!(item.payment)),
        ("amount", json!(amount)),
        ("currency", json!("EUR")),
    ];
    if let Some(reference) = &item.reference {
        members.push(("refund_reference", json!(reference)));
    }
    if let Some(at) = sent_at {
        members.push(("sent_at", json!(at)));
    }
    if variant {
        members.reverse();
    }
    let separator = if variant { ",\n  " } else { "," };
    let text: Vec<String> = members
        .iter()
        .map(|(name, value)| format!("{}:{value}", json!(name)))
        .collect();
    format!("{{{}}}", text.join(separator)).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_plan_and_every_kind_appears() {
        let a = plan(7, 20, &[]);
        let b = plan(7, 20, &[]);
        assert_eq!(
            a.iter().map(|i| &i.payment).collect::<Vec<_>>(),
            b.iter().map(|i| &i.payment).collect::<Vec<_>>()
        );
        for kind in Kind::ALL {
            assert!(a.iter().any(|i| i.kind == kind), "{kind:?}");
        }
        assert_ne!(plan(8, 20, &[])[0].payment, a[0].payment);
    }

    #[test]
    fn a_re_encoded_body_says_the_same_thing_in_other_bytes() {
        let item = &plan(1, 3, &[Kind::Reencoded])[0];
        let first = body(item, 700, Some("2026-12-01T10:00:00Z"), false);
        let again = body(item, 700, Some("2026-12-01T10:00:05Z"), true);
        assert_ne!(first, again);
        let read = |b: &[u8]| {
            let mut v: Value = serde_json::from_slice(b).unwrap();
            v.as_object_mut().unwrap().remove("sent_at");
            v
        };
        assert_eq!(read(&first), read(&again));
    }
}
