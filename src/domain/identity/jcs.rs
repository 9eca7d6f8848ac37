//! RFC 8785 JSON Canonicalization Scheme (JCS), written here rather than
//! borrowed so that the one deliberate extension below stays visible; only
//! the ES6 form of a double comes from a crate (`ryu_js`, see [`format_double`]).
//!
//! * [`to_canonical_string`] with [`Integers::AsDoubles`] is RFC 8785 to the
//!   byte: members sorted by UTF-16 code units, ES6 number form, fixed escaping.
//! * [`Integers::Exact`] is what keys use. RFC 8785 writes every number through
//!   an IEEE-754 double, so `9007199254740993` and `9007199254740992` would
//!   canonicalise alike and two distinct ids would merge. In `Exact` mode an
//!   integer that serde_json parsed exactly (i64/u64) is written with its exact
//!   decimal digits. For |n| ≤ 2^53 the output is byte-identical to RFC 8785;
//!   beyond it the key keeps the digits the provider sent. Non-integers (and
//!   integers beyond u64, which serde_json already parsed as doubles) follow
//!   RFC 8785 unchanged.
//!
//! NaN and ±Infinity cannot be represented: [`format_double`] rejects them.

use serde_json::{Map, Number, Value};
use std::borrow::Cow;
use std::fmt::Write as _;

/// How integers are written. See the module header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integers {
    /// RFC 8785 exactly: every number goes through an IEEE-754 double.
    AsDoubles,
    /// Integers parsed exactly keep their exact digits (key material).
    Exact,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JcsError {
    #[error("number {0} is not finite; RFC 8785 cannot represent NaN or Infinity")]
    NotFinite(String),
}

/// Canonical RFC 8785 text of `value`.
pub fn to_canonical_string(value: &Value, integers: Integers) -> Result<String, JcsError> {
    let mut out = String::new();
    write_value(&mut out, value, integers)?;
    Ok(out)
}

/// Canonical text for key material: exact integers, never fails on a
/// `serde_json::Value` (which cannot hold NaN or Infinity).
pub fn key_string(value: &Value) -> String {
    // A Value's numbers are always finite, so the error branch is unreachable;
    // falling back to serde_json's own form keeps this total without a panic.
    to_canonical_string(value, Integers::Exact).unwrap_or_else(|_| value.to_string())
}

fn write_value(out: &mut String, value: &Value, integers: Integers) -> Result<(), JcsError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n, integers)?,
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item, integers)?;
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map, integers)?,
    }
    Ok(())
}

fn write_object(
    out: &mut String,
    map: &Map<String, Value>,
    integers: Integers,
) -> Result<(), JcsError> {
    let mut members: Vec<(&String, &Value)> = map.iter().collect();
    members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
    out.push('{');
    for (i, (k, v)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, k);
        out.push(':');
        write_value(out, v, integers)?;
    }
    out.push('}');
    Ok(())
}

/// Whether `value` holds a whole number a double may have rounded: one not
/// held as an exact `i64` / `u64`, at or past 2^53, where doubles skip
/// integers. In a body read through [`canonical_numbers`] that is an
/// integer past the range of `u64` and `i64`: `100000000000000000001` and
/// `100000000000000000002` both read as 1e20. As key material they would
/// merge two events, so a key never takes such a value (its exact digits
/// are gone once parsed).
pub fn holds_rounded_integer(value: &Value) -> bool {
    const EXACT_UP_TO: f64 = 9_007_199_254_740_992.0; // 2^53
    match value {
        Value::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => n
            .as_f64()
            .is_some_and(|d| d.fract() == 0.0 && d.abs() >= EXACT_UP_TO),
        Value::Array(items) => items.iter().any(holds_rounded_integer),
        Value::Object(members) => members.values().any(holds_rounded_integer),
        _ => false,
    }
}

