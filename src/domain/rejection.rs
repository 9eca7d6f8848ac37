//! What a refused request may cost the store. A webhook URL is public, so
//! anything a stranger sends must leave a trace of bounded size: the header
//! limits a request must meet to be read at all, and the summary of its
//! headers that a rejection keeps (names, and values only while small).
//!
//! Invariant: a summary never holds more than [`SUMMARY_HEADERS`] headers,
//! names of at most [`KEPT_NAME_BYTES`], values of at most [`KEPT_VALUE_BYTES`]
//! (plus a short size note), whatever arrived.

use crate::domain::delivery::Headers;

/// Most headers a delivery may carry. Providers send 10–20.
pub const MAX_HEADER_COUNT: usize = 64;
/// Longest header value a delivery may carry. The longest providers send are
/// signature headers listing several signatures during a rotation (< 1 KiB).
pub const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;
/// Most bytes of header names and values together. Providers send < 4 KiB.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// Headers a rejection keeps, in arrival order; the rest are only counted.
pub const SUMMARY_HEADERS: usize = 24;
/// A kept header name is cut to this many bytes.
pub const KEPT_NAME_BYTES: usize = 64;
/// A kept header value is cut to this many bytes.
pub const KEPT_VALUE_BYTES: usize = 96;

/// Which header limit a request broke.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderExcess {
    #[error("{count} headers, more than {MAX_HEADER_COUNT}")]
    TooMany { count: usize },
    #[error("header {name} holds {bytes} bytes, more than {MAX_HEADER_VALUE_BYTES}")]
    ValueTooLong { name: String, bytes: usize },
    #[error("headers hold {bytes} bytes, more than {MAX_HEADER_BYTES}")]
    TooLarge { bytes: usize },
}

/// Bytes of header names and values (what the limits count).
pub fn header_bytes(headers: &[(String, String)]) -> usize {
    headers.iter().map(|(n, v)| n.len() + v.len()).sum()
}

/// Checks a request's headers against the limits above.
pub fn check_headers(headers: &[(String, String)]) -> Result<(), HeaderExcess> {
    if headers.len() > MAX_HEADER_COUNT {
        return Err(HeaderExcess::TooMany {
            count: headers.len(),
        });
    }
    if let Some((name, value)) = headers
        .iter()
        .find(|(_, v)| v.len() > MAX_HEADER_VALUE_BYTES)
    {
        return Err(HeaderExcess::ValueTooLong {
            name: cut(name, KEPT_NAME_BYTES),
            bytes: value.len(),
        });
    }
    match header_bytes(headers) {
        bytes if bytes > MAX_HEADER_BYTES => Err(HeaderExcess::TooLarge { bytes }),
        _ => Ok(()),
    }
}

/// The bounded part of a refused request's headers a rejection keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderSummary {
    pub headers: Headers,
    /// Headers received but not kept.
    pub omitted: usize,
    /// Bytes of every header name and value received.
    pub bytes: u64,
}

/// Keeps the first [`SUMMARY_HEADERS`] headers, names and values cut to
/// their bounds; a cut value ends with `…` and its full size.
/// Secret values must be masked before.
pub fn summarize(headers: &[(String, String)]) -> HeaderSummary {
    let kept = headers
        .iter()
        .take(SUMMARY_HEADERS)
        .map(|(name, value)| {
            let value = match value.len() {
                n if n > KEPT_VALUE_BYTES => {
                    format!("{}… ({n} bytes)", cut(value, KEPT_VALUE_BYTES))
                }
                _ => value.clone(),
            };
            (cut(name, KEPT_NAME_BYTES), value)
        })
        .collect();
    HeaderSummary {
        headers: kept,
        omitted: headers.len().saturating_sub(SUMMARY_HEADERS),
        bytes: header_bytes(headers) as u64,
    }
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn cut(text: &str, max: usize) -> String {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn a_provider_sized_request_meets_every_limit() {
        let headers: Vec<_> = (0..20)
            .map(|i| header(&format!("x-h{i}"), &"v".repeat(200)))
            .chain([header("stripe-signature", &"t=1,v1=ab".repeat(100))])
            .collect();
        assert_eq!(check_headers(&headers), Ok(()));
    }

    #[test]
    fn each_limit_is_enforced_just_past_its_bound() {
        let many: Vec<_> = (0..=MAX_HEADER_COUNT)
            .map(|i| header(&format!("h{i}"), "v"))
            .collect();
        assert_eq!(
            check_headers(&many),
            Err(HeaderExcess::TooMany {
                count: MAX_HEADER_COUNT + 1
            })
        );
        let long = [header("x", &"a".repeat(MAX_HEADER_VALUE_BYTES + 1))];
        assert!(matches!(
            check_headers(&long),
            Err(HeaderExcess::ValueTooLong { .. })
        ));
        let at_bound = [header("x", &"a".repeat(MAX_HEADER_VALUE_BYTES))];
        assert_eq!(check_headers(&at_bound), Ok(()));
        let large: Vec<_> = (0..3)
            .map(|i| header(&format!("x{i}"), &"a".repeat(MAX_HEADER_VALUE_BYTES - 2)))
            .collect();
        assert!(matches!(
            check_headers(&large),
            Err(HeaderExcess::TooLarge { .. })
        ));
    }

    #[test]
    fn a_summary_is_bounded_whatever_arrives() {
        let headers: Vec<_> = (0..200)
            .map(|i| header(&format!("x-{i}-{}", "n".repeat(500)), &"é".repeat(50_000)))
            .collect();
        let summary = summarize(&headers);
        assert_eq!(summary.headers.len(), SUMMARY_HEADERS);
        assert_eq!(summary.omitted, 200 - SUMMARY_HEADERS);
        assert_eq!(summary.bytes, header_bytes(&headers) as u64);
        for (name, value) in &summary.headers {
            assert!(name.len() <= KEPT_NAME_BYTES);
            assert!(value.len() <= KEPT_VALUE_BYTES + 32, "{}", value.len());
            assert!(value.ends_with("(100000 bytes)"), "{value}");
        }
    }

    #[test]
    fn small_values_are_kept_whole() {
        let headers = [header("content-type", "application/json")];
        assert_eq!(summarize(&headers).headers, headers);
    }
}
