//! Reading what a provider or a downstream answers: bounded, and refused
//! when it holds what no column can store. An answer is journaled (a
//! look-up's operations, a settlement's result, a status): U+0000 in it
//! would fail that commit on PostgreSQL, and the commit holds more than the
//! answer (a settlement, the findings of a reconciliation run).

use serde_json::Value;

use crate::domain::strict_json::{self, Limits, MAX_STORED_DEPTH};

/// Why an answer's body was not read into a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    #[error("longer than {0} bytes")]
    TooLong(usize),
    #[error("cut short")]
    CutShort,
    #[error("holds U+0000")]
    Nul,
    #[error("not JSON")]
    NotJson,
}

/// The JSON body of `response`, read up to `most` bytes (`Ok(None)`: empty).
pub async fn json(mut response: reqwest::Response, most: usize) -> Result<Option<Value>, Unread> {
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if bytes.len() + chunk.len() > most => {
                return Err(Unread::TooLong(most));
            }
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(_) => return Err(Unread::CutShort),
        }
    }
    if bytes.is_empty() {
        return Ok(None);
    }
    let text = std::str::from_utf8(&bytes).map_err(|_| Unread::NotJson)?;
    let limits = Limits {
        max_depth: MAX_STORED_DEPTH,
        reject_duplicates: false,
        reject_nul: true,
    };
    match strict_json::parse(text, limits) {
        Ok(value) => Ok(Some(value)),
        Err(strict_json::Refused::Nul) => Err(Unread::Nul),
        Err(_) => Err(Unread::NotJson),
    }
}
