//! `unicity users`: operators, the people who sign in to the back-office.
//! Every change is journaled as made by the command line, and a disabled
//! operator or a changed password ends that operator's sessions.

use std::io::IsTerminal;

use anyhow::Context;
use clap::Subcommand;
use sea_orm::DatabaseConnection;
use secrecy::{ExposeSecret, SecretString};

use crate::auth::Role;
use crate::domain::journal::Actor;
use crate::services::access;

#[derive(Subcommand)]
pub(super) enum UsersCommand {
    /// Add an operator. The password is read from standard input when it is
    /// not a terminal, else prompted twice.
    Add {
        name: String,
        /// support, finance, engineer or admin.
        #[arg(long)]
        role: Role,
    },
    /// List operators.
    List,
    /// Disable an operator and end their sessions.
    Disable { name: String },
    /// Set an operator's password (read as for `add`) and end their sessions.
    SetPassword { name: String },
    /// Change an operator's role.
    SetRole { name: String, role: Role },
}

pub(super) async fn run(db: &DatabaseConnection, command: &UsersCommand) -> anyhow::Result<()> {
    match command {
        UsersCommand::Add { name, role } => {
            access::create_operator(db, name, *role, read_password()?, Actor::Cli).await?;
            println!("operator {name} added ({role})");
        }
        UsersCommand::List => {
            for o in access::operators(db).await? {
                let state = if o.enabled { "enabled" } else { "disabled" };
                let last = o.last_login_at.map(|t| t.to_rfc3339());
                println!(
                    "{}\t{}\t{state}\tcreated {}\tlast login {}",
                    o.name,
                    o.role,
                    o.created_at.to_rfc3339(),
                    last.as_deref().unwrap_or("never")
                );
            }
        }
        UsersCommand::Disable { name } => {
            match access::disable_operator(db, name, Actor::Cli).await? {
                Some(withdrawn) => println!(
                    "operator {name} disabled; their sessions ended.{}",
                    withdrawn.sentence("they")
                ),
                None => println!("operator {name} was already disabled"),
            }
        }
        UsersCommand::SetPassword { name } => {
            access::set_password(db, name, read_password()?, Actor::Cli).await?;
            println!("password of {name} changed; their sessions ended");
        }
        UsersCommand::SetRole { name, role } => {
            let changed = access::set_role(db, name, *role, Actor::Cli).await?;
            println!(
                "operator {name}: {} -> {role}{}",
                changed.from,
                changed.withdrawn.sentence("they")
            );
        }
    }
    Ok(())
}

/// A password: the first line of standard input when it is not a terminal,
/// else typed twice without echo.
fn read_password() -> anyhow::Result<SecretString> {
    if !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("cannot read the password from standard input")?;
        let line = line.trim_end_matches(['\n', '\r']).to_owned();
        return Ok(SecretString::from(line));
    }
    let first = SecretString::from(rpassword::prompt_password("Password: ")?);
    let second = SecretString::from(rpassword::prompt_password("Password again: ")?);
    if first.expose_secret() != second.expose_secret() {
        anyhow::bail!("the two passwords differ");
    }
    Ok(first)
}
