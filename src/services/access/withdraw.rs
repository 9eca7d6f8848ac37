//! Whoever issued an API token or handed out a set-password link holds its
//! secret. When the issuer stops being trusted to issue — an operator
//! disabled or no longer an admin, a token revoked — what they issued is
//! withdrawn in the same transaction: their unrevoked tokens are revoked
//! (and, in turn, what those tokens issued), their unused links voided.
//! Otherwise an admin about to be disabled could keep their access with a
//! token issued for a script, or with a link for someone else's account.

use chrono::{DateTime, Utc};
use sea_orm::DatabaseConnection;

use super::errors::{AccessError, uuid_of};
use crate::auth::Role;
use crate::domain::journal::{Actor, JournalEvent, TokenRevoked};
use crate::store::access as store;
use crate::store::{Tx, transaction};

/// What was withdrawn with an issuer's trust.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Withdrawn {
    /// The names of the tokens revoked, whoever in the chain issued them.
    pub tokens: Vec<String>,
    /// How many unused set-password links were voided.
    pub links: u64,
    /// The enabled operators whose password was set through a link the
    /// issuer handed out: the issuer may know it (an invitation they
    /// opened themselves). Named for a person to check; left enabled.
    pub to_check: Vec<String>,
}

impl Withdrawn {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.links == 0 && self.to_check.is_empty()
    }

    /// A sentence for the person who made the change, naming the issuer
    /// `issuer` ("they", "it"); empty when nothing was withdrawn.
    pub fn sentence(&self, issuer: &str) -> String {
        let mut parts = Vec::new();
        match self.tokens.as_slice() {
            [] => {}
            [one] => parts.push(format!("API token {one} {issuer} issued is revoked")),
            many => parts.push(format!(
                "API tokens {issuer} issued are revoked: {}",
                many.join(", ")
            )),
        }
        match self.links {
            0 => {}
            1 => parts.push(format!(
                "1 unused set-password link {issuer} handed out is void"
            )),
            n => parts.push(format!(
                "{n} unused set-password links {issuer} handed out are void"
            )),
        }
        if !self.to_check.is_empty() {
            parts.push(format!(
                "check with {}: their password was set through a link {issuer} handed out",
                self.to_check.join(", ")
            ));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" {}.", parts.join("; "))
        }
    }
}

/// Withdraws what `issuer` issued (nothing for the host or the setup
/// link), journaling each token revoked as `by`'s act.
pub(super) async fn withdraw_issued(
    tx: &mut Tx<'_>,
    issuer: Actor,
    by: &Actor,
    now: DateTime<Utc>,
) -> Result<Withdrawn, AccessError> {
    let mut withdrawn = Withdrawn::default();
    let mut issuers = vec![issuer];
    while let Some(issuer) = issuers.pop() {
        let Some(id) = issuer.issuer().map(|id| id.to_string()) else {
            continue;
        };
        withdrawn.links +=
            store::delete_unused_password_links_issued_by(tx.connection(), &id).await?;
        for name in store::operators_set_through_links_of(tx.connection(), &id).await? {
            if !withdrawn.to_check.contains(&name) {
                withdrawn.to_check.push(name);
            }
        }
        for token in store::unrevoked_tokens_issued_by(tx.connection(), &id).await? {
            if !store::revoke_token(tx.connection(), &token.id, now).await? {
                continue;
            }
            let token_id = uuid_of(&token.id)?;
            let event = JournalEvent::TokenRevoked(TokenRevoked {
                token_id,
                name: token.name.clone(),
                by: by.clone(),
                issuer_withdrawn: Some(issuer.clone()),
            });
            tx.record(None, event, now).await?;
            withdrawn.tokens.push(token.name.clone());
            issuers.push(Actor::Token {
                id: token_id,
                name: token.name,
            });
        }
    }
    Ok(withdrawn)
}

/// Withdraws what issuers no longer trusted still have live: an operator
/// disabled or no longer an admin, a token revoked, whose grants predate
/// the rule (issued before 2026-12-08, their issuer found by the upgrade)
/// or were left by a change made outside Unicity. Run by a server as it
/// starts, as its own act (`Actor::Server`); nothing when all is in order.
pub async fn withdraw_untrusted(db: &DatabaseConnection) -> Result<Withdrawn, AccessError> {
    transaction(db, async |tx| {
        let now = Utc::now();
        let mut withdrawn = Withdrawn::default();
        for id in store::issuers_of_live_grants(tx.connection()).await? {
            let Some(issuer) = untrusted(tx, &id).await? else {
                continue;
            };
            let more = withdraw_issued(tx, issuer, &Actor::Server, now).await?;
            withdrawn.tokens.extend(more.tokens);
            withdrawn.links += more.links;
            withdrawn.to_check.extend(more.to_check);
        }
        Ok(withdrawn)
    })
    .await
}

/// The issuer `id` as an actor, when it is no longer trusted to issue.
async fn untrusted(tx: &mut Tx<'_>, id: &str) -> Result<Option<Actor>, AccessError> {
    if let Some(operator) = store::operator_by_id(tx.connection(), id).await? {
        if operator.enabled && operator.role == Role::Admin.as_str() {
            return Ok(None);
        }
        return Ok(Some(Actor::Operator {
            id: uuid_of(&operator.id)?,
            name: operator.name,
        }));
    }
    match store::token_by_id(tx.connection(), id).await? {
        Some(token) if token.revoked_at.is_some() => Ok(Some(Actor::Token {
            id: uuid_of(&token.id)?,
            name: token.name,
        })),
        _ => Ok(None),
    }
}
