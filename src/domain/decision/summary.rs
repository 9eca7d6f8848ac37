//! One sentence a support agent can read aloud: what happened and why, with the proof.
//!
//! Display only: never parse it, never store it in place of the codes. Values shown come
//! from the keys' canonical form, where sensitive fields are already keyed hashes.

use super::codes::{Action, Reason};
use super::outcome::Decision;

impl Decision {
    /// "Ignored: same effect as delivery 0190…, already applied as effect 0190…."
    pub fn summary(&self) -> String {
        let verb = match self.action {
            Action::Process => "Processed",
            Action::Ignore => "Ignored",
            Action::Quarantine => "Quarantined",
            Action::Reconcile => "Held for reconciliation",
            Action::Defer => "Deferred",
        };
        format!("{verb}: {}.", self.why())
    }

    fn why(&self) -> String {
        let delivery = self.delivery();
        let effect = self.effect();
        let matched = self.matched();
        let then = self.next_step();
        match self.reason {
            Reason::NewKey => "nothing existed yet for this key".to_owned(),
            Reason::DuplicateOfApplied => {
                format!("same effect as {delivery}, already applied as {effect}")
            }
            Reason::LateReplayFoundEffect => format!(
                "late replay beyond the key's horizon; the effects ledger shows {delivery} already applied it as {effect}"
            ),
            Reason::DiscriminantsDiffer => format!(
                "same key as {matched} but discriminating fields differ ({})",
                self.differences_text()
            ),
            Reason::TransportIdCollision => format!(
                "the delivery id of {delivery} came back with a different body ({})",
                self.differences_text()
            ),
            Reason::WeakMatchCritical => format!(
                "a weak key matches {matched} on a critical effect, and two legitimate operations can look identical; {then}"
            ),
            Reason::MediumMatchCritical => {
                format!("a medium key matches {matched} on a critical effect; {then}")
            }
            Reason::WeakMatchReversibleFlagged => format!(
                "a weak key matches {matched} on a reversible effect; flagged for later correction"
            ),
            Reason::LeaseAlive => format!(
                "{delivery} holds a live reservation for this key; decided again when it settles"
            ),
            Reason::OutcomeUnknown => format!(
                "the reservation of {delivery} expired and its outcome is unknown; never re-run blindly, {then}"
            ),
            Reason::BreakerTripped => format!(
                "would be a duplicate of {delivery} ({effect}), but the strategy's collision breaker is tripped; {then}"
            ),
            Reason::EvidencePurged => format!(
                "late replay beyond the key's horizon and the evidence was purged; approval needed, {then}"
            ),
            Reason::RequiredFieldsMissing => format!(
                "fields missing on a critical effect ({}){}; {then}",
                self.missing_fields.join(", "),
                self.earlier()
            ),
            Reason::RequiredFieldsMissingFlagged => format!(
                "fields missing on a reversible effect ({}){}; flagged for later correction",
                self.missing_fields.join(", "),
                self.earlier()
            ),
            Reason::PreviousAttemptFailedWithoutEffect => format!(
                "{delivery} failed definitively and is known to have had no effect, so processing again cannot duplicate it"
            ),
            Reason::PreviousAttemptPartiallyApplied => {
                format!("{delivery} failed after a partial effect; never re-run blindly, {then}")
            }
            Reason::UnparseableBody => {
                "the body could not be parsed (not UTF-8, not JSON, or a string holding \
                 U+0000); kept, nothing dropped"
                    .to_owned()
            }
            Reason::BodyTooDeep => format!(
                "the body is nested deeper than {} levels; kept raw, never keyed",
                crate::domain::strict_json::MAX_BODY_DEPTH
            ),
            Reason::DuplicateMemberNames => "the body names a member twice in one object \
                 (RFC 7493): parsers disagree on which value counts; kept raw, never keyed"
                .to_owned(),
            Reason::MadeByHand => format!(
                "it would be applied{}, but an operation with the same resource, amount and \
                 currency was made by hand; this may be its late webhook, {then}",
                match self.reference_delivery {
                    Some(_) => format!(" (its key leads to {})", self.matched()),
                    None => String::new(),
                }
            ),
            Reason::LookAlikeKeyedOtherwise => format!(
                "nothing was applied under its key, but {} has the same type, resource and \
                 discriminating fields under a strategy above it that a field it lacks \
                 skipped; it may be the same operation, {then}",
                match (self.reference_delivery, self.effect_id) {
                    (Some(_), Some(_)) => format!("{effect} of {delivery}"),
                    (Some(_), None) => format!("the effect of {delivery}"),
                    _ => "an effect the read model has not reached".to_owned(),
                }
            ),
            Reason::UnknownEventType => "unknown event type; kept, nothing dropped".to_owned(),
            Reason::NoStrategy => {
                "no key strategy applies to this delivery; kept, nothing dropped".to_owned()
            }
        }
    }

    fn delivery(&self) -> String {
        match self.reference_delivery {
            Some(id) => format!("delivery {id}"),
            None => "an earlier delivery".to_owned(),
        }
    }

    /// What the key already points at, when the reason itself does not name it.
    fn earlier(&self) -> String {
        match (self.reference_delivery, self.effect_id) {
            (Some(delivery), Some(effect)) => {
                format!(
                    ", so the match with delivery {delivery} (effect {effect}) cannot be checked"
                )
            }
            (Some(delivery), None) => {
                format!(", so the match with delivery {delivery} cannot be checked")
            }
            (None, _) => String::new(),
        }
    }

    /// The delivery, and the effect it applied when there is one.
    fn matched(&self) -> String {
        match self.effect_id {
            Some(effect) => format!("{} (effect {effect})", self.delivery()),
            None => self.delivery(),
        }
    }

    fn effect(&self) -> String {
        match self.effect_id {
            Some(id) => format!("effect {id}"),
            None => "an effect".to_owned(),
        }
    }

    fn next_step(&self) -> &'static str {
        if self.lookup_first {
            "ask the provider's API first"
        } else {
            "a human must review it"
        }
    }

    fn differences_text(&self) -> String {
        let parts: Vec<String> = self
            .differences
            .iter()
            .map(|d| format!("{}: {} → {}", d.field, d.existing, d.new))
            .collect();
        parts.join("; ")
    }
}
