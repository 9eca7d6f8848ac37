//! Event-type patterns: literal text with `*` matching any run of characters
//! (`charge.*`, `*`). When several patterns match, an exact match wins, then
//! the pattern with the most literal characters, then the first declared.

/// Whether `pattern` matches `text`. Runs on every delivery (event types,
/// header names), so it allocates nothing.
pub fn matches(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut tail) = text.strip_prefix(first) else {
        return false;
    };
    let mut parts = rest.split('*').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            return tail.len() >= part.len() && tail.ends_with(part);
        }
        match tail.find(part) {
            Some(at) => tail = &tail[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Specificity of a matching pattern: exact beats any wildcard, then more
/// literal characters beat fewer.
pub fn specificity(pattern: &str) -> (bool, usize) {
    (
        !pattern.contains('*'),
        pattern.chars().filter(|c| *c != '*').count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_runs_and_exact_matches_exactly() {
        assert!(matches("*", "anything.at.all"));
        assert!(matches("charge.*", "charge.succeeded"));
        assert!(!matches("charge.*", "charges"));
        assert!(matches("*.created", "refund.created"));
        assert!(matches("a*b*c", "a-b-b-c"));
        assert!(!matches("a*b*c", "a-c"));
        assert!(matches("refund.created", "refund.created"));
        assert!(!matches("refund.created", "refund.created.x"));
        assert!(matches("x-*-sig*", "x-paypal-sig"));
        assert!(!matches("x-*-sig*", "x-paypal"));
        assert!(matches("**", ""));
        assert!(!matches("ab*ba", "aba"));
        assert!(specificity("refund.created") > specificity("refund.*"));
        assert!(specificity("refund.*") > specificity("*"));
    }
}
