//! `unicity tokens`: API tokens for `/api`. A token is printed once, on
//! standard output alone (the notice goes to standard error, so a script can
//! capture it); only its hash is kept, so it is never listed.

use clap::Subcommand;
use sea_orm::DatabaseConnection;

use crate::auth::Role;
use crate::domain::journal::Actor;
use crate::services::access;

#[derive(Subcommand)]
pub(super) enum TokensCommand {
    /// Issue a token; it is printed once, only its hash is kept.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        role: Role,
        #[arg(long)]
        expires_days: Option<u32>,
    },
    /// List tokens (never the tokens themselves).
    List,
    /// Revoke a token.
    Revoke { name: String },
}

pub(super) async fn run(db: &DatabaseConnection, command: &TokensCommand) -> anyhow::Result<()> {
    match command {
        TokensCommand::Create {
            name,
            role,
            expires_days,
        } => {
            let token = access::issue_token(db, name, *role, *expires_days, Actor::Cli).await?;
            eprintln!("token {name} ({role}) issued; it is shown once:");
            println!("{token}");
        }
        TokensCommand::List => {
            let now = chrono::Utc::now();
            for t in access::tokens(db).await? {
                let state = match (t.revoked_at, t.expires_at) {
                    (Some(_), _) => "revoked",
                    (None, Some(at)) if at <= now => "expired",
                    _ => "active",
                };
                let expires = t.expires_at.map(|t| t.to_rfc3339());
                println!(
                    "{}\t{}\t{state}\tcreated {}\texpires {}",
                    t.name,
                    t.role,
                    t.created_at.to_rfc3339(),
                    expires.as_deref().unwrap_or("never")
                );
            }
        }
        TokensCommand::Revoke { name } => match access::revoke_token(db, name, Actor::Cli).await? {
            Some(withdrawn) => println!("token {name} revoked.{}", withdrawn.sentence("it")),
            None => println!("token {name} was already revoked"),
        },
    }
    Ok(())
}
