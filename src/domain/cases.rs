//! Cases: what Unicity could not decide safely, and how a person (or, later,
//! the provider's authoritative API) settles it.
//!
//! A case resolves once, one of three ways:
//! * **process as distinct** — the delivery asks for an effect of its own: it
//!   is applied under a key derived from the case (`distinct_key`), never the
//!   colliding key, so the existing effect is untouched and a second
//!   resolution of the same case finds that key taken;
//! * **confirm duplicate** — the delivery is linked to the existing effect;
//!   nothing is applied;
//! * **reject** — nothing is applied;
//! * **made by hand** (a missing effect only) — the operation the provider
//!   made was applied outside Unicity: nothing is applied, and a delivery
//!   with its resource, amount and currency that would be applied is held
//!   for a person instead (`Reason::MadeByHand`): the operation's webhook
//!   may still come, under a key nothing else could find.
//!
//! A case about an effect whose outcome was unknown is also settled by the
//! downstream's own status answer (`services::status`), never by a person's
//! guess: **effect confirmed** (it was applied) or **effect retried** (it was
//! not: applied again under the same key and Idempotency-Key).
//!
//! Every resolution carries a note (who decided and why is the proof).

use serde::{Deserialize, Serialize};

/// Where a case stands, as stored in `cases.status` (the names are frozen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseStatus {
    Open,
    Resolved,
}

impl CaseStatus {
    pub const ALL: [Self; 2] = [Self::Open, Self::Resolved];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Resolved => "resolved",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// How a case was settled; the stored codes are frozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    ProcessAsDistinct,
    ConfirmDuplicate,
    Reject,
    /// The downstream's status answer says the effect was applied.
    EffectConfirmed,
    /// The downstream's status answer says the effect was not applied: it
    /// is applied again under its own key.
    EffectRetried,
    /// A later reconciliation run paired the finding's operation with an
    /// applied effect (a late webhook), or its effect with an operation the
    /// provider lists late: the finding no longer holds.
    EffectFound,
    /// A missing effect's operation was applied outside Unicity: its
    /// look-alikes are held for a person from then on.
    MadeByHand,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProcessAsDistinct => "process_as_distinct",
            Self::ConfirmDuplicate => "confirm_duplicate",
            Self::Reject => "reject",
            Self::EffectConfirmed => "effect_confirmed",
            Self::EffectRetried => "effect_retried",
            Self::EffectFound => "effect_found",
            Self::MadeByHand => "made_by_hand",
        }
    }

    /// How the case ended, in words a support agent can repeat.
    pub fn plain(self) -> &'static str {
        match self {
            Self::ProcessAsDistinct => "processed as a distinct operation",
            Self::ConfirmDuplicate => "confirmed as a duplicate, nothing applied again",
            Self::Reject => "rejected, nothing applied",
            Self::EffectConfirmed => "the downstream confirmed the effect was applied",
            Self::EffectRetried => {
                "the downstream said the effect was not applied, so it was applied again"
            }
            Self::EffectFound => {
                "a later reconciliation run paired the provider's operation with an applied effect"
            }
            Self::MadeByHand => {
                "made by hand outside Unicity; a delivery that looks like it is held for a person"
            }
        }
    }

    /// A resolution a person may ask for (the two settled by a status
    /// answer are not theirs to claim).
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::ProcessAsDistinct,
            Self::ConfirmDuplicate,
            Self::Reject,
            Self::MadeByHand,
        ]
        .into_iter()
        .find(|r| r.as_str() == text)
    }
}

/// What a case needs before it can be resolved a given way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseFacts {
    pub open: bool,
    /// The delivery has a business key and a body to apply an effect with.
    pub can_apply: bool,
    /// An existing effect the delivery may be a duplicate of.
    pub has_existing_effect: bool,
    /// The case waits on an effect whose outcome is unknown: applying another
    /// blindly could pay twice.
    pub outcome_unknown: bool,
    /// A discrepancy reconciliation found (a missing or an unexpected
    /// effect): no delivery asks for anything, there is a finding to close
    /// with the reason it is settled (applied or reversed outside Unicity,
    /// or not due). Nothing is applied from it: an effect applied without
    /// the delivery that asks for it would be keyed by nothing a late
    /// webhook could find, and could be paid twice.
    pub close_only: bool,
    /// A missing effect: an operation the provider made that nothing
    /// applied; a person may record it as made by hand.
    pub missing_effect: bool,
}

