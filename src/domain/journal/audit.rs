//! The audit trail: which journal events are something a person (or an API
//! token, or the host's command line) did, and each said as who did what.
//! The journal is the record; the audit page reads it through this.

use super::{Actor, JournalEvent};

/// The stored names of the events the audit trail lists.
pub const AUDITED: [&str; 20] = [
    "OperatorLoggedIn",
    "LoginFailed",
    "OperatorLoggedOut",
    "OperatorCreated",
    "OperatorDisabled",
    "OperatorRoleChanged",
    "OperatorPasswordChanged",
    "TokenIssued",
    "TokenRevoked",
    "SetupCompleted",
    "CaseResolved",
    "CaseCommented",
    "CaseAssigned",
    "RawBodyRead",
    "FixtureExported",
    "StrategyReset",
    "LegacyEffectsImported",
    "PasswordLinkIssued",
    "LookupPerformed",
    "StatusLookupPerformed",
];

/// Who acted, as the event names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// An operator's or API token's name.
    Named(String),
    /// An operator's or API token's id (events that store the id only).
    Id(String),
    /// The command line on the host, the first-run setup link, a look-up.
    System(&'static str),
    /// A name no operator has, typed at sign-in: its keyed tag as journaled,
    /// or, in refusals journaled before tags, what was typed (never shown).
    Unknown(String),
}

/// One audited action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audited {
    pub who: Who,
    /// A stable code: the event's stored name in snake case.
    pub kind: &'static str,
    /// What was done, in a sentence.
    pub what: String,
    pub case_id: Option<uuid::Uuid>,
}

fn actor(by: &Actor) -> Who {
    match by {
        Actor::Operator { name, .. } | Actor::Token { name, .. } => Who::Named(name.clone()),
        Actor::Cli => Who::System("the command line"),
        Actor::Setup => Who::System("the setup link"),
        Actor::Server => Who::System("the server"),
    }
}

/// An issuer as a sentence names it.
fn issuer_named(issuer: &Actor) -> String {
    match issuer {
        Actor::Operator { name, .. } => format!("operator {name}"),
        Actor::Token { name, .. } => format!("token {name}"),
        Actor::Cli => "the command line".to_owned(),
        Actor::Setup => "the setup link".to_owned(),
        Actor::Server => "the server".to_owned(),
    }
}

/// Who, as stored by the events that keep a string: a signature
/// (`operator:NAME (ROLE, ID)`, `token:NAME (ROLE, ID)`), an id, `cli`, or a
/// look-up.
pub fn stored(by: &str) -> Who {
    let signed = |kind: &str| {
        by.strip_prefix(kind)
            .and_then(|rest| rest.split_once(" ("))
            .map(|(name, _)| name.to_owned())
    };
    if let Some(name) = signed("operator:") {
        return Who::Named(name);
    }
    if let Some(name) = signed("token:") {
        return Who::Named(format!("token {name}"));
    }
    match by {
        "cli" => Who::System("the command line"),
        "lookup" | "look-up" => Who::System("a provider look-up"),
        "engine" => Who::System("the engine, sending a call that never left"),
        id => Who::Id(id.to_owned()),
    }
}

