//! The look-up policy: which of the provider's operations are this
//! delivery's, and what the ones not yet accounted for settle.
//!
//! 1. **Comparable or nothing.** An operation is this delivery's only if it
//!    is about the delivery's resource and agrees with every discriminant of
//!    the strategy that keyed it, each compared with the operation field the
//!    look-up's configuration names for it (`compare`). A discriminant the
//!    configuration does not map, a delivery missing one, or a resource the
//!    look-up cannot read: nothing is settled, a person decides, and the
//!    case says why. A look-up never trusts its URL to have named the right
//!    resource: what comes back is checked.
//! 2. **Every effect counts.** Against the matching operations stand every
//!    effect under the key (its own and those applied as distinct), whatever
//!    their state — reserved, pending, unknown or applied — read in the
//!    transaction that acts on the verdict.
//! 3. **One operation, one effect.** An operation already cited by an
//!    effect is consumed; the one cited now is the first matching operation
//!    neither consumed nor standing for an effect that cites none (those are
//!    taken to be the earliest, in the provider's order).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::journal::ProviderOperation;
use super::reconcile::did_not_happen;

/// A field of a provider's operation a discriminant can be compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationField {
    /// The operation's own id (a strategy discriminating on the provider's
    /// reference).
    Id,
    Resource,
    Amount,
    Currency,
}

impl OperationField {
    pub const ALL: [Self; 4] = [Self::Id, Self::Resource, Self::Amount, Self::Currency];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Id => "id",
            Self::Resource => "resource",
            Self::Amount => "amount",
            Self::Currency => "currency",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == text)
    }

    fn of(self, op: &ProviderOperation) -> Option<String> {
        match self {
            Self::Id => Some(op.id.clone()),
            Self::Resource => op.resource.clone(),
            Self::Amount => op.amount.as_ref().and_then(text),
            Self::Currency => op.currency.as_ref().and_then(text),
        }
    }
}

/// What the delivery says an operation of its own must agree with.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The resource the delivery is about (a payment), read from its body by
    /// the look-up's configuration; `None` when it cannot be read.
    pub resource: Option<&'a str>,
    /// The strategy's discriminants, by name, as the key recorded them.
    pub discriminants: &'a BTreeMap<String, Value>,
    /// Discriminants the delivery lacks.
    pub missing: &'a [String],
}

/// The provider's operations that are this delivery's, in the provider's
/// order; `Err` with the reason when they cannot be told apart from others.
pub fn matching(
    operations: &[ProviderOperation],
    compare: &BTreeMap<String, OperationField>,
    delivery: Delivery<'_>,
) -> Result<Vec<String>, String> {
    let Some(resource) = delivery.resource else {
        return Err("the look-up cannot read which resource the delivery is about".to_owned());
    };
    if let Some(name) = delivery.missing.first() {
        return Err(format!(
            "the delivery has no `{name}`: the provider's operations cannot be compared with it"
        ));
    }
    let mut pairs = Vec::with_capacity(delivery.discriminants.len());
    for (name, value) in delivery.discriminants {
        let Some(field) = compare.get(name) else {
            return Err(format!(
                "the look-up does not say which field of the provider's operations \
                 to compare with the discriminant `{name}`"
            ));
        };
        let Some(expected) = text(value) else {
            return Err(format!(
                "the discriminant `{name}` is not a value an operation can be compared with"
            ));
        };
        pairs.push((*field, expected));
    }
    Ok(once_each(operations)
        .iter()
        .filter(|op| !op.status.as_deref().is_some_and(did_not_happen))
        .filter(|op| op.resource.as_deref() == Some(resource))
        .filter(|op| {
            pairs
                .iter()
                .all(|(field, expected)| field.of(op).is_some_and(|v| same(*field, &v, expected)))
        })
        .map(|op| op.id.clone())
        .collect())
}

/// Each operation once, where it was first listed: an answer may list one
/// operation twice (a status history, a path that reaches it two ways).
/// One any listing says did not happen did not (a refund `succeeded` then
/// `failed`, in either order: histories run oldest or newest first);
/// otherwise it reads as listed last.
pub fn once_each(operations: &[ProviderOperation]) -> Vec<ProviderOperation> {
    let mut each: Vec<ProviderOperation> = Vec::with_capacity(operations.len());
    let mut at: BTreeMap<&str, usize> = BTreeMap::new();
    let undone = |op: &ProviderOperation| op.status.as_deref().is_some_and(did_not_happen);
    for op in operations {
        match at.get(op.id.as_str()) {
            Some(&i) if undone(&each[i]) => {}
            Some(&i) => each[i] = op.clone(),
            None => {
                at.insert(op.id.as_str(), each.len());
                each.push(op.clone());
            }
        }
    }
    each
}