fn write_number(out: &mut String, n: &Number, integers: Integers) -> Result<(), JcsError> {
    if integers == Integers::Exact {
        if let Some(u) = n.as_u64() {
            let _ = write!(out, "{u}");
            return Ok(());
        }
        if let Some(i) = n.as_i64() {
            let _ = write!(out, "{i}");
            return Ok(());
        }
        // A whole double past 2^53 keyed as the integer it reads as until
        // 2026-12-07 (evening), when `canonical_numbers` stopped making it
        // one: its key text stays what it was (a strategy that reads it as a
        // field no longer keys, see `holds_rounded_integer`, but a
        // fingerprint or a transport hash of the body still does).
        // (Not -2^63 itself: its ES6 text, `-9223372036854776000`, reads back
        // as that double, and text in ES6 form keys as written.)
        if let Some(d) = n.as_f64().filter(|d| d.fract() == 0.0) {
            // 2^64 and -2^63 are exact doubles, so these bounds are exact.
            if (0.0..18_446_744_073_709_551_616.0).contains(&d) {
                let _ = write!(out, "{}", d as u64);
                return Ok(());
            }
            if d > -9_223_372_036_854_775_808.0 && d < 0.0 {
                let _ = write!(out, "{}", d as i64);
                return Ok(());
            }
        }
    }
    let d = n
        .as_f64()
        .ok_or_else(|| JcsError::NotFinite(n.to_string()))?;
    out.push_str(&format_double(d)?);
    Ok(())
}

/// ES6 `Number.prototype.toString` of a finite double (RFC 8785 §3.2.2.3).
///
/// `ryu_js` is the ECMAScript formatter of the Boa engine: the shortest digit
/// string that reads back to `d` and, of those, the closest to it; `-0` is
/// `0`. Rounding the exact value to the shortest length instead goes wrong at
/// powers of two, where the rounding interval below is half the one above:
/// 2^-24 would print as `5.960464477539062e-8`, which reads back as the double
/// below it (V8 prints `5.960464477539063e-8`), and two distinct numbers would
/// share a key. The vectors in `tests/vectors/es6-numbers` decide.
pub fn format_double(d: f64) -> Result<String, JcsError> {
    if !d.is_finite() {
        return Err(JcsError::NotFinite(format!("{d}")));
    }
    Ok(ryu_js::Buffer::new().format_finite(d).to_owned())
}

/// `s` as a JSON string, RFC 8785 escaping: runs of characters that need no
/// escape are copied whole. Every escaped character is ASCII, so a byte
/// index where one is found is a character boundary.
fn write_string(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    let mut run = 0;
    for (i, byte) in s.bytes().enumerate() {
        let short = match byte {
            b'"' => Some("\\\""),
            b'\\' => Some("\\\\"),
            0x08 => Some("\\b"),
            b'\t' => Some("\\t"),
            b'\n' => Some("\\n"),
            0x0c => Some("\\f"),
            b'\r' => Some("\\r"),
            0x00..=0x1f => None,
            _ => continue,
        };
        out.push_str(&s[run..i]);
        match short {
            Some(escape) => out.push_str(escape),
            None => {
                let _ = write!(out, "\\u{byte:04x}");
            }
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// Numbers rewritten so that equal numeric values are equal `Value`s:
/// `10`, `10.0` and `1e1` all become the integer 10, `-0.0` becomes 0.
/// Doubles that are whole and fit an i64/u64 become that exact integer;
/// other doubles and exact integers are left as they are. Most bodies have
/// no such double: they are returned as they are, without a copy.
pub fn canonical_numbers(value: &Value) -> Cow<'_, Value> {
    if numbers_are_canonical(value) {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(rewrite_numbers(value))
    }
}

fn numbers_are_canonical(value: &Value) -> bool {
    match value {
        Value::Number(n) => canonical_number(n).is_none(),
        Value::Array(items) => items.iter().all(numbers_are_canonical),
        Value::Object(map) => map.values().all(numbers_are_canonical),
        _ => true,
    }
}

fn rewrite_numbers(value: &Value) -> Value {
    match value {
        Value::Number(n) => Value::Number(canonical_number(n).unwrap_or_else(|| n.clone())),
        Value::Array(items) => Value::Array(items.iter().map(rewrite_numbers).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), rewrite_numbers(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The integer a whole double stands for, or `None` when `n` is already
/// in canonical form. Only below 2^53, where every integer is a double of
/// its own: past it, `9007199254740993.0` reads as `…992`, and made an
/// integer it would key as if the provider had sent that one exactly. It
/// stays a double, which [`holds_rounded_integer`] then tells apart.
fn canonical_number(n: &Number) -> Option<Number> {
    const EXACT_BELOW: f64 = 9_007_199_254_740_992.0; // 2^53
    if n.is_i64() || n.is_u64() {
        return None;
    }
    match n.as_f64() {
        Some(d) if d.fract() == 0.0 && d.abs() < EXACT_BELOW => Some(match d < 0.0 {
            true => Number::from(d as i64),
            false => Number::from(d as u64),
        }),
        _ => None,
    }
}
