use chrono::{DateTime, Utc};
use sea_orm::ActiveValue::{NotSet, Set};
use serde_json::json;

use super::*;
use crate::store::entities::raw_body;

fn at() -> DateTime<Utc> {
    // 1.234567891 s past the minute: nanoseconds PostgreSQL cannot keep.
    DateTime::from_timestamp(1_800_000_000, 234_567_891).unwrap()
}

fn body(sha: &str, bytes: &[u8]) -> raw_body::ActiveModel {
    raw_body::ActiveModel {
        sha256: Set(sha.to_owned()),
        body: Set(Some(bytes.to_vec())),
        size: Set(bytes.len() as i64),
        stored_at: Set(at()),
        redacted_at: Set(None),
    }
}

fn parameter(statement: &Statement) -> &Json {
    match &statement.values.as_ref().expect("one parameter").0[..] {
        [Value::Json(Some(json))] => json,
        other => panic!("one JSON parameter, got {other:?}"),
    }
}

#[test]
fn a_batch_of_any_size_is_one_statement_whose_text_depends_only_on_its_table() {
    let one = statement(&[body("a", b"x")]).unwrap();
    let three = statement(&[body("a", b"x"), body("b", b"y"), body("c", b"z")]).unwrap();
    assert_eq!(one.sql, three.sql);
    assert!(
        three.sql.starts_with("INSERT INTO \"raw_bodies\" (")
            && three
                .sql
                .contains("jsonb_populate_recordset(NULL::\"raw_bodies\", $1)")
            && three.sql.ends_with("ON CONFLICT DO NOTHING"),
        "{}",
        three.sql
    );
    assert_eq!(parameter(&three).as_array().map(Vec::len), Some(3));
}

#[test]
fn bytes_travel_as_bytea_hex_and_instants_in_microseconds_truncated() {
    let hostile = [0x00, 0xff, b'"', b'\\', b'{', b',', 0x80];
    let statement = statement(&[body("h", &hostile)]).unwrap();
    let row = &parameter(&statement)[0];
    assert_eq!(row["body"], json!("\\x00ff225c7b2c80"));
    assert_eq!(row["stored_at"], json!("2027-01-15T08:00:00.234567Z"));
    assert_eq!(row["sha256"], json!("h"));
}

#[test]
fn text_and_null_keep_their_meaning() {
    let mut row = body("a\"b\\c'{},", b"");
    row.body = Set(None);
    let statement = statement(&[row]).unwrap();
    let row = &parameter(&statement)[0];
    assert_eq!(row["sha256"], json!("a\"b\\c'{},"));
    assert_eq!(row["body"], Json::Null);
}

#[test]
fn rows_whose_columns_are_set_differently_are_left_to_the_plain_insert() {
    let mut fewer = body("b", b"y");
    fewer.stored_at = NotSet;
    assert!(statement(&[body("a", b"x"), fewer.clone()]).is_none());
    // Nor is a later row's column dropped because the first left it unset.
    assert!(statement(&[fewer, body("a", b"x")]).is_none());
}
