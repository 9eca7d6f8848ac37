//! Periodic reconciliation: the provider's list of operations in a window
//! against the effects ledger. Pure: the operations, the effects and the
//! window come in as arguments.
//!
//! The matching rule, in order:
//! 1. an operation whose status says it did not happen (`NOT_DONE`, in any
//!    case) is not expected;
//! 2. an operation whose id is the provider reference an effect was applied
//!    for (recorded when a look-up or a person resolved its case citing it)
//!    is that effect's;
//! 3. the operations and effects left are paired on resource + amount +
//!    currency (all three known on both sides; currencies compared without
//!    case), earliest operation with earliest effect — an effect that stands
//!    for an operation already (cited, or paired by an earlier run, which
//!    records the pairing as the effect's provider reference) stands for no
//!    other: two equal refunds on either side of a window's edge are never
//!    both answered by one effect;
//! 4. an operation left over, created within the window, is a **missing
//!    effect**; an *applied* effect left over, created within the window, is
//!    an **unexpected effect**.
//!
//! An operation a person recorded as made by hand happened, and is expected,
//! but was answered outside Unicity: it is never paired (an effect with its
//! fields answers another operation, or nothing) nor missing again.
//!
//! An operation an earlier run found missing, its finding still open, is
//! carried into every later run: its webhook may come late, and the effect
//! it finally caused lies in a later window, where the operation is no
//! longer listed. A carried operation takes part in the pairing like any
//! (earliest first), but is neither expected nor missing again: its finding
//! is open already.
//!
//! Effects still in flight (pending) or whose outcome is unknown (already in
//! a case) take part in the pairing, so an operation they stand for is not
//! reported missing, but they are never reported unexpected themselves. The
//! caller lists both sides over the window widened by a slack on each side,
//! so that an operation at the window's end whose delivery came a little
//! later still finds its effect; only what lies within the window is
//! reported or counted.

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use super::identity::KeySecret;

/// Statuses of operations that did not happen, in any case (`FAILED`).
pub const NOT_DONE: [&str; 6] = [
    "failed",
    "canceled",
    "cancelled",
    "reversed",
    "rejected",
    "declined",
];

/// Whether an operation listed with `status` did not happen.
pub fn did_not_happen(status: &str) -> bool {
    NOT_DONE
        .iter()
        .any(|not_done| not_done.eq_ignore_ascii_case(status.trim()))
}

/// A time window, `from` included, `to` excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

impl Window {
    pub fn contains(&self, at: DateTime<Utc>) -> bool {
        self.from <= at && at < self.to
    }
}

/// One operation as the provider lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub id: String,
    pub resource: Option<String>,
    pub amount: Option<Value>,
    pub currency: Option<Value>,
    pub status: Option<String>,
    /// Unknown: taken as within the window the provider was asked about.
    pub created_at: Option<DateTime<Utc>>,
    /// Found missing by an earlier run, its finding still open (see the
    /// module's rule).
    pub carried: bool,
    /// A person recorded it as made by hand (a missing effect closed so):
    /// answered outside Unicity, never paired with an effect nor missing.
    pub by_hand: bool,
    /// Carried from a finding raised for an effect that cited it and
    /// failed: its fields are that effect's, not the provider's, and only
    /// an effect citing it answers it. Paired by fields, it would take the
    /// effect of another, equal operation, reported missing in its place.
    pub cited_only: bool,
}

/// One effect of the ledger as reconciliation sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Effect {
    pub effect_id: Uuid,
    /// Settled applied (only those can be unexpected).
    pub applied: bool,
    /// The provider's operation the effect was applied for, if one was cited.
    pub provider_ref: Option<String>,
    pub resource: Option<String>,
    pub amount: Option<Value>,
    pub currency: Option<Value>,
    pub created_at: DateTime<Utc>,
}

/// What the comparison found. Indexes are into the inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Operations that happened, created within the window.
    pub expected: usize,
    /// Applied effects created within the window.
    pub applied: usize,
    /// (operation, effect) pairs.
    pub matched: Vec<(usize, usize)>,
    pub missing: Vec<usize>,
    pub unexpected: Vec<usize>,
}

