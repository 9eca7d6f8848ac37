//! One-time tokens of case resolution forms (`case_form_tokens`), stored as
//! their SHA-256. Consuming one is a single `DELETE`: of two posts of the
//! same form, exactly one sees its row deleted.

use chrono::{DateTime, Utc};
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use super::entities::case_form_token;

/// Stores a new token, and drops the expired ones.
pub async fn issue<C: ConnectionTrait>(
    conn: &C,
    token_hash: String,
    case_id: &str,
    operator_id: &str,
    expires_at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    case_form_token::Entity::delete_many()
        .filter(case_form_token::Column::ExpiresAt.lt(now))
        .exec(conn)
        .await?;
    case_form_token::Entity::insert(case_form_token::ActiveModel {
        token_hash: Set(token_hash),
        case_id: Set(case_id.to_owned()),
        operator_id: Set(operator_id.to_owned()),
        expires_at: Set(expires_at),
    })
    .exec_without_returning(conn)
    .await
    .map(drop)
}

/// Deletes the token if it is live and was issued to this operator for this
/// case; true when this call deleted it.
pub async fn consume<C: ConnectionTrait>(
    conn: &C,
    token_hash: &str,
    case_id: &str,
    operator_id: &str,
    now: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let deleted = case_form_token::Entity::delete_many()
        .filter(case_form_token::Column::TokenHash.eq(token_hash))
        .filter(case_form_token::Column::CaseId.eq(case_id))
        .filter(case_form_token::Column::OperatorId.eq(operator_id))
        .filter(case_form_token::Column::ExpiresAt.gt(now))
        .exec(conn)
        .await?;
    Ok(deleted.rows_affected == 1)
}
