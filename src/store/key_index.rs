//! What a group-commit batch knows of the keys its deliveries touch.
//!
//! A delivery's decision reads two rows (its transport link and its business
//! key's row in `effects`, in the fast index or only the ledger's) and may
//! claim both.
//! Under group commit one writer owns the database for the whole batch (the
//! transaction starts `IMMEDIATE`), so the batch can read those rows for many
//! deliveries in a few statements, decide and claim in memory, one delivery
//! after the other, and write the claims with the batch's deferred rows. A
//! claim made here is checked when it is written: an insert that finds the key
//! taken fails the whole batch rather than act on a stale read.

use std::collections::HashMap;

use sea_orm::sea_query::extension::postgres::PgFunc;
use sea_orm::sea_query::{ArrayType, Expr, ExprTrait, Value};
use sea_orm::{ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityTrait, QueryFilter};

use super::entities::{effect, transport_link};

/// Keys per `IN (…)` list on SQLite, well under its bound-parameter limit.
const KEYS_PER_STATEMENT: usize = 500;

/// The keys one delivery's decision reads.
#[derive(Debug, Clone, Default)]
pub struct IndexKeys {
    pub transport: Option<String>,
    /// Its business key, then the keys of older strategy versions.
    pub business: Vec<String>,
}

/// Keys to read: transport links' and business keys'.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unknown {
    pub links: Vec<String>,
    pub business: Vec<String>,
}

/// Rows known for a set of keys; an entry holding `None` is a key known absent.
#[derive(Debug, Clone, Default)]
pub struct KeyIndex {
    links: HashMap<String, Option<transport_link::Model>>,
    /// A key's row by business key, in the fast index or purged from it
    /// (every version's: a late retry after a version bump is found under
    /// the older key).
    keys: HashMap<String, Option<effect::Model>>,
}

impl KeyIndex {
    /// True when every row `keys` names is known.
    pub fn covers(&self, keys: &IndexKeys) -> bool {
        keys.transport
            .as_ref()
            .is_none_or(|t| self.links.contains_key(t))
            && keys.business.iter().all(|k| self.keys.contains_key(k))
    }

    /// Reads from the database the rows of `keys` not known yet.
    pub async fn load<'k, C: ConnectionTrait>(
        &mut self,
        conn: &C,
        keys: impl IntoIterator<Item = &'k IndexKeys>,
    ) -> Result<(), DbErr> {
        let Unknown { links, business } = self.unknown(keys);
        read_rows::<_, transport_link::Entity>(
            conn,
            links,
            transport_link::Column::TransportKey,
            &mut self.links,
            |r| &r.transport_key,
        )
        .await?;
        read_rows::<_, effect::Entity>(conn, business, effect::Column::Key, &mut self.keys, |r| {
            &r.key
        })
        .await?;
        Ok(())
    }

    /// The keys of `keys` with no row known yet (present or absent), each
    /// once, sorted.
    pub fn unknown<'k>(&self, keys: impl IntoIterator<Item = &'k IndexKeys>) -> Unknown {
        let (mut links, mut business) = (Vec::new(), Vec::new());
        for k in keys {
            links.extend(
                k.transport
                    .iter()
                    .filter(|t| !self.links.contains_key(*t))
                    .cloned(),
            );
            business.extend(
                k.business
                    .iter()
                    .filter(|b| !self.keys.contains_key(*b))
                    .cloned(),
            );
        }
        Unknown {
            links: unique(links),
            business: unique(business),
        }
    }

    /// Records what a read of the `asked` keys found: the rows given, and
    /// every other key asked as known absent.
    pub fn record(
        &mut self,
        asked: Unknown,
        links: Vec<transport_link::Model>,
        rows: Vec<effect::Model>,
    ) {
        self.links
            .extend(asked.links.into_iter().map(|k| (k, None)));
        self.keys
            .extend(asked.business.into_iter().map(|k| (k, None)));
        for link in links {
            self.set_link(link);
        }
        for row in rows {
            self.set_row(row);
        }
    }

    /// A copy of what is known about `keys`, for one delivery to work on.
    pub fn view(&self, keys: &IndexKeys) -> Self {
        let mut view = Self::default();
        if let Some((t, link)) = keys
            .transport
            .as_ref()
            .and_then(|t| self.links.get(t).map(|link| (t, link)))
        {
            view.links.insert(t.clone(), link.clone());
        }
        for k in &keys.business {
            if let Some(row) = self.keys.get(k) {
                view.keys.insert(k.clone(), row.clone());
            }
        }
        view
    }

    /// Takes over what a delivery's view learnt or claimed.
    pub fn merge(&mut self, view: Self) {
        self.links.extend(view.links);
        self.keys.extend(view.keys);
    }

    /// `None` when the key was not loaded; else the row, if any.
    pub fn link(&self, transport_key: &str) -> Option<Option<&transport_link::Model>> {
        self.links.get(transport_key).map(Option::as_ref)
    }

    /// `None` when the key was not loaded; else its row, if any.
    pub fn row(&self, key: &str) -> Option<Option<&effect::Model>> {
        self.keys.get(key).map(Option::as_ref)
    }

    pub fn set_link(&mut self, row: transport_link::Model) {
        self.links.insert(row.transport_key.clone(), Some(row));
    }

    pub fn set_row(&mut self, row: effect::Model) {
        self.keys.insert(row.key.clone(), Some(row));
    }

    /// Records that `key` has no row (a key read just now).
    pub fn set_absent(&mut self, key: &str) {
        self.keys.insert(key.to_owned(), None);
    }
}

/// Reads the rows of `keys` (each once) by `column` into `known`; a key with no row is
/// recorded as known absent. On PostgreSQL in one statement whose text never
/// changes (`column = ANY($1)`, the keys bound as one array), so that it is
/// prepared once per connection; on SQLite a few hundred keys to an `IN (…)`.
async fn read_rows<C, E>(
    conn: &C,
    keys: Vec<String>,
    column: E::Column,
    known: &mut HashMap<String, Option<E::Model>>,
    key_of: fn(&E::Model) -> &String,
) -> Result<(), DbErr>
where
    C: ConnectionTrait,
    E: EntityTrait,
{
    if keys.is_empty() {
        return Ok(());
    }
    let postgres = conn.get_database_backend() == DbBackend::Postgres;
    let per_statement = if postgres {
        keys.len()
    } else {
        KEYS_PER_STATEMENT
    };
    for chunk in keys.chunks(per_statement) {
        known.extend(chunk.iter().map(|k| (k.clone(), None)));
        let filter = if postgres {
            let array = chunk.iter().cloned().map(Value::from).collect();
            let array = Value::Array(ArrayType::String, Some(Box::new(array)));
            Expr::col(column).eq(PgFunc::any(Expr::val(array)))
        } else {
            column.is_in(chunk.iter().map(String::as_str))
        };
        let found = E::find().filter(filter).all(conn).await?;
        for row in found {
            known.insert(key_of(&row).clone(), Some(row));
        }
    }
    Ok(())
}

fn unique(mut keys: Vec<String>) -> Vec<String> {
    keys.sort_unstable();
    keys.dedup();
    keys
}