fn same(field: OperationField, found: &str, expected: &str) -> bool {
    match field {
        // Providers spell currencies in either case (Stripe: `eur`).
        OperationField::Currency => found.eq_ignore_ascii_case(expected),
        _ => found == expected,
    }
}

/// A string or a number as text; anything else cannot be compared.
fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// What Unicity already did under the delivery's key, read in the
/// transaction that acts on the verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accounted {
    /// Effects under the key in any state but failed.
    pub effects: usize,
    /// Provider operations those effects cite.
    pub cited: BTreeSet<String>,
    /// Provider operations cited by effects under other keys: not this
    /// delivery's to cite.
    pub cited_elsewhere: BTreeSet<String>,
    /// Provider operations cited by effects under the key that failed: the
    /// downstream refused them, and this delivery may be one sent again.
    pub failed: BTreeSet<String>,
    /// Provider operations a person recorded as made by hand (a missing
    /// effect closed `made_by_hand`): this delivery may be one's webhook.
    pub made_by_hand: BTreeSet<String>,
}

/// What the provider's authoritative answer settles, for a case that asks
/// whether a delivery is a second legitimate operation or a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupVerdict {
    /// The provider lists more matching operations than there are effects:
    /// this delivery is one more, applied for the operation `reference`.
    ProcessAsDistinct { reference: String },
    /// As many as there are effects: this delivery is a retry.
    ConfirmDuplicate,
    /// Anything else (fewer than there are effects, nothing listed, the API
    /// failed, nothing comparable): a person decides, with the look-up on the
    /// case and this reason.
    ForAPerson { why: String },
}

impl LookupVerdict {
    pub fn person(why: impl Into<String>) -> Self {
        Self::ForAPerson { why: why.into() }
    }

    /// The stable code journaled with the look-up.
    pub fn code(&self) -> &'static str {
        match self {
            Self::ProcessAsDistinct { .. } => "process_as_distinct",
            Self::ConfirmDuplicate => "confirm_duplicate",
            Self::ForAPerson { .. } => "for_a_person",
        }
    }
}

