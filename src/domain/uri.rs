//! Text as it travels inside a URL.

/// Percent-encodes all but unreserved characters (RFC 3986): how a look-up
/// puts a delivery's value into the provider's URL, and so the form in which
/// a sensitive value must also be found again to be masked there.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
