//! The decision in one plain sentence, for the support page: what happened
//! to the delivery and why, in words a support agent can repeat to a
//! customer, naming the delivery and effect it rests on.
//!
//! Unlike `summary` (stored in the journal, ids in full), the sentence comes
//! in parts so that a page can link the deliveries and effects it names.
//! Display only: never parse it, never store it in place of the codes.

use serde::Serialize;
use uuid::Uuid;

use super::codes::{Action, Reason};
use super::outcome::Decision;
use crate::domain::cases::Resolution;

/// One part of a plain sentence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Text(String),
    /// A delivery, for a link to its page.
    Delivery(Uuid),
    /// An effect in the ledger.
    Effect(Uuid),
}

impl Decision {
    /// "Ignored: it asks for the same effect as delivery ‹D›, already applied
    /// as effect ‹E›, so nothing was done twice."
    pub fn plain(&self) -> Vec<Part> {
        self.plain_then(None)
    }

    /// The sentence once the case this decision opened was resolved: where
    /// it would say a person must decide, it says how the case ended.
    pub fn plain_then(&self, resolved: Option<Resolution>) -> Vec<Part> {
        let mut parts = Sentence::default();
        parts.text(match self.action {
            Action::Process if self.flagged_for_correction => "Processed, and flagged: ",
            Action::Process => "Processed: ",
            Action::Ignore => "Ignored: ",
            Action::Quarantine => "Quarantined: ",
            Action::Reconcile => "Held for reconciliation: ",
            Action::Defer => "Deferred: ",
        });
        let next = match resolved {
            Some(resolution) => format!("its case was resolved: {}", resolution.plain()),
            None if self.lookup_first => {
                "the provider's API is asked first, else a person decides".to_owned()
            }
            None => "a person must decide".to_owned(),
        };
        let missing = self.missing_fields.join(", ");
        let differ: Vec<&str> = self.differences.iter().map(|d| d.field.as_str()).collect();
        let differ = differ.join(", ");
        let d = self.reference_delivery;
        let e = self.effect_id;
        match self.reason {
            Reason::NewKey => parts.text(
                "it is the first delivery asking for this effect, so the effect is applied once.",
            ),
            Reason::DuplicateOfApplied => parts
                .text("it asks for the same effect as ")
                .delivery(d)
                .text(", already applied as ")
                .effect(e)
                .text(", so nothing was done twice."),
            Reason::LateReplayFoundEffect => parts
                .text("it arrived after its key's horizon, but the effects ledger shows that ")
                .delivery(d)
                .text(" already applied it as ")
                .effect(e)
                .text(", so nothing was done twice."),
            Reason::DiscriminantsDiffer => {
                parts
                    .text("it has the same key as ")
                    .delivery(d)
                    .text(&format!(
                        " but its {differ} differ, so it may be another operation; {next}."
                    ))
            }
            Reason::TransportIdCollision => parts
                .text("its delivery id was already used by ")
                .delivery(d)
                .text(&format!(
                    " with a different body ({differ}): it is not the retry its id claims; {next}."
                )),
            Reason::WeakMatchCritical => parts.text("it looks like ").delivery(d).text(&format!(
                ", but only a weak key matches and the effect moves money or rights: \
                 a retry and a second legitimate operation look the same; {next}."
            )),
            Reason::MediumMatchCritical => parts.text("it looks like ").delivery(d).text(&format!(
                ", but a medium key is not proof enough for an effect that moves money \
                 or rights; {next}."
            )),
            Reason::WeakMatchReversibleFlagged => parts.text("it looks like ").delivery(d).text(
                ", but only a weak key matches; the effect is reversible, so it was applied \
                 and flagged for later correction.",
            ),
            Reason::LeaseAlive => parts.delivery(d).text(
                " is applying the same effect right now; this delivery is decided again \
                 once that attempt settles.",
            ),
            Reason::OutcomeUnknown => parts.text("the attempt of ").delivery(d).text(&format!(
                " expired without saying whether the effect happened, and it is never \
                     re-run blindly; {next}."
            )),
            Reason::BreakerTripped => parts
                .text("it would be a duplicate of ")
                .delivery(d)
                .text(" (")
                .effect(e)
                .text(&format!(
                    "), but its strategy's collision breaker is tripped, so duplicates are not \
                     ignored automatically; {next}."
                )),
            Reason::EvidencePurged => parts.text(&format!(
                "it arrived after its key's horizon and the evidence of any earlier effect \
                 was purged, so an approval is needed; {next}."
            )),
            Reason::RequiredFieldsMissing => parts
                .text(&format!(
                    "fields needed to identify it are missing ({missing}) and the effect \
                     moves money or rights"
                ))
                .unchecked(d, e)
                .text(&format!("; {next}.")),
            Reason::RequiredFieldsMissingFlagged => parts
                .text(&format!(
                    "fields needed to identify it are missing ({missing})"
                ))
                .unchecked(d, e)
                .text(
                    "; the effect is reversible, so it was applied and flagged for later \
                     correction.",
                ),
            Reason::PreviousAttemptFailedWithoutEffect => parts
                .text("the earlier attempt of ")
                .delivery(d)
                .text(" failed without any effect, so applying it now cannot do anything twice."),
            Reason::PreviousAttemptPartiallyApplied => parts
                .text("the earlier attempt of ")
                .delivery(d)
                .text(&format!(
                    " failed after a partial effect, and it is never re-run blindly; {next}."
                )),
            Reason::UnparseableBody => parts.text(
                "its body is not readable JSON (or holds a string with the character \
                 U+0000, which cannot be stored as text), so nothing can identify it; it is \
                 kept, nothing is dropped.",
            ),
            Reason::BodyTooDeep => parts.text(&format!(
                "its body nests deeper than {} levels; it is kept raw and never keyed.",
                crate::domain::strict_json::MAX_BODY_DEPTH
            )),
            Reason::DuplicateMemberNames => parts.text(
                "its body names a member twice in one object, and parsers disagree on which \
                 value counts; it is kept raw and never keyed.",
            ),
            Reason::MadeByHand => {
                parts.text("it would be applied");
                if d.is_some() {
                    parts.text(" (its key leads to ").delivery(d);
                    if e.is_some() {
                        parts.text(", ").effect(e);
                    }
                    parts.text(")");
                }
                parts.text(&format!(
                    ", but an operation with the same resource, amount and currency was \
                     recorded as made by hand outside Unicity; this may be that operation's \
                     late webhook, and applying it could pay twice; {next}."
                ))
            }
            Reason::LookAlikeKeyedOtherwise => {
                parts.text("nothing was applied under its key, but ");
                match (d.is_some(), e.is_some()) {
                    (true, true) => parts.effect(e).text(" of ").delivery(d),
                    (true, false) => parts.text("the effect of ").delivery(d),
                    _ => parts.text("an effect of the read model's unread tail"),
                };
                parts.text(&format!(
                    " has the same type, resource and discriminating fields under the key of \
                     a strategy above this delivery's, which a field this delivery lacks \
                     skipped; it may be the same operation sent with that field on another \
                     attempt, and applying it could pay twice; {next}."
                ))
            }
            Reason::UnknownEventType => parts.text(
                "its event type is unknown, so no strategy can identify it; it is kept, \
                 nothing is dropped.",
            ),
            Reason::NoStrategy => parts.text(
                "no key strategy applies to this event type; it is kept, nothing is dropped.",
            ),
        };
        parts.0
    }
}

#[derive(Default)]
struct Sentence(Vec<Part>);

impl Sentence {
    fn text(&mut self, text: &str) -> &mut Self {
        self.0.push(Part::Text(text.to_owned()));
        self
    }

    fn delivery(&mut self, id: Option<Uuid>) -> &mut Self {
        match id {
            Some(id) => self.0.push(Part::Delivery(id)),
            None => self.0.push(Part::Text("an earlier delivery".to_owned())),
        }
        self
    }

    /// The earlier delivery (and effect) a match could not be checked against.
    fn unchecked(&mut self, delivery: Option<Uuid>, effect: Option<Uuid>) -> &mut Self {
        if delivery.is_none() {
            return self;
        }
        self.text(", so the match with ").delivery(delivery);
        if effect.is_some() {
            self.text(" (").effect(effect).text(")");
        }
        self.text(" cannot be checked")
    }

    fn effect(&mut self, id: Option<Uuid>) -> &mut Self {
        match id {
            Some(id) => self.0.push(Part::Effect(id)),
            None => self.0.push(Part::Text("an effect".to_owned())),
        }
        self
    }
}
