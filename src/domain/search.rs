//! What a person types in the delivery search box, read once: an exact text,
//! or a prefix (`pay_8f3a*`) of at least `MIN_PREFIX` characters; the
//! spellings each is looked for in; the range of stored text a prefix covers;
//! and which stored values are near enough to a text that found nothing to
//! be proposed instead.
//!
//! Ranges are in code point order, which is the byte order of UTF-8: the
//! order of SQLite's `BINARY` collation and of PostgreSQL's `C` collations.

/// The fewest characters a prefix search takes. Provider ids start with a
/// type of two to four letters and an underscore (`pi_`, `re_`, `evt_`,
/// `pay_`) that every id of the kind shares, so a shorter prefix finds
/// everything of a kind; six characters reach at least two past it, and
/// a shortened id on a page shows eight.
pub const MIN_PREFIX: usize = 6;

/// The longest id the search indexes hold (bytes of UTF-8). Provider ids
/// and payment ids are short; a longer value (an unsigned header a sender
/// made as long as the request allows) is kept in the journal and never
/// indexed: PostgreSQL refuses a B-tree entry past ~2,700 bytes, and one
/// such row would stop the read model for every delivery after it.
pub const MAX_SEARCHABLE: usize = 200;

/// `value` when the search indexes may hold it (see [`MAX_SEARCHABLE`]).
pub fn searchable(value: &str) -> Option<&str> {
    (!value.is_empty() && value.len() <= MAX_SEARCHABLE).then_some(value)
}

/// An optional id as the search indexes may hold it.
pub fn searchable_id(id: Option<&str>) -> Option<String> {
    id.and_then(searchable).map(str::to_owned)
}

/// The search text, as typed and trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// Found when a searched value equals it (in one of its `spellings`).
    Exact(String),
    /// Typed with a trailing `*`: found when a searched value starts with it.
    Prefix(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a prefix search needs at least {MIN_PREFIX} characters before the *")]
pub struct ShortPrefix;

impl Text {
    pub fn parse(typed: &str) -> Result<Self, ShortPrefix> {
        let typed = typed.trim();
        match typed.strip_suffix('*') {
            None => Ok(Self::Exact(typed.to_owned())),
            Some(head) => {
                let head = head.trim_end_matches('*').trim_end();
                if head.chars().count() < MIN_PREFIX {
                    return Err(ShortPrefix);
                }
                Ok(Self::Prefix(head.to_owned()))
            }
        }
    }

    /// The text without its `*`.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Exact(text) | Self::Prefix(text) => text,
        }
    }
}

/// What was typed, and the same in lower and in upper case (ASCII letters
/// only), each at most once: ids are stored in one case, and people type them
/// in another (`PAY_WALK_1` for `pay_walk_1`). An id that mixes cases is
/// found as pasted.
pub fn spellings(text: &str) -> Vec<String> {
    let mut spellings = vec![text.to_owned()];
    for other in [text.to_ascii_lowercase(), text.to_ascii_uppercase()] {
        if !spellings.contains(&other) {
            spellings.push(other);
        }
    }
    spellings
}

/// The first text after every text that starts with `prefix`, so that those
/// are exactly the texts `t` with `prefix <= t < successor`; `None` when no
/// text follows them (a prefix of only `char::MAX`).
pub fn successor(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 {
            // The surrogates are no characters: the one after U+D7FF is U+E000.
            0xD7FF => Some('\u{E000}'),
            n => char::from_u32(n + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// Whether `stored`, a value found beside `typed` in an index, is near
/// enough to be proposed: letter case aside, it shares at least three
/// quarters of the typed text as its beginning (a truncated or mistyped
/// end), or is at most two edits away (one for texts under eight
/// characters; a swap of two neighbours is one edit).
pub fn is_close(typed: &str, stored: &str) -> bool {
    let (typed, stored) = (typed.to_lowercase(), stored.to_lowercase());
    let length = typed.chars().count();
    if length < MIN_PREFIX {
        return false;
    }
    let shared = typed
        .chars()
        .zip(stored.chars())
        .take_while(|(a, b)| a == b)
        .count();
    let edits = if length < 8 { 1 } else { 2 };
    shared >= (3 * length).div_ceil(4) || distance(&typed, &stored) <= edits
}

/// Edits from one text to the other: insertions, deletions, substitutions
/// and swaps of two neighbours.
pub fn distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(&a.to_lowercase(), &b.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_star_asks_for_a_prefix_of_at_least_six_characters() {
        assert_eq!(Text::parse(" pay_1 "), Ok(Text::Exact("pay_1".into())));
        assert_eq!(Text::parse("pay_8f3*"), Ok(Text::Prefix("pay_8f3".into())));
        assert_eq!(
            Text::parse("pay_8f3 ** "),
            Ok(Text::Prefix("pay_8f3".into()))
        );
        for short in ["p*", "*", "pay_8*", "éééé*"] {
            assert_eq!(Text::parse(short), Err(ShortPrefix), "{short}");
        }
        assert_eq!(Text::parse("éééééé*"), Ok(Text::Prefix("éééééé".into())));
    }

    #[test]
    fn a_prefix_range_holds_exactly_the_texts_that_start_with_it() {
        assert_eq!(successor("pay_1").as_deref(), Some("pay_2"));
        assert_eq!(successor("pay_z").as_deref(), Some("pay_{"));
        assert_eq!(successor("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(successor("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(successor("\u{10FFFF}"), None);
        let prefix = "pay_1";
        let end = successor(prefix).unwrap();
        for inside in ["pay_1", "pay_10", "pay_1\u{10FFFF}", "pay_1é"] {
            assert!(prefix <= inside && inside < end.as_str(), "{inside}");
        }
        for outside in ["pay_0", "pay_", "pay_2", "pay_20", "PAY_1"] {
            assert!(!(prefix <= outside && outside < end.as_str()), "{outside}");
        }
    }

    #[test]
    fn a_near_value_shares_most_of_the_text_or_is_an_edit_or_two_away() {
        // a truncated id, a wrong last character, a swap, a wrong case
        assert!(is_close("pay_sear", "pay_search_1"));
        assert!(is_close("pay_search_9", "pay_search_1"));
        assert!(is_close("pay_saerch_1", "pay_search_1"));
        assert!(is_close("PAY_SEARCH_1X", "pay_search_1"));
        assert!(is_close("evt_1x2y3z", "evt_1x2y3"));
        // not: too short to say, or too far
        assert!(!is_close("pay_1", "pay_1000"));
        assert!(!is_close("pay_search_1", "pay_zzz"));
        assert!(!is_close("evt_abcdef", "evt_zyxwvu"));
        assert!(!is_close("abcdef", "abxxef"));
        assert_eq!(distance("pay_saerch", "PAY_SEARCH"), 1);
    }

    #[test]
    fn spellings_are_the_text_then_its_lower_and_upper_case_once_each() {
        assert_eq!(spellings("Pay_1"), ["Pay_1", "pay_1", "PAY_1"]);
        assert_eq!(spellings("pay_1"), ["pay_1", "PAY_1"]);
        assert_eq!(spellings("123"), ["123"]);
    }
}
