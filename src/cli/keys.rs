//! `unicity key explain`: how the server would key a body read from standard
//! input. The body is classified as the server classifies it, so a body the
//! server would not key is not keyed here either.

use std::io::Read;

use anyhow::Context;
use clap::Subcommand;

use crate::config::Settings;
use crate::domain::delivery::BodyParse;

#[derive(Subcommand)]
pub(super) enum KeyCommand {
    /// Explain the key of a body read from standard input: chosen strategy and
    /// version, the ones skipped and why, the masked canonical material, the key.
    Explain {
        /// The source the body would be posted to.
        #[arg(long)]
        source: String,
        /// Event type, sent as the provider's type header where it has one (e.g. x-github-event).
        #[arg(long = "type")]
        event_type: Option<String>,
        /// A request header, `name: value` (repeatable).
        #[arg(long = "header", short = 'H')]
        headers: Vec<String>,
    },
}

pub(super) fn run(settings: &Settings, command: &KeyCommand) -> anyhow::Result<()> {
    let KeyCommand::Explain {
        source,
        event_type,
        headers,
    } = command;
    print!(
        "{}",
        explain(settings, source, event_type.as_deref(), headers)?
    );
    Ok(())
}

fn explain(
    settings: &Settings,
    slug: &str,
    event_type: Option<&str>,
    headers: &[String],
) -> anyhow::Result<String> {
    let source = settings
        .sources
        .iter()
        .find(|s| s.slug() == slug)
        .with_context(|| format!("no source {slug:?} in the configuration"))?;
    let mut raw = Vec::new();
    std::io::stdin()
        .read_to_end(&mut raw)
        .context("cannot read the body from standard input")?;
    let mut pairs = Vec::new();
    for header in headers {
        let (name, value) = header
            .split_once(':')
            .with_context(|| format!("header {header:?} is not `name: value`"))?;
        pairs.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
    }
    if let Some(event_type) = event_type {
        let header = match source.origin.provider.as_str() {
            "github" => Some("x-github-event"),
            _ => None,
        };
        let Some(name) = header else {
            anyhow::bail!(
                "provider {:?} carries its event type in the body: drop --type",
                source.origin.provider
            );
        };
        if !pairs.iter().any(|(p, _)| p == name) {
            pairs.push((name.to_owned(), event_type.to_owned()));
        }
    }
    // Classified as the server does: a body it would not key is not keyed here.
    let (parse, body) = BodyParse::classify(&raw);
    let facts = source.facts(&pairs, parse, body.as_ref(), &raw);
    let derivation = settings.catalog.derive(&facts, &settings.key_secret);
    Ok(derivation.explain())
}