/// Why a resolution is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the case is already resolved")]
    AlreadyResolved,
    #[error("a resolution needs a note saying why")]
    NoteRequired,
    #[error("this delivery has no business key or body to apply an effect with")]
    NothingToApply,
    #[error("the effect's outcome is unknown: verify it before applying another")]
    OutcomeUnknown,
    #[error("there is no existing effect to confirm this delivery as a duplicate of")]
    NothingToConfirm,
    #[error("this provider operation already justified another effect")]
    OperationConsumed,
    #[error(
        "another case under this key was already processed as distinct citing no provider operation: cite the operation this one is"
    )]
    CiteAnOperation,
    #[error(
        "this case is a reconciliation finding: it can only be closed, with a reason or, a missing effect, as made by hand"
    )]
    CloseOnly,
    #[error(
        "a person resolves a case as process_as_distinct, confirm_duplicate, reject or made_by_hand"
    )]
    NotAPersonsResolution,
    #[error("only a missing effect's operation can be recorded as made by hand")]
    NotAMissingEffect,
    #[error(
        "an effect that may have moved money already stands for this operation or looks like it (its late webhook, or a citation), or too many look alike to rule it out: it may be paid already; check it, then close it with a reason"
    )]
    OperationPaid,
    #[error(
        "the deliveries read model is behind the journal: whether the operation was paid meanwhile cannot be checked yet; try again in a moment"
    )]
    ReadModelBehind,
    #[error(
        "a delivery that looks like this operation arrived while it was being recorded as made by hand: its late webhook may have been applied; look at it, then try again"
    )]
    LookAlikeArrived,
    #[error(
        "this delivery looks like an operation made by hand: it is processed as distinct only citing the provider operation it is"
    )]
    CiteTheOperation,
    #[error(
        "the provider listed this operation without a resource, an amount and a currency: nothing could recognise its webhook, so close it with a reason"
    )]
    NothingToHoldBy,
    #[error("no enabled operator has this name")]
    NoSuchOperator,
    #[error("more cases than a bulk resolution takes at once")]
    TooManyCases,
    #[error(
        "a provider's operation id has at most 200 characters: cite the id the provider's dashboard shows"
    )]
    ReferenceTooLong,
    #[error(
        "a provider's operation id is printable ASCII with no space: cite the id the provider's dashboard shows, typed or pasted as it is"
    )]
    ReferenceNotAnId,
}

impl Refusal {
    /// Stable snake_case code, as the API answers it.
    pub fn code(&self) -> &'static str {
        match self {
            Self::AlreadyResolved => "case_already_resolved",
            Self::NoteRequired => "note_required",
            Self::NothingToApply => "nothing_to_apply",
            Self::OutcomeUnknown => "outcome_unknown",
            Self::NothingToConfirm => "nothing_to_confirm",
            Self::OperationConsumed => "operation_consumed",
            Self::CiteAnOperation => "cite_an_operation",
            Self::CloseOnly => "close_only",
            Self::NotAPersonsResolution => "not_a_persons_resolution",
            Self::NotAMissingEffect => "not_a_missing_effect",
            Self::OperationPaid => "operation_paid",
            Self::ReadModelBehind => "read_model_behind",
            Self::LookAlikeArrived => "look_alike_arrived",
            Self::CiteTheOperation => "cite_the_operation",
            Self::NothingToHoldBy => "nothing_to_hold_by",
            Self::NoSuchOperator => "no_such_operator",
            Self::TooManyCases => "too_many_cases",
            Self::ReferenceTooLong => "reference_too_long",
            Self::ReferenceNotAnId => "reference_not_an_id",
        }
    }
}

/// Whether `case` may be resolved as `resolution` with `note`.
pub fn check(case: CaseFacts, resolution: Resolution, note: &str) -> Result<(), Refusal> {
    if !case.open {
        return Err(Refusal::AlreadyResolved);
    }
    if note.trim().is_empty() {
        return Err(Refusal::NoteRequired);
    }
    match resolution {
        Resolution::Reject => Ok(()),
        Resolution::MadeByHand if case.missing_effect => Ok(()),
        Resolution::MadeByHand => Err(Refusal::NotAMissingEffect),
        _ if case.close_only => Err(Refusal::CloseOnly),
        Resolution::ProcessAsDistinct if case.outcome_unknown => Err(Refusal::OutcomeUnknown),
        Resolution::ProcessAsDistinct if !case.can_apply => Err(Refusal::NothingToApply),
        Resolution::ConfirmDuplicate if !case.has_existing_effect => Err(Refusal::NothingToConfirm),
        _ => Ok(()),
    }
}