/// Compares `operations` with `effects` over `window` (see the module rule).
pub fn compare(operations: &[Operation], effects: &[Effect], window: Window) -> Comparison {
    let done: Vec<usize> = (0..operations.len())
        .filter(|&i| {
            operations[i]
                .status
                .as_deref()
                .is_none_or(|s| !did_not_happen(s))
        })
        .collect();
    let mut taken = vec![false; effects.len()];
    let mut matched = Vec::new();
    let mut unpaired = Vec::new();
    for &i in done.iter().filter(|&&i| !operations[i].by_hand) {
        let by_ref = (0..effects.len())
            .find(|&e| !taken[e] && effects[e].provider_ref.as_deref() == Some(&operations[i].id));
        match by_ref {
            Some(e) => {
                taken[e] = true;
                matched.push((i, e));
            }
            None => unpaired.push(i),
        }
    }
    unpaired.sort_by_key(|&i| (operations[i].created_at, i));
    let mut by_time: Vec<usize> = (0..effects.len()).collect();
    by_time.sort_by_key(|&e| (effects[e].created_at, e));
    let mut missing = Vec::new();
    for i in unpaired {
        if operations[i].cited_only {
            missing.push(i);
            continue;
        }
        let pair = by_time.iter().copied().find(|&e| {
            !taken[e]
                && effects[e].provider_ref.is_none()
                && same_fields(&operations[i], &effects[e])
        });
        match pair {
            Some(e) => {
                taken[e] = true;
                matched.push((i, e));
            }
            None => missing.push(i),
        }
    }
    let within_op = |i: &usize| {
        !operations[*i].carried
            && operations[*i]
                .created_at
                .is_none_or(|at| window.contains(at))
    };
    missing.retain(within_op);
    missing.sort_unstable();
    matched.sort_unstable();
    let unexpected = (0..effects.len())
        .filter(|&e| !taken[e] && effects[e].applied && window.contains(effects[e].created_at))
        .collect();
    Comparison {
        expected: done.iter().filter(|i| within_op(i)).count(),
        applied: effects
            .iter()
            .filter(|e| e.applied && window.contains(e.created_at))
            .count(),
        matched,
        missing,
        unexpected,
    }
}

/// Resource, amount and currency all known on both sides and equal.
pub fn same_fields(op: &Operation, effect: &Effect) -> bool {
    let currency = |v: &Option<Value>| {
        v.as_ref()
            .and_then(Value::as_str)
            .map(str::to_ascii_uppercase)
    };
    op.resource.is_some()
        && op.resource == effect.resource
        && op.amount.is_some()
        && op.amount == effect.amount
        && currency(&op.currency).is_some()
        && currency(&op.currency) == currency(&effect.currency)
}

/// What an operation made by hand is recognised by: its provider and the
/// resource, amount and currency a run pairs on (all three known, the
/// currency in any case), sealed under the key secret so that no value is
/// stored or journaled in clear. A delivery's own fields, read as its
/// provider's listing reads them, seal the same way.
pub fn hand_made_seal(
    secret: &KeySecret,
    provider: &str,
    (resource, amount, currency): (Option<&str>, Option<&Value>, Option<&Value>),
) -> Option<String> {
    let currency = currency?.as_str()?.to_ascii_uppercase();
    let amount = amount.filter(|amount| !amount.is_null())?;
    let fields = serde_json::json!([provider, resource?, amount, currency]);
    Some(secret.sealed(&fields))
}

/// The case a discrepancy opens, the same on every run: a second run over
/// the same window opens no second case for the same operation or effect.
pub fn case_id(kind: &str, subject: &str) -> Uuid {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{kind}\n{subject}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    // RFC 9562 version 8 (custom), variant 10.
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}

/// A run as the reconciled time counts it: its window, ending no later
/// than when it ran (it compared what the provider listed then), and
/// whether it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compared {
    pub window: Window,
    pub failed: bool,
}

