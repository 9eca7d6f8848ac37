//! What every back-office page shares: the navigation, and the forms of a
//! value people read (a long id shortened, a time in UTC with its age, a
//! received value with its bidirectional controls made visible).
//! Templates show them through `templates/_nav.html` and `_macros.html`.
//!
//! What must stay true: every value a page shows that came from outside
//! (ids, keys, fields, header names and values, references, notes) goes
//! through the `visible` filter, so a right-to-left override cannot make an
//! id read as another; askama's HTML escaping still applies to its output.

use std::borrow::Cow;

use actix_session::Session;
use chrono::{DateTime, Utc};

use super::csrf;
use crate::auth::{Action, Principal};
use crate::routes::error::UiError;

/// The navigation bar of a signed-in page.
pub struct Nav {
    pub csrf: String,
    pub name: String,
    pub role: &'static str,
    pub admin: bool,
    /// May read the strategies page (engineers and admins).
    pub strategies: bool,
    /// May read the audit trail (engineers and admins).
    pub audit: bool,
    /// Which entry is the current page (`deliveries`, `cases`, ...).
    pub current: &'static str,
}

impl Nav {
    pub fn new(
        session: &Session,
        operator: &Principal,
        current: &'static str,
    ) -> Result<Self, UiError> {
        Ok(Self {
            csrf: csrf::token(session)?,
            name: operator.name.clone(),
            role: operator.role.as_str(),
            admin: operator.may(Action::ManageOperators),
            strategies: operator.may(Action::ViewStrategies),
            audit: operator.may(Action::ReadAudit),
            current,
        })
    }
}

/// A long id: shown shortened, the full value on hover and copied by its button.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShortId {
    pub full: String,
    pub short: String,
}

/// Characters kept at each end of a shortened id.
const KEEP: usize = 8;

impl ShortId {
    pub fn new(full: impl Into<String>) -> Self {
        let full = full.into();
        let chars: Vec<char> = full.chars().collect();
        let short = if chars.len() <= 2 * KEEP + 1 {
            full.clone()
        } else {
            let head: String = chars[..KEEP].iter().collect();
            let tail: String = chars[chars.len() - KEEP..].iter().collect();
            format!("{head}…{tail}")
        };
        Self { full, short }
    }
}

/// A moment: UTC to the second, and how long ago it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    pub iso: String,
    pub utc: String,
    pub age: String,
}

impl Stamp {
    pub fn new(at: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        Self {
            iso: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            utc: at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            age: age(at, now),
        }
    }
}

/// A JSON value on one line, as JSON (a string quoted, so `"700"` and `700`
/// read apart).
pub fn json_text(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Whether `c` is a Unicode bidirectional control: embeddings and overrides
/// (U+202A–U+202E), isolates (U+2066–U+2069), and the marks U+200E, U+200F
/// and U+061C. Shown raw, they reorder the characters around them.
fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with each bidirectional control written out as `<U+202E>`.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_bidi_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_bidi_control(c) {
            out.push_str(&format!("<U+{:04X}>", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The inverse of [`visible`] for what an operator types or pastes back (a
/// search for an id copied from a page): each `<U+XXXX>` naming a
/// bidirectional control becomes that control again; anything else stays.
pub fn from_visible(text: &str) -> Cow<'_, str> {
    if !text.contains("<U+") && !text.contains("<u+") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('<') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let control = tail
            .get(1..3)
            .filter(|p| p.eq_ignore_ascii_case("u+"))
            .and_then(|_| tail[3..].split_once('>'))
            .filter(|(hex, _)| (4..=6).contains(&hex.len()))
            .and_then(|(hex, after)| {
                let c = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                is_bidi_control(c).then_some((c, after))
            });
        match control {
            Some((c, after)) => {
                out.push(c);
                rest = after;
            }
            None => {
                out.push('<');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The filters templates call (`{{ value|visible }}`); a page's module
/// brings them in with `use super::format::filters;`.
pub mod filters {
    /// Any displayed value with its bidirectional controls made visible
    /// (see [`super::visible`]); the result is HTML-escaped as usual.
    #[askama::filter_fn]
    pub fn visible<T: std::fmt::Display>(
        value: T,
        _: &dyn askama::Values,
    ) -> askama::Result<String> {
        Ok(super::visible(&value.to_string()).into_owned())
    }

    /// A long id shortened to both its ends (see [`super::ShortId`]), so
    /// ids made one after the other, alike at the start, still read apart.
    #[askama::filter_fn]
    pub fn short_id<T: std::fmt::Display>(
        value: T,
        _: &dyn askama::Values,
    ) -> askama::Result<String> {
        Ok(super::ShortId::new(super::visible(&value.to_string())).short)
    }
}

/// `now - at` in the largest unit that fits: "just now", "5 min ago",
/// "3 h ago", "12 days ago"; a time in the future says so.
pub fn age(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let seconds = (now - at).num_seconds();
    if seconds < 0 {
        return "in the future".to_owned();
    }
    match seconds {
        0..60 => "just now".to_owned(),
        60..3_600 => format!("{} min ago", seconds / 60),
        3_600..86_400 => format!("{} h ago", seconds / 3_600),
        86_400..172_800 => "1 day ago".to_owned(),
        _ => format!("{} days ago", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_long_id_keeps_both_ends_and_a_short_one_stays_whole() {
        let id = ShortId::new("0193a5f0-7c1e-7b3a-9d2e-4f5a6b7c8d9e");
        assert_eq!(id.short, "0193a5f0…6b7c8d9e");
        assert_eq!(id.full, "0193a5f0-7c1e-7b3a-9d2e-4f5a6b7c8d9e");
        assert_eq!(ShortId::new("pay_123").short, "pay_123");
        let accents = ShortId::new("é".repeat(30));
        assert_eq!(accents.short.chars().count(), 2 * KEEP + 1);
    }

    #[test]
    fn bidi_controls_are_written_out_and_read_back() {
        let spoofed = "pay_\u{202E}gpj.exe\u{2066}x\u{200F}\u{061C}";
        let shown = visible(spoofed);
        assert_eq!(shown, "pay_<U+202E>gpj.exe<U+2066>x<U+200F><U+061C>");
        assert_eq!(from_visible(&shown), spoofed);
        assert!(matches!(visible("pay_123 é"), Cow::Borrowed(_)));
        // Only the controls come back: other text in the same form stays text.
        for text in [
            "<U+0041>",
            "<U+202E",
            "a < b",
            "<u+202e>x",
            "<U+>",
            "<U+1F600>",
        ] {
            let expected = if text == "<u+202e>x" {
                "\u{202E}x"
            } else {
                text
            };
            assert_eq!(from_visible(text), expected, "{text}");
        }
    }

    #[test]
    fn ages_use_the_largest_unit_that_fits() {
        let now = Utc.with_ymd_and_hms(2026, 12, 1, 12, 0, 0).unwrap();
        let ago = |s: i64| age(now - chrono::Duration::seconds(s), now);
        assert_eq!(ago(5), "just now");
        assert_eq!(ago(300), "5 min ago");
        assert_eq!(ago(3 * 3_600 + 10), "3 h ago");
        assert_eq!(ago(86_400 + 5), "1 day ago");
        assert_eq!(ago(12 * 86_400), "12 days ago");
        assert_eq!(ago(-10), "in the future");
        let stamp = Stamp::new(now, now);
        assert_eq!(stamp.utc, "2026-12-01 12:00:00 UTC");
        assert_eq!(stamp.iso, "2026-12-01T12:00:00Z");
    }
}