/// The verdict on `matching` (operation ids, the provider's order) given
/// what is `accounted` for under the key.
pub fn judge(matching: &[String], accounted: &Accounted) -> LookupVerdict {
    use std::cmp::Ordering;
    // Which operation the delivery is cannot be told; one whose effect the
    // downstream refused may be it, sent again, and is owed.
    if let Some(failed) = matching.iter().find(|id| accounted.failed.contains(*id)) {
        return LookupVerdict::person(format!(
            "the effect applied under this key for the provider's operation {failed} failed; \
             this delivery may be that operation sent again"
        ));
    }
    // Nothing under any key cites an operation made by hand: counted as
    // owed, it would be paid a second time.
    if let Some(made) = matching
        .iter()
        .find(|id| accounted.made_by_hand.contains(*id))
    {
        return LookupVerdict::person(format!(
            "the provider's operation {made} was made by hand outside Unicity; this delivery \
             may be its webhook"
        ));
    }
    let available: Vec<&String> = matching
        .iter()
        .filter(|id| !accounted.cited_elsewhere.contains(*id))
        .collect();
    match available.len().cmp(&accounted.effects) {
        Ordering::Greater => {
            let cited = available
                .iter()
                .filter(|id| accounted.cited.contains(**id))
                .count();
            // Effects that cite nothing stand for the earliest operations.
            let uncited = accounted.effects - cited.min(accounted.effects);
            match available
                .iter()
                .filter(|id| !accounted.cited.contains(**id))
                .nth(uncited)
            {
                Some(reference) => LookupVerdict::ProcessAsDistinct {
                    reference: (*reference).clone(),
                },
                None => LookupVerdict::person(
                    "the provider's operations and the effects' references do not add up",
                ),
            }
        }
        Ordering::Equal if accounted.effects > 0 => LookupVerdict::ConfirmDuplicate,
        Ordering::Equal => LookupVerdict::person("the provider lists no such operation"),
        Ordering::Less => LookupVerdict::person(
            "the provider lists fewer matching operations than there are effects",
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("re_{i}")).collect()
    }

    fn effects(n: usize, cited: &[&str]) -> Accounted {
        Accounted {
            effects: n,
            cited: cited.iter().map(|s| s.to_string()).collect(),
            cited_elsewhere: BTreeSet::new(),
            failed: BTreeSet::new(),
            made_by_hand: BTreeSet::new(),
        }
    }

    fn op(id: &str, resource: &str, amount: i64, currency: &str) -> ProviderOperation {
        ProviderOperation {
            id: id.to_owned(),
            amount: Some(json!(amount)),
            currency: Some(json!(currency)),
            status: Some("succeeded".to_owned()),
            resource: Some(resource.to_owned()),
            created_at: None,
        }
    }

    fn compare(pairs: &[(&str, OperationField)]) -> BTreeMap<String, OperationField> {
        pairs.iter().map(|(n, f)| (n.to_string(), *f)).collect()
    }

    #[test]
    fn given_more_operations_than_effects_then_process_with_the_first_one_not_accounted_for() {
        assert_eq!(
            judge(&ids(2), &effects(1, &[])),
            LookupVerdict::ProcessAsDistinct {
                reference: "re_2".into()
            }
        );
    }

    #[test]
    fn given_as_many_effects_as_operations_then_a_duplicate_whatever_their_state() {
        // A pending second effect counts as much as an applied one: the
        // look-up of a retry sent while it is in flight confirms a duplicate.
        assert_eq!(
            judge(&ids(2), &effects(2, &["re_2"])),
            LookupVerdict::ConfirmDuplicate
        );
        assert_eq!(
            judge(&ids(1), &effects(1, &[])),
            LookupVerdict::ConfirmDuplicate
        );
    }

    #[test]
    fn given_an_operation_already_cited_then_it_is_never_cited_again() {
        // The first effect cites nothing, the second cited re_3: the next
        // one available is re_2.
        assert_eq!(
            judge(&ids(3), &effects(2, &["re_3"])),
            LookupVerdict::ProcessAsDistinct {
                reference: "re_2".into()
            }
        );
    }

    #[test]
    fn given_an_operation_cited_under_another_key_then_it_is_not_this_deliverys() {
        let mut accounted = effects(1, &[]);
        accounted.cited_elsewhere.insert("re_2".to_owned());
        assert_eq!(judge(&ids(2), &accounted), LookupVerdict::ConfirmDuplicate);
    }

    #[test]
    fn given_fewer_or_none_then_a_person_decides() {
        assert!(matches!(
            judge(&ids(1), &effects(2, &[])),
            LookupVerdict::ForAPerson { .. }
        ));
        assert!(matches!(
            judge(&[], &effects(0, &[])),
            LookupVerdict::ForAPerson { .. }
        ));
    }

    #[test]
    fn only_operations_of_the_deliverys_resource_and_discriminants_match() {
        let discriminants = [
            ("value".to_owned(), json!(700)),
            ("ccy".to_owned(), json!("EUR")),
        ]
        .into();
        let delivery = Delivery {
            resource: Some("pay_1"),
            discriminants: &discriminants,
            missing: &[],
        };
        let ops = [
            op("re_1", "pay_1", 700, "eur"),
            op("re_2", "pay_1", 900, "EUR"),
            op("re_3", "pay_2", 700, "EUR"),
        ];
        let mapping = compare(&[
            ("value", OperationField::Amount),
            ("ccy", OperationField::Currency),
        ]);
        assert_eq!(matching(&ops, &mapping, delivery), Ok(vec!["re_1".into()]));
    }

    #[test]
    fn a_discriminant_the_look_up_cannot_compare_settles_nothing() {
        let discriminants = [
            ("value".to_owned(), json!(700)),
            ("ccy".to_owned(), json!("EUR")),
        ]
        .into();
        let delivery = Delivery {
            resource: Some("pay_1"),
            discriminants: &discriminants,
            missing: &[],
        };
        let ops = [op("re_1", "pay_1", 700, "EUR")];
        let only_amount = compare(&[("value", OperationField::Amount)]);
        let why = matching(&ops, &only_amount, delivery).unwrap_err();
        assert!(why.contains("`ccy`"), "{why}");
        // Named `amount` and `currency` is no exception.
        let named = [("amount".to_owned(), json!(700))].into();
        let delivery = Delivery {
            discriminants: &named,
            ..delivery
        };
        assert!(matching(&ops, &BTreeMap::new(), delivery).is_err());
    }

    #[test]
    fn an_unknown_resource_or_a_missing_discriminant_settles_nothing() {
        let discriminants = BTreeMap::new();
        let unknown = Delivery {
            resource: None,
            discriminants: &discriminants,
            missing: &[],
        };
        assert!(matching(&[], &BTreeMap::new(), unknown).is_err());
        let missing = ["amount".to_owned()];
        let lacking = Delivery {
            resource: Some("pay_1"),
            discriminants: &discriminants,
            missing: &missing,
        };
        assert!(matching(&[], &BTreeMap::new(), lacking).is_err());
    }

    #[test]
    fn an_operation_that_did_not_happen_or_names_no_resource_is_not_the_deliverys() {
        let discriminants = BTreeMap::new();
        let delivery = Delivery {
            resource: Some("pay_1"),
            discriminants: &discriminants,
            missing: &[],
        };
        let mut failed = op("re_1", "pay_1", 700, "EUR");
        failed.status = Some("failed".to_owned());
        let mut nameless = op("re_2", "pay_1", 700, "EUR");
        nameless.resource = None;
        assert_eq!(
            matching(&[failed, nameless], &BTreeMap::new(), delivery),
            Ok(vec![])
        );
    }

    #[test]
    fn an_operation_the_answer_lists_twice_is_one_operation() {
        // A status history: the refund pending, then succeeded, one id
        let discriminants = BTreeMap::new();
        let delivery = Delivery {
            resource: Some("pay_1"),
            discriminants: &discriminants,
            missing: &[],
        };
        let mut pending = op("re_1", "pay_1", 700, "EUR");
        pending.status = Some("pending".to_owned());
        let listed = [pending.clone(), op("re_1", "pay_1", 700, "EUR")];
        let found = matching(&listed, &BTreeMap::new(), delivery);
        assert_eq!(found, Ok(vec!["re_1".to_owned()]));
        // A history that ends failed: it did not happen
        let mut failed = op("re_1", "pay_1", 700, "EUR");
        failed.status = Some("failed".to_owned());
        let ended = matching(
            &[pending.clone(), failed.clone()],
            &BTreeMap::new(),
            delivery,
        );
        assert_eq!(ended, Ok(vec![]));
        // newest first alike
        let ended = matching(&[failed, pending], &BTreeMap::new(), delivery);
        assert_eq!(ended, Ok(vec![]));
        // One effect stands for it: the delivery is a retry
        let found = found.unwrap_or_default();
        assert_eq!(
            judge(&found, &effects(1, &[])),
            LookupVerdict::ConfirmDuplicate
        );
    }

    #[test]
    fn a_status_that_says_it_did_not_happen_is_read_in_any_case() {
        let discriminants = BTreeMap::new();
        let delivery = Delivery {
            resource: Some("pay_1"),
            discriminants: &discriminants,
            missing: &[],
        };
        let with = |id: &str, status: &str| {
            let mut listed = op(id, "pay_1", 700, "EUR");
            listed.status = Some(status.to_owned());
            listed
        };
        let listed = [
            with("re_0", "FAILED"),
            with("re_1", "Cancelled"),
            with("re_2", "REJECTED"),
            with("re_3", "declined"),
            with("re_4", "COMPLETED"),
        ];
        assert_eq!(
            matching(&listed, &BTreeMap::new(), delivery),
            Ok(vec!["re_4".to_owned()])
        );
    }

    #[test]
    fn given_an_operation_whose_effect_under_the_key_failed_then_a_person_decides() {
        // re_1's refund applied, re_2's refused by the downstream
        let mut accounted = effects(1, &[]);
        accounted.failed.insert("re_2".to_owned());
        let verdict = judge(&ids(2), &accounted);
        assert!(
            matches!(&verdict, LookupVerdict::ForAPerson { why } if why.contains("re_2")),
            "{verdict:?}"
        );
    }

    #[test]
    fn given_an_operation_made_by_hand_then_a_person_decides_instead_of_paying_it_again() {
        // re_1's refund applied and cites it; re_2 was refunded by hand
        let mut accounted = effects(1, &["re_1"]);
        assert_eq!(
            judge(&ids(2), &accounted),
            LookupVerdict::ProcessAsDistinct {
                reference: "re_2".to_owned()
            }
        );
        accounted.made_by_hand.insert("re_2".to_owned());
        let verdict = judge(&ids(2), &accounted);
        assert!(
            matches!(&verdict, LookupVerdict::ForAPerson { why } if why.contains("re_2")),
            "{verdict:?}"
        );
    }
}
