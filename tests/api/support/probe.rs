//! Reading a database directly, as a process of its own would: rows as
//! text, the journal's decisions, and every projection table at once (a
//! snapshot) to compare live state with state rebuilt from the journal.

use std::collections::{BTreeMap, HashMap};

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
use serde_json::Value;
use unicity::domain::journal::JournalEvent;
use unicity::store::projections::TABLES;

use super::counts::Counts;

/// Every column of a projection table as text, rows in primary-key order.
pub struct Table {
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

pub type Snapshot = BTreeMap<&'static str, Table>;

pub struct Probe {
    db: DatabaseConnection,
}

impl Counts for Probe {
    fn db(&self) -> &DatabaseConnection {
        &self.db
    }
}

impl Probe {
    /// A reader of `db`'s tables.
    pub fn of(db: &DatabaseConnection) -> Self {
        Self { db: db.clone() }
    }

    fn backend(&self) -> DbBackend {
        self.db.get_database_backend()
    }

    /// Every row of `sql`, every column read as nullable text.
    pub async fn rows(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        self.settle().await;
        let rows = self
            .db
            .query_all_raw(Statement::from_string(self.backend(), sql.to_owned()))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.iter()
            .map(|row| {
                (0..row.column_names().len())
                    .map(|i| {
                        row.try_get_by_index::<Option<String>>(i)
                            .unwrap_or_else(|e| panic!("{sql}, column {i}: {e}"))
                    })
                    .collect()
            })
            .collect()
    }

    /// The `DecisionMade` payloads of every delivery, in journal order, as
    /// the journal's reader gives them (a row may fold a delivery's events).
    pub async fn decisions(&self) -> HashMap<String, Vec<Value>> {
        let mut decisions: HashMap<String, Vec<Value>> = HashMap::new();
        let mut after = i64::MIN;
        loop {
            let page = unicity::store::journal::page_after(&self.db, after, 500)
                .await
                .expect("the journal reads");
            let Some(last) = page.last() else {
                return decisions;
            };
            after = last.position;
            for stored in page {
                if let (Some(id), JournalEvent::DecisionMade(_)) =
                    (stored.delivery_id, &stored.event)
                {
                    decisions
                        .entry(id.to_string())
                        .or_default()
                        .push(stored.event.data());
                }
            }
        }
    }

    /// The column names of `table`, in declaration order.
    async fn columns(&self, table: &str) -> Vec<String> {
        let sql = match self.backend() {
            DbBackend::Sqlite => {
                format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid")
            }
            _ => format!(
                "SELECT CAST(column_name AS TEXT) FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND table_name = '{table}' \
                 ORDER BY ordinal_position"
            ),
        };
        let columns: Vec<String> = self
            .rows(&sql)
            .await
            .iter()
            .map(|row| text(&row[0]).to_owned())
            .collect();
        assert!(!columns.is_empty(), "table {table} has no columns");
        columns
    }

    /// The primary-key columns of `table`, in key order.
    async fn primary_key(&self, table: &str) -> Vec<String> {
        let sql = match self.backend() {
            DbBackend::Sqlite => {
                format!("SELECT name FROM pragma_table_info('{table}') WHERE pk > 0 ORDER BY pk")
            }
            _ => format!(
                "SELECT CAST(k.column_name AS TEXT) FROM information_schema.table_constraints t \
                 JOIN information_schema.key_column_usage k \
                 ON k.constraint_name = t.constraint_name AND k.table_schema = t.table_schema \
                 AND k.table_name = t.table_name \
                 WHERE t.constraint_type = 'PRIMARY KEY' AND t.table_name = '{table}' \
                 AND t.table_schema = current_schema() ORDER BY k.ordinal_position"
            ),
        };
        self.rows(&sql)
            .await
            .iter()
            .map(|row| text(&row[0]).to_owned())
            .collect()
    }

    pub async fn snapshot(&self) -> Snapshot {
        self.settle().await;
        let mut snapshot = Snapshot::new();
        for table in TABLES {
            let columns = self.columns(table).await;
            let select: Vec<String> = columns
                .iter()
                .map(|c| format!("CAST(\"{c}\" AS TEXT)"))
                .collect();
            let mut order = self.primary_key(table).await;
            if order.is_empty() {
                order.clone_from(&columns);
            }
            let order: Vec<String> = order.iter().map(|c| format!("\"{c}\"")).collect();
            let sql = format!(
                "SELECT {} FROM {table} ORDER BY {}",
                select.join(", "),
                order.join(", ")
            );
            let rows = self.rows(&sql).await;
            snapshot.insert(table, Table { columns, rows });
        }
        snapshot
    }
}

/// A cell read as text, empty for NULL.
pub fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

/// Every projection table rebuilt reads as it did live, row for row and
/// column for column; the tables of `filled` had rows to compare.
pub fn assert_same_projections(live: &Snapshot, rebuilt: &Snapshot, filled: &[&str]) {
    for table in TABLES {
        let (live, rebuilt) = (&live[table], &rebuilt[table]);
        if filled.contains(&table) {
            assert!(!live.rows.is_empty(), "{table} has rows to compare");
        }
        assert_eq!(live.columns, rebuilt.columns);
        assert_eq!(
            live.rows.len(),
            rebuilt.rows.len(),
            "{table}: {} live rows, {} rebuilt",
            live.rows.len(),
            rebuilt.rows.len()
        );
        for (before, after) in live.rows.iter().zip(&rebuilt.rows) {
            let differences: Vec<String> = live
                .columns
                .iter()
                .zip(before.iter().zip(after))
                .filter(|(_, (b, a))| b != a)
                .map(|(column, (b, a))| format!("{column}: live {b:?}, rebuilt {a:?}"))
                .collect();
            assert!(
                differences.is_empty(),
                "{table}: the rebuilt row {:?} differs: {differences:#?}",
                text(&before[0])
            );
        }
    }
}
