//! U+0000 in what people and programs send the back office and the API.
//! PostgreSQL stores no text holding it and refuses any value bound with
//! one, so a sign-in name, a search or a filter holding `%00` got a 503
//! "storage unavailable" there and an answer on SQLite, and a case resolved
//! through the API with `\u0000` in its reference a 503 after its checks.
//! Such a request is refused up front with a 400 on both backends: in its
//! path, its query, or its body, whatever content type it claims. Webhooks are not checked
//! here: their bodies are kept as bytes, and a JSON body holding U+0000 is
//! quarantined (`strict_json::Refused::Nul`).

use std::pin::Pin;

use actix_web::dev::{Payload, ServiceRequest};
use actix_web::{HttpMessage, web};
use futures_util::Stream;

/// The percent-encoding of U+0000, the only way it reaches a URI or a form
/// (a raw NUL byte is not HTTP).
const ENCODED: &[u8] = b"%00";

/// Whether `req` holds U+0000 in its path, its query or its body (read
/// here and handed back to the request unchanged). A body is read as the
/// extractors will read it, whatever type it names: as JSON when its type is
/// one actix's `Json` accepts (`*/json`, `*/*+json`), else as a form, which
/// the back office's forms parse whatever the type.
pub async fn held(req: &mut ServiceRequest) -> Result<bool, actix_web::Error> {
    let uri = req.uri();
    if encoded(uri.path().as_bytes()) || uri.query().is_some_and(|q| encoded(q.as_bytes())) {
        return Ok(true);
    }
    let kind = req.content_type().to_ascii_lowercase();
    let held_by: fn(&[u8]) -> bool = if kind.ends_with("/json") || kind.ends_with("+json") {
        escaped
    } else {
        encoded
    };
    let body = req.extract::<web::Bytes>().await?;
    let found = body.contains(&0) || held_by(&body);
    req.set_payload(again(body));
    Ok(found)
}

fn encoded(text: &[u8]) -> bool {
    text.windows(ENCODED.len()).any(|w| w == ENCODED)
}

/// Whether JSON text holds `\u0000` as an escape: after an odd number of
/// backslashes (`\\u0000` is a backslash, then the text `u0000`).
fn escaped(json: &[u8]) -> bool {
    json.windows(5).enumerate().any(|(at, w)| {
        w == b"u0000" && json[..at].iter().rev().take_while(|&&b| b == b'\\').count() % 2 == 1
    })
}

/// A payload that yields `body` once, for the extractors after this one.
fn again(body: web::Bytes) -> Payload {
    let stream: Pin<Box<dyn Stream<Item = Result<web::Bytes, actix_web::error::PayloadError>>>> =
        Box::pin(futures_util::stream::once(async move { Ok(body) }));
    Payload::from(stream)
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn only_an_escape_of_u0000_counts_not_the_text_after_an_escaped_backslash() {
        assert!(escaped(br#"{"note":"a\u0000"}"#));
        assert!(escaped(br#"{"note":"\\\u0000"}"#));
        assert!(!escaped(br#"{"note":"a\\u0000"}"#));
        assert!(!escaped(br#"{"note":"u0000 \u0001"}"#));
    }
}
