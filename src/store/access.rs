//! Queries of operator access: operators, API tokens, sessions and setup
//! links. Times are compared in Rust after reading a row by its key, so the
//! same code holds on both backends whatever their timestamp text form.

use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect,
};

use super::entities::{api_token, operator, password_link, session, setup_token};

pub use api_token::Model as TokenRow;
pub use operator::Model as OperatorRow;
pub use session::Model as SessionRow;

/// Whether `error` is a unique-constraint violation (a name already taken).
pub fn is_unique_violation(error: &DbErr) -> bool {
    matches!(
        error.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
    )
}

pub async fn insert_operator<C: ConnectionTrait>(conn: &C, row: OperatorRow) -> Result<(), DbErr> {
    operator::Entity::insert(operator::ActiveModel {
        id: Set(row.id),
        name: Set(row.name),
        role: Set(row.role),
        password_hash: Set(row.password_hash),
        enabled: Set(row.enabled),
        created_at: Set(row.created_at),
        last_login_at: Set(row.last_login_at),
    })
    .exec_without_returning(conn)
    .await
    .map(|_| ())
}

pub async fn operator_by_name<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<OperatorRow>, DbErr> {
    operator::Entity::find()
        .filter(operator::Column::Name.eq(name))
        .one(conn)
        .await
}

/// The operator named `name`, held as `operator_held` holds one by id.
pub async fn operator_by_name_held<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<OperatorRow>, DbErr> {
    let mut query = operator::Entity::find().filter(operator::Column::Name.eq(name));
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        query = query.lock_shared();
    }
    query.one(conn).await
}

/// The ids of the enabled admins. On PostgreSQL their rows stay locked
/// until the transaction ends, so that two admins changing each other at
/// once are serialised and the second sees the first's change (SQLite's
/// single writer serialises them already).
pub async fn enabled_admins<C: ConnectionTrait>(conn: &C) -> Result<Vec<String>, DbErr> {
    let mut query = operator::Entity::find()
        .filter(operator::Column::Role.eq("admin"))
        .filter(operator::Column::Enabled.eq(true));
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        query = query.lock_exclusive();
    }
    Ok(query.all(conn).await?.into_iter().map(|o| o.id).collect())
}

pub async fn operator_by_id<C: ConnectionTrait>(
    conn: &C,
    id: &str,
) -> Result<Option<OperatorRow>, DbErr> {
    operator::Entity::find_by_id(id.to_owned()).one(conn).await
}

/// An operator's row that, on PostgreSQL, no one may change until the
/// caller's transaction ends: an action decided on the role it holds
/// commits before a demotion, or reads the demoted role.
pub async fn operator_held<C: ConnectionTrait>(
    conn: &C,
    id: &str,
) -> Result<Option<OperatorRow>, DbErr> {
    let mut query = operator::Entity::find_by_id(id.to_owned());
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        query = query.lock_shared();
    }
    query.one(conn).await
}

/// A token's row, held as `operator_held` holds an operator's.
pub async fn token_held<C: ConnectionTrait>(conn: &C, id: &str) -> Result<Option<TokenRow>, DbErr> {
    let mut query = api_token::Entity::find_by_id(id.to_owned());
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        query = query.lock_shared();
    }
    query.one(conn).await
}

pub async fn operators<C: ConnectionTrait>(conn: &C) -> Result<Vec<OperatorRow>, DbErr> {
    operator::Entity::find()
        .order_by_asc(operator::Column::Name)
        .all(conn)
        .await
}

pub async fn any_enabled_admin<C: ConnectionTrait>(conn: &C) -> Result<bool, DbErr> {
    Ok(operator::Entity::find()
        .filter(operator::Column::Role.eq("admin"))
        .filter(operator::Column::Enabled.eq(true))
        .one(conn)
        .await?
        .is_some())
}

/// Sets one column of an operator; returns whether a row changed.
async fn set_operator<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    column: operator::Column,
    value: sea_orm::Value,
) -> Result<bool, DbErr> {
    let result = operator::Entity::update_many()
        .col_expr(column, Expr::value(value))
        .filter(operator::Column::Id.eq(id))
        .exec(conn)
        .await?;
    Ok(result.rows_affected == 1)
}

