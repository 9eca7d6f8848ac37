//! A derivation in words, for support agents: which strategy keyed the
//! delivery and why the ones above it did not, the masked canonical
//! material, the key and its strength.

use super::types::{BusinessIdentity, Derivation, SkipReason, Skipped};
use std::fmt::Write as _;

impl Derivation {
    /// Human-readable, multi-line account of the derivation.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        let event_type = self.event_type.as_deref().unwrap_or("(unknown)");
        let _ = writeln!(
            out,
            "provider {} / event type {}",
            self.provider, event_type
        );
        let t = &self.transport;
        let _ = writeln!(out, "transport: {} = {} (key {})", t.id_source, t.id, t.key);
        write_body(
            &mut out,
            "",
            &self.skipped,
            self.business.as_ref(),
            &self.older_versions,
        );
        for other in &self.also_keyed {
            let _ = writeln!(
                out,
                "also keyed by {} ({}, in force in the hierarchy): {}",
                other.strategy,
                other.strength.as_str(),
                other.key.full()
            );
        }
        for item in self.items.iter().filter(|_| self.items.len() > 1) {
            let ty = item.event_type.as_deref().unwrap_or("(unknown)");
            let _ = writeln!(out, "item {} ({ty}):", item.index);
            write_body(
                &mut out,
                "  ",
                &item.skipped,
                item.business.as_ref(),
                &item.older_versions,
            );
            if let Some(u) = &item.unresolved {
                let _ = writeln!(out, "  unresolved: {}", u.code());
            }
        }
        if let Some(u) = &self.unresolved {
            let _ = writeln!(
                out,
                "unresolved: {} — kept for review, nothing dropped",
                u.code()
            );
        }
        out
    }
}

fn write_body(
    out: &mut String,
    pad: &str,
    skipped: &[Skipped],
    business: Option<&BusinessIdentity>,
    older: &[BusinessIdentity],
) {
    for s in skipped {
        let why = match &s.reason {
            SkipReason::MissingField { field, path } => format!("field `{field}` ({path}) missing"),
            SkipReason::InexactNumber { field, path } => {
                format!("field `{field}` ({path}) holds a number too large to read exactly")
            }
            SkipReason::BlankField { field, path } => {
                format!("field `{field}` ({path}) holds only blank text")
            }
            SkipReason::NotApplicable { event_type } => format!("does not apply to {event_type}"),
        };
        let _ = writeln!(out, "{pad}skipped {}: {why}", s.strategy);
    }
    let Some(b) = business else {
        return;
    };
    let _ = writeln!(
        out,
        "{pad}chosen: {} ({}, {} key) for effect {} ({})",
        b.strategy,
        b.kind.as_str(),
        b.strength.as_str(),
        b.effect_type,
        b.criticality.as_str()
    );
    let _ = writeln!(out, "{pad}material: {}", b.material);
    if !b.scope.as_object().is_none_or(|m| m.is_empty()) {
        let _ = writeln!(out, "{pad}scope: {}", b.scope);
    }
    if !b.missing_discriminants.is_empty() {
        let _ = writeln!(
            out,
            "{pad}missing discriminants: {}",
            b.missing_discriminants.join(", ")
        );
    }
    let _ = writeln!(
        out,
        "{pad}key: {} (strength {})",
        b.key.full(),
        b.strength.as_str()
    );
    for o in older {
        let _ = writeln!(out, "{pad}also keyed by older version: {}", o.key.full());
    }
}