/// The key an effect processed as distinct is applied under: the delivery's
/// key and the case, so that it can never be the colliding key and a case can
/// apply at most one.
pub fn distinct_key(business_key: &str, case_id: uuid::Uuid) -> String {
    format!("{business_key}~case-{case_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_status_reads_back_from_its_stored_name() {
        for status in CaseStatus::ALL {
            assert_eq!(CaseStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(CaseStatus::parse("Open"), None);
    }

    const OPEN: CaseFacts = CaseFacts {
        open: true,
        can_apply: true,
        has_existing_effect: true,
        outcome_unknown: false,
        close_only: false,
        missing_effect: false,
    };

    #[test]
    fn given_a_reconciliation_finding_then_it_can_only_be_closed_with_a_reason() {
        let finding = CaseFacts {
            close_only: true,
            ..OPEN
        };
        for r in [Resolution::ProcessAsDistinct, Resolution::ConfirmDuplicate] {
            assert_eq!(check(finding, r, "x"), Err(Refusal::CloseOnly));
        }
        assert_eq!(
            check(finding, Resolution::Reject, "refunded by hand"),
            Ok(())
        );
        assert_eq!(
            check(finding, Resolution::Reject, " "),
            Err(Refusal::NoteRequired)
        );
        assert_eq!(
            check(finding, Resolution::MadeByHand, "x"),
            Err(Refusal::NotAMissingEffect)
        );
        let missing = CaseFacts {
            missing_effect: true,
            ..finding
        };
        assert_eq!(
            check(missing, Resolution::MadeByHand, "refunded at the bank"),
            Ok(())
        );
        assert_eq!(
            check(missing, Resolution::MadeByHand, ""),
            Err(Refusal::NoteRequired)
        );
        assert_eq!(
            check(OPEN, Resolution::MadeByHand, "x"),
            Err(Refusal::NotAMissingEffect)
        );
    }

    #[test]
    fn given_an_open_case_with_a_note_when_resolved_any_way_then_allowed() {
        for r in [
            Resolution::ProcessAsDistinct,
            Resolution::ConfirmDuplicate,
            Resolution::Reject,
        ] {
            assert_eq!(check(OPEN, r, "provider shows two refunds"), Ok(()));
            assert_eq!(Resolution::parse(r.as_str()), Some(r));
        }
    }

    #[test]
    fn given_a_resolved_case_when_resolved_again_then_refused() {
        let resolved = CaseFacts {
            open: false,
            ..OPEN
        };
        assert_eq!(
            check(resolved, Resolution::Reject, "again"),
            Err(Refusal::AlreadyResolved)
        );
    }

    #[test]
    fn given_no_note_when_resolved_then_refused() {
        assert_eq!(
            check(OPEN, Resolution::Reject, "  "),
            Err(Refusal::NoteRequired)
        );
    }

    #[test]
    fn given_an_unknown_outcome_when_processed_as_distinct_then_refused() {
        let unknown = CaseFacts {
            outcome_unknown: true,
            ..OPEN
        };
        assert_eq!(
            check(unknown, Resolution::ProcessAsDistinct, "x"),
            Err(Refusal::OutcomeUnknown)
        );
        assert_eq!(check(unknown, Resolution::Reject, "x"), Ok(()));
    }

    #[test]
    fn given_nothing_to_apply_or_confirm_when_resolved_so_then_refused() {
        let bare = CaseFacts {
            can_apply: false,
            has_existing_effect: false,
            ..OPEN
        };
        assert_eq!(
            check(bare, Resolution::ProcessAsDistinct, "x"),
            Err(Refusal::NothingToApply)
        );
        assert_eq!(
            check(bare, Resolution::ConfirmDuplicate, "x"),
            Err(Refusal::NothingToConfirm)
        );
    }

    #[test]
    fn a_distinct_key_is_never_the_colliding_key() {
        let case = uuid::Uuid::nil();
        let key = "norefid-refund-fingerprint@1:ab";
        assert_ne!(distinct_key(key, case), key);
        assert!(distinct_key(key, case).starts_with(key));
    }
}