pub async fn disable_operator<C: ConnectionTrait>(conn: &C, id: &str) -> Result<bool, DbErr> {
    set_operator(conn, id, operator::Column::Enabled, false.into()).await
}

pub async fn set_role<C: ConnectionTrait>(conn: &C, id: &str, role: &str) -> Result<bool, DbErr> {
    set_operator(conn, id, operator::Column::Role, role.into()).await
}

pub async fn set_password_hash<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    hash: &str,
) -> Result<bool, DbErr> {
    set_operator(conn, id, operator::Column::PasswordHash, hash.into()).await
}

pub async fn touch_login<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    set_operator(conn, id, operator::Column::LastLoginAt, Some(at).into()).await
}

pub async fn insert_token<C: ConnectionTrait>(conn: &C, row: TokenRow) -> Result<(), DbErr> {
    api_token::Entity::insert(api_token::ActiveModel {
        id: Set(row.id),
        name: Set(row.name),
        role: Set(row.role),
        token_hash: Set(row.token_hash),
        created_at: Set(row.created_at),
        expires_at: Set(row.expires_at),
        revoked_at: Set(row.revoked_at),
        issued_by: Set(row.issued_by),
    })
    .exec_without_returning(conn)
    .await
    .map(|_| ())
}

pub async fn token_by_hash<C: ConnectionTrait>(
    conn: &C,
    hash: &str,
) -> Result<Option<TokenRow>, DbErr> {
    api_token::Entity::find()
        .filter(api_token::Column::TokenHash.eq(hash))
        .one(conn)
        .await
}

pub async fn token_by_id<C: ConnectionTrait>(
    conn: &C,
    id: &str,
) -> Result<Option<TokenRow>, DbErr> {
    api_token::Entity::find_by_id(id.to_owned()).one(conn).await
}

pub async fn token_by_name<C: ConnectionTrait>(
    conn: &C,
    name: &str,
) -> Result<Option<TokenRow>, DbErr> {
    api_token::Entity::find()
        .filter(api_token::Column::Name.eq(name))
        .one(conn)
        .await
}

pub async fn tokens<C: ConnectionTrait>(conn: &C) -> Result<Vec<TokenRow>, DbErr> {
    api_token::Entity::find()
        .order_by_asc(api_token::Column::Name)
        .all(conn)
        .await
}

/// The tokens `issuer` (an operator's or a token's id) issued that are not
/// revoked, expired or not, by name.
pub async fn unrevoked_tokens_issued_by<C: ConnectionTrait>(
    conn: &C,
    issuer: &str,
) -> Result<Vec<TokenRow>, DbErr> {
    api_token::Entity::find()
        .filter(api_token::Column::IssuedBy.eq(issuer))
        .filter(api_token::Column::RevokedAt.is_null())
        .order_by_asc(api_token::Column::Name)
        .all(conn)
        .await
}

/// The issuers of the unrevoked tokens and unused set-password links, each
/// once.
pub async fn issuers_of_live_grants<C: ConnectionTrait>(conn: &C) -> Result<Vec<String>, DbErr> {
    let mut issuers: Vec<String> = api_token::Entity::find()
        .select_only()
        .column(api_token::Column::IssuedBy)
        .filter(api_token::Column::IssuedBy.is_not_null())
        .filter(api_token::Column::RevokedAt.is_null())
        .into_tuple::<String>()
        .all(conn)
        .await?;
    issuers.extend(
        password_link::Entity::find()
            .select_only()
            .column(password_link::Column::IssuedBy)
            .filter(password_link::Column::IssuedBy.is_not_null())
            .filter(password_link::Column::UsedAt.is_null())
            .into_tuple::<String>()
            .all(conn)
            .await?,
    );
    issuers.sort();
    issuers.dedup();
    Ok(issuers)
}