/// The audited action `event` records, if it is one.
pub fn audited(event: &JournalEvent) -> Option<Audited> {
    use JournalEvent as E;
    let (who, kind, what, case_id) = match event {
        E::OperatorLoggedIn(e) => (
            Who::Named(e.name.clone()),
            "signed_in",
            format!(
                "signed in from {}",
                e.client.as_deref().unwrap_or("an unknown address")
            ),
            None,
        ),
        E::LoginFailed(e) => (
            match e.operator_id {
                Some(_) => Who::Named(e.name.clone()),
                None => Who::Unknown(e.name.clone()),
            },
            "sign_in_refused",
            format!(
                "sign-in refused ({}) from {}",
                e.reason.replace('_', " "),
                e.client.as_deref().unwrap_or("an unknown address")
            ),
            None,
        ),
        E::OperatorLoggedOut(e) => (
            Who::Named(e.name.clone()),
            "signed_out",
            "signed out".to_owned(),
            None,
        ),
        E::OperatorCreated(e) => (
            actor(&e.by),
            "operator_added",
            format!("added operator {} as {}", e.name, e.role),
            None,
        ),
        E::OperatorDisabled(e) => (
            actor(&e.by),
            "operator_disabled",
            format!("disabled operator {}", e.name),
            None,
        ),
        E::OperatorRoleChanged(e) => (
            actor(&e.by),
            "role_changed",
            format!("changed {}'s role from {} to {}", e.name, e.from, e.to),
            None,
        ),
        E::OperatorPasswordChanged(e) => (
            actor(&e.by),
            "password_changed",
            format!("set the password of {}", e.name),
            None,
        ),
        E::PasswordLinkIssued(e) => (
            actor(&e.by),
            "password_link_issued",
            format!("handed out a set-password link for {}", e.name),
            None,
        ),
        E::TokenIssued(e) => (
            actor(&e.by),
            "token_issued",
            format!("issued API token {} ({})", e.name, e.role),
            None,
        ),
        E::TokenRevoked(e) => (
            actor(&e.by),
            "token_revoked",
            match &e.issuer_withdrawn {
                Some(issuer) => format!(
                    "revoked API token {}: its issuer, {}, was disabled, demoted or revoked",
                    e.name,
                    issuer_named(issuer)
                ),
                None => format!("revoked API token {}", e.name),
            },
            None,
        ),
        E::SetupCompleted(e) => (
            Who::System("the setup link"),
            "setup_completed",
            format!("created the first admin, {}", e.name),
            None,
        ),
        E::CaseResolved(e) => (
            stored(&e.resolved_by),
            "case_resolved",
            format!(
                "resolved a case: {}",
                e.resolution.as_str().replace('_', " ")
            ),
            Some(e.case_id),
        ),
        E::CaseCommented(e) => (
            stored(&e.commented_by),
            "case_commented",
            "commented on a case".to_owned(),
            Some(e.case_id),
        ),
        E::CaseAssigned(e) => (
            actor(&e.by),
            "case_assigned",
            match &e.assignee {
                Some(name) => format!("assigned a case to {name}"),
                None => "unassigned a case".to_owned(),
            },
            Some(e.case_id),
        ),
        E::LookupPerformed(e) => (
            stored(e.asked_by.as_deref()?),
            "provider_asked",
            match e.verdict.as_str() {
                "" => "asked the provider about a case".to_owned(),
                verdict => format!(
                    "asked the provider about a case: {}",
                    verdict.replace('_', " ")
                ),
            },
            Some(e.case_id),
        ),
        E::StatusLookupPerformed(e) => (
            stored(e.asked_by.as_deref()?),
            "provider_asked",
            format!(
                "asked the downstream whether an effect was applied: {}",
                e.answer.as_deref().unwrap_or("no answer")
            ),
            Some(e.case_id),
        ),
        E::RawBodyRead(e) => (
            e.operator
                .as_deref()
                .map_or(Who::System("someone before operator accounts"), stored),
            "raw_body_read",
            "read a delivery's raw body".to_owned(),
            None,
        ),
        E::FixtureExported(e) => (
            stored(&e.by),
            "fixture_exported",
            format!("exported a case as a fixture ({} deliveries)", e.deliveries),
            Some(e.case_id),
        ),
        E::StrategyReset(e) => (
            e.reset_by
                .as_deref()
                .map_or(Who::System("the command line"), stored),
            "breaker_reset",
            format!("reset the breaker of {}", e.strategy),
            None,
        ),
        E::LegacyEffectsImported(e) => (
            Who::System("the command line"),
            "legacy_effects_imported",
            format!(
                "imported {} legacy effects for source {}",
                e.effects.len(),
                e.source
            ),
            None,
        ),
        _ => return None,
    };
    Some(Audited {
        who,
        kind,
        what,
        case_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::journal::{OperatorRoleChanged, RejectionsAggregated};

    #[test]
    fn an_admin_s_role_change_reads_as_who_did_what_to_whom() {
        let event = JournalEvent::OperatorRoleChanged(OperatorRoleChanged {
            operator_id: uuid::Uuid::nil(),
            name: "sam".into(),
            from: "support".into(),
            to: "finance".into(),
            by: Actor::Operator {
                id: uuid::Uuid::nil(),
                name: "ada".into(),
            },
        });
        let audited = audited(&event).expect("audited");
        assert_eq!(audited.who, Who::Named("ada".into()));
        assert_eq!(audited.kind, "role_changed");
        assert_eq!(audited.what, "changed sam's role from support to finance");
        assert!(AUDITED.contains(&event.event_type()));
    }

    #[test]
    fn a_signature_reads_as_the_name_it_signs() {
        assert_eq!(
            stored("operator:fin (finance, 01938f3c-0000-7000-8000-0000000000a1)"),
            Who::Named("fin".into())
        );
        assert_eq!(
            stored("token:ci-bot (engineer, 01938f3c-0000-7000-8000-0000000000a2)"),
            Who::Named("token ci-bot".into())
        );
        assert_eq!(stored("cli"), Who::System("the command line"));
        assert_eq!(stored("0193-a"), Who::Id("0193-a".into()));
    }

    #[test]
    fn what_the_engine_does_on_its_own_is_not_in_the_audit_trail() {
        let event = JournalEvent::RejectionsAggregated(RejectionsAggregated {
            origin: crate::domain::journal::Origin {
                source: "s".into(),
                tenant: "t".into(),
                provider: "p".into(),
                environment: "e".into(),
            },
            window_start: chrono::DateTime::UNIX_EPOCH,
            window_secs: 60,
            reason: "invalid_signature".into(),
            status: 401,
            count: 3,
            bytes: 30,
        });
        assert_eq!(audited(&event), None);
        assert!(!AUDITED.contains(&event.event_type()));
    }
}
