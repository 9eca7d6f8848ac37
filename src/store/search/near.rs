//! What the searched columns' indexes hold next to a text, and in which
//! order they hold it.

use sea_orm::{
    ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, Order, QueryFilter, QueryOrder,
    QuerySelect, Select, Statement,
};

use crate::store::entities::delivery;

/// How a prefix range is written so that it holds exactly the texts that
/// start with the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextOrder {
    /// The columns' own collation is code point order (SQLite's `BINARY`,
    /// PostgreSQL's `C`, `POSIX`, `C.UTF-8`): plain comparisons, which read
    /// the indexes.
    Indexed,
    /// Another collation (`en_US.UTF-8`, ICU) sorts `pay_1` and `pay-1`
    /// together: comparisons name the `C` collation, which the indexes
    /// (built in the database's) cannot answer, so the table is read.
    /// Creating the database with `--locale=C.UTF-8` avoids it.
    Explicit,
}

/// The order the `deliveries` columns' text sorts in: the database's
/// default collation, as no column names one.
pub async fn text_order<C: ConnectionTrait>(conn: &C) -> Result<TextOrder, DbErr> {
    if conn.get_database_backend() != DbBackend::Postgres {
        return Ok(TextOrder::Indexed);
    }
    // `datlocprovider` exists from PostgreSQL 15 on: read through JSON, a
    // missing one is libc's.
    let row = conn
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT datcollate::text AS collate, \
             COALESCE(to_jsonb(d) ->> 'datlocprovider', 'c') AS provider \
             FROM pg_database d WHERE datname = current_database()",
        ))
        .await?;
    let Some(row) = row else {
        return Ok(TextOrder::Explicit);
    };
    let collate: String = row.try_get("", "collate")?;
    let provider: String = row.try_get("", "provider")?;
    Ok(if code_point_order(&provider, &collate) {
        TextOrder::Indexed
    } else {
        TextOrder::Explicit
    })
}

/// PostgreSQL's builtin provider sorts by code point whatever its locale;
/// libc does in `C`, `POSIX` and `C.<encoding>`; ICU never does.
fn code_point_order(provider: &str, collate: &str) -> bool {
    match provider {
        "b" => true,
        "c" => collate == "C" || collate == "POSIX" || collate.starts_with("C."),
        _ => false,
    }
}

/// The values nearest to `text` in each searched column's index: the one
/// just below and the one just above, one row each, with the column's name.
pub async fn neighbours<C: ConnectionTrait>(
    conn: &C,
    text: &str,
) -> Result<Vec<(&'static str, String)>, DbErr> {
    let mut found = Vec::new();
    for (name, query) in neighbour_queries(text) {
        if let Some(value) = query.into_tuple::<String>().one(conn).await? {
            found.push((name, value));
        }
    }
    Ok(found)
}

/// `neighbours`' queries, each with the name of the column it reads (their
/// plans are tested).
pub fn neighbour_queries(text: &str) -> Vec<(&'static str, Select<delivery::Entity>)> {
    use delivery::Column as C;
    let mut queries = Vec::new();
    for (name, column) in [
        ("delivery_id", C::DeliveryId),
        ("provider_event_id", C::ProviderEventId),
        ("business_key", C::BusinessKey),
        ("resource", C::Resource),
    ] {
        for (bound, order) in [
            (column.lt(text), Order::Desc),
            (column.gt(text), Order::Asc),
        ] {
            queries.push((
                name,
                delivery::Entity::find()
                    .select_only()
                    .column(column)
                    .filter(bound)
                    .order_by(column, order)
                    .limit(1),
            ));
        }
    }
    queries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_code_point_collations_let_a_prefix_read_the_indexes() {
        for (provider, collate) in [("c", "C"), ("c", "POSIX"), ("c", "C.UTF-8"), ("b", "C")] {
            assert!(code_point_order(provider, collate), "{provider} {collate}");
        }
        for (provider, collate) in [("c", "en_US.UTF-8"), ("i", "C"), ("c", "fr_FR")] {
            assert!(!code_point_order(provider, collate), "{provider} {collate}");
        }
    }
}