/// The names of the enabled operators whose password was set through a
/// link `issuer` handed out.
pub async fn operators_set_through_links_of<C: ConnectionTrait>(
    conn: &C,
    issuer: &str,
) -> Result<Vec<String>, DbErr> {
    let ids: Vec<String> = password_link::Entity::find()
        .select_only()
        .column(password_link::Column::OperatorId)
        .filter(password_link::Column::IssuedBy.eq(issuer))
        .filter(password_link::Column::UsedAt.is_not_null())
        .into_tuple::<String>()
        .all(conn)
        .await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    operator::Entity::find()
        .select_only()
        .column(operator::Column::Name)
        .filter(operator::Column::Id.is_in(ids))
        .filter(operator::Column::Enabled.eq(true))
        .order_by_asc(operator::Column::Name)
        .into_tuple::<String>()
        .all(conn)
        .await
}

/// Voids the unused set-password links `issuer` handed out; returns how
/// many there were.
pub async fn delete_unused_password_links_issued_by<C: ConnectionTrait>(
    conn: &C,
    issuer: &str,
) -> Result<u64, DbErr> {
    let result = password_link::Entity::delete_many()
        .filter(password_link::Column::IssuedBy.eq(issuer))
        .filter(password_link::Column::UsedAt.is_null())
        .exec(conn)
        .await?;
    Ok(result.rows_affected)
}

/// Marks a token revoked unless it already is; returns whether it was live.
pub async fn revoke_token<C: ConnectionTrait>(
    conn: &C,
    id: &str,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let result = api_token::Entity::update_many()
        .col_expr(api_token::Column::RevokedAt, Expr::value(Some(at)))
        .filter(api_token::Column::Id.eq(id))
        .filter(api_token::Column::RevokedAt.is_null())
        .exec(conn)
        .await?;
    Ok(result.rows_affected == 1)
}

pub async fn session<C: ConnectionTrait>(
    conn: &C,
    id_hash: &str,
) -> Result<Option<SessionRow>, DbErr> {
    session::Entity::find_by_id(id_hash.to_owned())
        .one(conn)
        .await
}

pub async fn insert_session<C: ConnectionTrait>(conn: &C, row: SessionRow) -> Result<(), DbErr> {
    session::Entity::insert(session::ActiveModel {
        id_hash: Set(row.id_hash),
        operator_id: Set(row.operator_id),
        state: Set(row.state),
        created_at: Set(row.created_at),
        expires_at: Set(row.expires_at),
    })
    .exec_without_returning(conn)
    .await
    .map(|_| ())
}

/// Replaces a live session's state; returns whether it still existed.
pub async fn update_session<C: ConnectionTrait>(
    conn: &C,
    id_hash: &str,
    operator_id: Option<String>,
    state: String,
    expires_at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let result = session::Entity::update_many()
        .col_expr(session::Column::OperatorId, Expr::value(operator_id))
        .col_expr(session::Column::State, Expr::value(state))
        .col_expr(session::Column::ExpiresAt, Expr::value(expires_at))
        .filter(session::Column::IdHash.eq(id_hash))
        .exec(conn)
        .await?;
    Ok(result.rows_affected == 1)
}

pub async fn extend_session<C: ConnectionTrait>(
    conn: &C,
    id_hash: &str,
    expires_at: DateTime<Utc>,
) -> Result<(), DbErr> {
    session::Entity::update_many()
        .col_expr(session::Column::ExpiresAt, Expr::value(expires_at))
        .filter(session::Column::IdHash.eq(id_hash))
        .exec(conn)
        .await
        .map(|_| ())
}

pub async fn delete_session<C: ConnectionTrait>(conn: &C, id_hash: &str) -> Result<(), DbErr> {
    session::Entity::delete_by_id(id_hash.to_owned())
        .exec(conn)
        .await
        .map(|_| ())
}

/// Deletes sessions idle past their time (a sweep: `load` checks each
/// session exactly, this only keeps the table small).
pub async fn delete_expired_sessions<C: ConnectionTrait>(
    conn: &C,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    Ok(session::Entity::delete_many()
        .filter(session::Column::ExpiresAt.lt(now))
        .exec(conn)
        .await?
        .rows_affected)
}

/// Revokes every session of an operator.
pub async fn delete_sessions_of<C: ConnectionTrait>(
    conn: &C,
    operator_id: &str,
) -> Result<u64, DbErr> {
    Ok(session::Entity::delete_many()
        .filter(session::Column::OperatorId.eq(operator_id))
        .exec(conn)
        .await?
        .rows_affected)
}

