//! The look-up URL filled from a delivery: each `{name}` replaced by the
//! delivery's field, every byte but unreserved ones percent-encoded, and a
//! value that would move the URL (empty, `.`, `..`) refused, so that no
//! received value reaches another of the provider's resources.

use serde_json::Value;

pub(crate) use crate::domain::uri::encode;

use super::values::{field, text};

/// The URL with each `{name}` replaced by the delivery's field, encoded; the
/// missing field's name otherwise.
pub(super) fn fill(template: &str, event: &Value) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let Some(close) = rest[open..].find('}') else {
            out.push_str(&rest[open..]);
            return Ok(out);
        };
        let name = &rest[open + 1..open + close];
        let value = field(event, name).ok_or_else(|| name.to_owned())?;
        let text = text(value).ok_or_else(|| name.to_owned())?;
        if matches!(text.as_str(), "" | "." | "..") {
            return Err(name.to_owned());
        }
        out.push_str(&encode(&text));
        rest = &rest[open + close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether the client asks `url` with the path as written: no dot segment
/// resolved away, nothing re-encoded.
pub(super) fn routes_as_written(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    let path = path.split(['?', '#']).next().unwrap_or(path);
    parsed.path() == path
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_url_is_filled_from_the_delivery_and_encoded() {
        let event = json!({"payment_id": "pay 1/x", "data": {"object": {"pi": "pi_9"}}, "n": 7});
        assert_eq!(
            fill(
                "https://p/payments/{payment_id}/refunds?pi={data.object.pi}&n={n}",
                &event
            ),
            Ok("https://p/payments/pay%201%2Fx/refunds?pi=pi_9&n=7".to_owned())
        );
        assert_eq!(
            fill("https://p/{missing}", &event),
            Err("missing".to_owned())
        );
    }

    #[test]
    fn a_received_value_cannot_move_the_url() {
        let template = "https://p/payments/{payment_id}/refunds";
        for hostile in ["..", ".", ""] {
            let event = json!({ "payment_id": hostile });
            assert_eq!(
                fill(template, &event),
                Err("payment_id".to_owned()),
                "{hostile:?}"
            );
        }
        for (hostile, encoded) in [
            ("%2e%2e", "%252e%252e"),
            ("../x", "..%2Fx"),
            ("a/b", "a%2Fb"),
            ("a?b=1", "a%3Fb%3D1"),
            ("a#b", "a%23b"),
            ("a\nb", "a%0Ab"),
        ] {
            let event = json!({ "payment_id": hostile });
            let url = fill(template, &event).unwrap();
            assert_eq!(url, format!("https://p/payments/{encoded}/refunds"));
            assert!(routes_as_written(&url), "{url}");
        }
        assert!(!routes_as_written("https://p/payments/%2e%2e/refunds"));
        assert!(!routes_as_written("https://p/payments/../refunds"));
    }
}
