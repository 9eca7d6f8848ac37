//! Whoever issued an API token or handed out a set-password link holds its
//! secret. When the issuer stops being trusted to issue — an operator
//! disabled or no longer an admin, a token revoked — what they issued is
//! withdrawn in the same transaction: their unrevoked tokens are revoked
//! (and, in turn, what those tokens issued), their unused links voided.
//! Otherwise an admin about to be disabled could keep their access with a
//! token issued for a script, or with a link for someone else's account.

use chrono::{DateTime, Utc};

use super::errors::{AccessError, uuid_of};
use crate::domain::journal::{Actor, JournalEvent, TokenRevoked};
use crate::store::Tx;
use crate::store::access as store;

/// What was withdrawn with an issuer's trust.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Withdrawn {
    /// The names of the tokens revoked, whoever in the chain issued them.
    pub tokens: Vec<String>,
    /// How many unused set-password links were voided.
    pub links: u64,
}

impl Withdrawn {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.links == 0
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