/// Serialises the first-run setup within the caller's transaction: on
/// PostgreSQL a lock on the setup links that two setups cannot both hold
/// (reads go on), so the second sees the admin the first made. SQLite's
/// write transactions are serial already.
pub async fn lock_setup<C: ConnectionTrait>(conn: &C) -> Result<(), DbErr> {
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        conn.execute_unprepared("LOCK TABLE setup_tokens IN SHARE ROW EXCLUSIVE MODE")
            .await?;
    }
    Ok(())
}

/// Replaces every unused setup link with this one.
pub async fn replace_setup_token<C: ConnectionTrait>(
    conn: &C,
    token_hash: String,
    at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<(), DbErr> {
    setup_token::Entity::delete_many()
        .filter(setup_token::Column::UsedAt.is_null())
        .exec(conn)
        .await?;
    setup_token::Entity::insert(setup_token::ActiveModel {
        token_hash: Set(token_hash),
        created_at: Set(at),
        expires_at: Set(expires_at),
        used_at: Set(None),
    })
    .exec_without_returning(conn)
    .await
    .map(|_| ())
}

pub async fn setup_token<C: ConnectionTrait>(
    conn: &C,
    token_hash: &str,
) -> Result<Option<setup_token::Model>, DbErr> {
    setup_token::Entity::find_by_id(token_hash.to_owned())
        .one(conn)
        .await
}

/// Marks a live setup link used; true for the one caller that did it.
pub async fn claim_setup_token<C: ConnectionTrait>(
    conn: &C,
    token_hash: &str,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let result = setup_token::Entity::update_many()
        .col_expr(setup_token::Column::UsedAt, Expr::value(Some(at)))
        .filter(setup_token::Column::TokenHash.eq(token_hash))
        .filter(setup_token::Column::UsedAt.is_null())
        .filter(setup_token::Column::ExpiresAt.gt(at))
        .exec(conn)
        .await?;
    Ok(result.rows_affected == 1)
}

/// Replaces the operator's unused set-password links with this one: the
/// newest link an admin handed out is the only one that works.
pub async fn replace_password_link<C: ConnectionTrait>(
    conn: &C,
    operator_id: &str,
    token_hash: String,
    at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    issued_by: Option<String>,
) -> Result<(), DbErr> {
    // Two links handed out at once for one operator: the second waits for
    // the first and replaces it (SQLite's single writer serialises them).
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        operator::Entity::find_by_id(operator_id.to_owned())
            .lock_exclusive()
            .one(conn)
            .await?;
    }
    delete_unused_password_links(conn, operator_id).await?;
    password_link::Entity::insert(password_link::ActiveModel {
        token_hash: Set(token_hash),
        operator_id: Set(operator_id.to_owned()),
        created_at: Set(at),
        expires_at: Set(expires_at),
        used_at: Set(None),
        issued_by: Set(issued_by),
    })
    .exec_without_returning(conn)
    .await
    .map(|_| ())
}

/// Voids the operator's unused set-password links (their password was
/// changed another way).
pub async fn delete_unused_password_links<C: ConnectionTrait>(
    conn: &C,
    operator_id: &str,
) -> Result<(), DbErr> {
    password_link::Entity::delete_many()
        .filter(password_link::Column::OperatorId.eq(operator_id))
        .filter(password_link::Column::UsedAt.is_null())
        .exec(conn)
        .await
        .map(|_| ())
}

pub async fn password_link<C: ConnectionTrait>(
    conn: &C,
    token_hash: &str,
) -> Result<Option<password_link::Model>, DbErr> {
    password_link::Entity::find_by_id(token_hash.to_owned())
        .one(conn)
        .await
}

/// Marks a live set-password link used; true for the one caller that did.
pub async fn claim_password_link<C: ConnectionTrait>(
    conn: &C,
    token_hash: &str,
    at: DateTime<Utc>,
) -> Result<bool, DbErr> {
    let result = password_link::Entity::update_many()
        .col_expr(password_link::Column::UsedAt, Expr::value(Some(at)))
        .filter(password_link::Column::TokenHash.eq(token_hash))
        .filter(password_link::Column::UsedAt.is_null())
        .filter(password_link::Column::ExpiresAt.gt(at))
        .exec(conn)
        .await?;
    Ok(result.rows_affected == 1)
}