/// Where the reconciled time ends, from the runs over every source of a
/// provider: the latest end of a run without error, unless a failed run's
/// window holds a stretch after `since` that no run without error compared.
/// Then it ends where that stretch starts, so the periodic run compares it
/// even when a later run (by hand, after an outage) compared the hours
/// after. What a failed run left before `since` (when the reconciled time
/// began: a month asked for by hand, a year the provider no longer lists)
/// holds nothing back.
pub fn reconciled_until(runs: &[Compared], since: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let compared: Vec<Window> = runs
        .iter()
        .filter(|r| !r.failed)
        .map(|r| r.window)
        .collect();
    let latest = compared.iter().map(|window| window.to).max();
    let first_gap = runs
        .iter()
        .filter(|run| run.failed)
        .map(|run| Window {
            from: run.window.from.max(since),
            to: run.window.to,
        })
        .filter_map(|window| first_uncompared(window, &compared))
        .min();
    latest.into_iter().chain(first_gap).min()
}

/// The earliest instant of `window` that none of `compared` contains.
fn first_uncompared(window: Window, compared: &[Window]) -> Option<DateTime<Utc>> {
    let mut at = window.from;
    while let Some(covering) = compared.iter().find(|other| other.contains(at)) {
        at = covering.to;
    }
    (at < window.to).then_some(at)
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use super::*;

    fn at(minute: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 10, minute, 0).unwrap()
    }

    fn window() -> Window {
        Window {
            from: at(0),
            to: at(30),
        }
    }

    fn op(id: &str, payment: &str, amount: u64, minute: u32) -> Operation {
        Operation {
            id: id.into(),
            resource: Some(payment.into()),
            amount: Some(json!(amount)),
            currency: Some(json!("eur")),
            status: Some("succeeded".into()),
            created_at: Some(at(minute)),
            carried: false,
            by_hand: false,
            cited_only: false,
        }
    }

    fn effect(n: u128, payment: &str, amount: u64, minute: u32) -> Effect {
        Effect {
            effect_id: Uuid::from_u128(n),
            applied: true,
            provider_ref: None,
            resource: Some(payment.into()),
            amount: Some(json!(amount)),
            currency: Some(json!("EUR")),
            created_at: at(minute),
        }
    }

    #[test]
    fn given_an_operation_carried_for_a_failed_effect_then_only_a_citing_effect_answers_it() {
        // re_2's finding was raised for its effect, which cited it and
        // failed; re_3, equal and later, is applied by an effect that cites
        // nothing.
        let mut owed = op("re_2", "pay_l", 700, 1);
        (owed.carried, owed.cited_only) = (true, true);
        let ops = [owed, op("re_3", "pay_l", 700, 5)];
        let effects = [effect(3, "pay_l", 700, 6)];
        let found = compare(&ops, &effects, window());
        assert_eq!(found.matched, vec![(1, 0)], "re_3's effect is re_3's");
        assert!(
            found.missing.is_empty(),
            "re_2 is carried: not missing again"
        );
        assert!(found.unexpected.is_empty());
        // An effect citing it answers it.
        let mut citing = effect(2, "pay_l", 700, 3);
        citing.provider_ref = Some("re_2".into());
        let found = compare(&ops, &[citing, effect(3, "pay_l", 700, 6)], window());
        assert_eq!(found.matched, vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn given_one_effect_per_operation_then_everything_matches() {
        let ops = [op("re_1", "pay_1", 700, 1), op("re_2", "pay_2", 500, 2)];
        let effects = [effect(1, "pay_2", 500, 3), effect(2, "pay_1", 700, 2)];
        let found = compare(&ops, &effects, window());
        assert_eq!(found.matched, vec![(0, 1), (1, 0)]);
        assert!(found.missing.is_empty() && found.unexpected.is_empty());
        assert_eq!((found.expected, found.applied), (2, 2));
    }

    #[test]
    fn given_an_operation_made_by_hand_then_it_is_expected_but_neither_paired_nor_missing() {
        // re_1 refunded by hand; an equal refund's effect answers nothing it
        // made, so it is unexpected
        let mut by_hand = op("re_1", "pay_1", 700, 1);
        by_hand.by_hand = true;
        let found = compare(&[by_hand], &[effect(1, "pay_1", 700, 2)], window());
        assert!(found.matched.is_empty() && found.missing.is_empty());
        assert_eq!(found.unexpected, vec![0]);
        assert_eq!(found.expected, 1);
        let found = compare(&[op("re_1", "pay_1", 700, 1)], &[], window());
        assert_eq!(found.missing, vec![0]);
    }

    #[test]
    fn given_an_operation_carried_from_an_earlier_window_then_its_late_effect_is_its() {
        let mut earlier = op("re_0", "pay_1", 700, 1);
        earlier.created_at = Some(at(0) - chrono::Duration::minutes(50));
        earlier.carried = true;
        let left = op("re_9", "pay_9", 100, 2);
        let mut unanswered = earlier.clone();
        unanswered.id = "re_00".into();
        unanswered.resource = Some("pay_0".into());
        let ops = [left, earlier, unanswered];
        let found = compare(&ops, &[effect(1, "pay_1", 700, 3)], window());
        assert_eq!(found.matched, vec![(1, 0)]);
        assert!(found.unexpected.is_empty(), "the late effect answers it");
        assert_eq!(
            found.missing,
            vec![0],
            "a carried one is never missing again"
        );
        assert_eq!(found.expected, 1, "nor expected");
    }

    #[test]
    fn given_two_equal_refunds_and_one_effect_then_one_is_missing() {
        let ops = [op("re_1", "pay_1", 700, 1), op("re_2", "pay_1", 700, 5)];
        let found = compare(&ops, &[effect(1, "pay_1", 700, 2)], window());
        assert_eq!(found.matched, vec![(0, 0)], "earliest with earliest");
        assert_eq!(found.missing, vec![1]);
    }

    #[test]
    fn given_an_applied_effect_the_provider_does_not_list_then_it_is_unexpected() {
        let found = compare(
            &[op("re_1", "pay_1", 700, 1)],
            &[effect(1, "pay_1", 700, 2), effect(2, "pay_9", 100, 3)],
            window(),
        );
        assert_eq!(found.unexpected, vec![1]);
        assert!(found.missing.is_empty());
    }

    #[test]
    fn given_an_authoritative_reference_then_it_wins_over_fields() {
        let ops = [op("re_1", "pay_1", 700, 1), op("re_2", "pay_1", 700, 2)];
        let mut second = effect(2, "pay_1", 700, 1);
        second.provider_ref = Some("re_2".into());
        let found = compare(&ops, &[effect(1, "pay_1", 700, 5), second], window());
        assert_eq!(found.matched, vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn given_different_amounts_or_unknown_fields_then_nothing_pairs() {
        let mut blind = op("re_2", "pay_2", 500, 1);
        blind.resource = None;
        let found = compare(
            &[op("re_1", "pay_1", 700, 1), blind],
            &[effect(1, "pay_1", 701, 2), effect(2, "pay_2", 500, 2)],
            window(),
        );
        assert_eq!(found.missing, vec![0, 1]);
        assert_eq!(found.unexpected, vec![0, 1]);
    }

    #[test]
    fn given_an_operation_that_did_not_happen_then_it_is_not_expected() {
        for status in ["failed", "FAILED", "Canceled", "REJECTED", "declined"] {
            let mut failed = op("re_1", "pay_1", 700, 1);
            failed.status = Some(status.into());
            let found = compare(&[failed], &[], window());
            assert_eq!((found.expected, found.missing.len()), (0, 0), "{status}");
        }
    }

    #[test]
    fn given_the_slack_around_the_window_then_only_what_lies_within_is_reported() {
        // The operation just before the window found its effect just inside;
        // an effect after the window and an operation before it are not ours.
        let ops = [op("re_0", "pay_0", 100, 0), op("re_x", "pay_x", 1, 0)];
        let mut before = ops[1].clone();
        before.created_at = Some(at(0) - chrono::Duration::minutes(1));
        let found = compare(
            &[ops[0].clone(), before],
            &[effect(1, "pay_0", 100, 0), effect(2, "pay_y", 5, 31)],
            window(),
        );
        assert!(found.missing.is_empty(), "{found:?}");
        assert!(found.unexpected.is_empty(), "{found:?}");
        assert_eq!(found.expected, 1);
    }

    #[test]
    fn effects_in_flight_pair_but_are_never_unexpected() {
        let mut pending = effect(1, "pay_1", 700, 2);
        pending.applied = false;
        let found = compare(&[op("re_1", "pay_1", 700, 1)], &[pending.clone()], window());
        assert!(found.missing.is_empty());
        let found = compare(&[], &[pending], window());
        assert!(found.unexpected.is_empty());
        assert_eq!(found.applied, 0);
    }

    #[test]
    fn a_discrepancy_has_the_same_case_on_every_run_and_one_per_subject() {
        let a = case_id("missing_effect", "norefid/re_1");
        assert_eq!(a, case_id("missing_effect", "norefid/re_1"));
        assert_ne!(a, case_id("missing_effect", "norefid/re_2"));
        assert_ne!(a, case_id("unexpected_effect", "norefid/re_1"));
        assert_eq!(a.get_version_num(), 8);
    }

    fn ran(from: u32, to: u32, failed: bool) -> Compared {
        Compared {
            window: Window {
                from: at(from),
                to: at(to),
            },
            failed,
        }
    }

    #[test]
    fn the_reconciled_time_ends_where_the_latest_run_without_error_ended() {
        let runs = [ran(0, 10, false), ran(10, 20, false), ran(20, 30, true)];
        assert_eq!(reconciled_until(&runs, at(0)), Some(at(20)));
        assert_eq!(reconciled_until(&[], at(0)), None);
    }

    #[test]
    fn a_failed_window_no_run_compared_holds_the_reconciled_time_back() {
        // A periodic window failed, then a run by hand compared a later hour
        let runs = [ran(0, 10, false), ran(10, 20, true), ran(30, 40, false)];
        assert_eq!(reconciled_until(&runs, at(0)), Some(at(10)));
        // Part of it compared since: only what is left holds it back
        let runs = [
            ran(0, 10, false),
            ran(10, 20, true),
            ran(5, 15, false),
            ran(30, 40, false),
        ];
        assert_eq!(reconciled_until(&runs, at(0)), Some(at(15)));
        // All of it compared since, over two runs: nothing holds it back
        let runs = [ran(10, 20, true), ran(8, 14, false), ran(14, 25, false)];
        assert_eq!(reconciled_until(&runs, at(0)), Some(at(25)));
        // The very first run failed: the next one starts where it did
        assert_eq!(reconciled_until(&[ran(10, 20, true)], at(0)), Some(at(10)));
    }

    #[test]
    fn what_a_failed_run_left_before_the_reconciled_time_began_holds_nothing_back() {
        // A month asked for by hand failed; the hours since were compared
        let runs = [ran(0, 40, true), ran(20, 30, false), ran(30, 40, false)];
        assert_eq!(reconciled_until(&runs, at(20)), Some(at(40)));
        // After it began, what no run compared still holds it back
        assert_eq!(reconciled_until(&runs, at(10)), Some(at(10)));
    }

    #[test]
    fn an_operation_made_by_hand_and_its_webhook_seal_alike_only_on_all_three_fields() {
        let secret = KeySecret::from_bytes(b"0123456789abcdef").expect("secret");
        let seal = |resource, amount: Value, currency: Value| {
            hand_made_seal(
                &secret,
                "norefid",
                (resource, Some(&amount), Some(&currency)),
            )
        };
        let made = seal(Some("pay_1"), json!(700), json!("EUR")).expect("sealed");
        assert_eq!(
            seal(Some("pay_1"), json!(700), json!("eur")),
            Some(made.clone())
        );
        assert!(!made.contains("pay_1") && !made.contains("700"), "{made}");
        for other in [
            seal(Some("pay_2"), json!(700), json!("EUR")),
            seal(Some("pay_1"), json!(701), json!("EUR")),
            seal(Some("pay_1"), json!(700), json!("USD")),
        ] {
            assert_ne!(other, Some(made.clone()));
        }
        assert_eq!(seal(None, json!(700), json!("EUR")), None);
        assert_eq!(seal(Some("pay_1"), Value::Null, json!("EUR")), None);
        assert_eq!(seal(Some("pay_1"), json!(700), json!(978)), None);
        let elsewhere = hand_made_seal(
            &secret,
            "other",
            (Some("pay_1"), Some(&json!(700)), Some(&json!("EUR"))),
        );
        assert_ne!(elsewhere, Some(made));
    }
}
