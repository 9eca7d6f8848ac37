//! The preload's multi-row statements: one `Table` of bound rows per table,
//! gathered into a `Batch` per statement.

use sea_orm::{DbBackend, Statement, Value};

/// Rows for one table, bound values in column order.
pub struct Table {
    /// `INSERT INTO t (cols) VALUES` …
    head: &'static str,
    /// One row's placeholders, `{}` for each bound value, literals inline.
    row: &'static str,
    /// … `ON CONFLICT …` or empty.
    tail: &'static str,
    values: Vec<Value>,
    pub rows: usize,
}

impl Table {
    pub fn new(head: &'static str, row: &'static str, tail: &'static str) -> Self {
        Self {
            head,
            row,
            tail,
            values: Vec::new(),
            rows: 0,
        }
    }

    pub fn push(&mut self, values: impl IntoIterator<Item = Value>) {
        self.values.extend(values);
        self.rows += 1;
    }

    /// The multi-row statement for the backend (`?` or `$n` placeholders).
    pub fn statement(self, backend: DbBackend) -> Option<Statement> {
        if self.rows == 0 {
            return None;
        }
        let mut sql = String::with_capacity(self.head.len() + self.rows * (self.row.len() + 16));
        sql.push_str(self.head);
        let mut n = 0;
        for r in 0..self.rows {
            if r > 0 {
                sql.push(',');
            }
            for (i, piece) in self.row.split("{}").enumerate() {
                if i > 0 {
                    n += 1;
                    match backend {
                        DbBackend::Postgres => sql.push_str(&format!("${n}")),
                        _ => sql.push('?'),
                    }
                }
                sql.push_str(piece);
            }
        }
        sql.push_str(self.tail);
        Some(Statement::from_sql_and_values(backend, sql, self.values))
    }
}

/// One statement's worth of rows for every table.
pub struct Batch {
    pub journal: Table,
    pub raw_bodies: Table,
    pub deliveries: Table,
    pub transport_links: Table,
    pub effects: Table,
    pub effect_horizons: Table,
    pub effect_deliveries: Table,
    pub delivered: u64,
    pub retries: u64,
}

impl Batch {
    pub fn new(backend: DbBackend) -> Self {
        Self {
            journal: Table::new(
                "INSERT INTO journal (delivery_id, event_type, event_version, data, recorded_at) VALUES ",
                // `data` is bound as JSON text (serialised on the generator thread).
                match backend {
                    DbBackend::Postgres => "({}, 'DeliveryReceived', 1, CAST({} AS JSON), {})",
                    _ => "({}, 'DeliveryReceived', 1, {}, {})",
                },
                "",
            ),
            raw_bodies: Table::new(
                "INSERT INTO raw_bodies (sha256, body, size, stored_at, redacted_at) VALUES ",
                "({}, {}, {}, {}, NULL)",
                " ON CONFLICT DO NOTHING",
            ),
            deliveries: Table::new(
                "INSERT INTO deliveries (delivery_id, source, tenant, provider, environment, received_at, status, \
                 event_type, provider_event_id, resource, \
                 transport_key, business_key, strategy, strength, decision, reason, layer) VALUES ",
                "({}, {}, {}, {}, {}, {}, 'received', 'refund.created', {}, {}, {}, {}, 'history@1', 'strong', 'process', 'new_key', 'business')",
                "",
            ),
            transport_links: Table::new(
                "INSERT INTO transport_links (transport_key, first_delivery_id, body_fingerprint, business_key, created_at) VALUES ",
                "({}, {}, {}, {}, {})",
                " ON CONFLICT DO NOTHING",
            ),
            effects: Table::new(
                "INSERT INTO effects (effect_id, key, effect_type, criticality, state, fencing_token, lease_until, \
                 expires_at, key_purged, sink, result, downstream_ref, \
                 first_delivery_id, discriminants, created_at, settled_at, evidence_purged_at) VALUES ",
                match backend {
                    DbBackend::Postgres => {
                        "({}, {}, 'refund.create', 'critical', 'applied', 1, NULL, {}, FALSE, 'record', NULL, NULL, {}, CAST('{ }' AS JSONB), {}, {}, NULL)"
                    }
                    _ => {
                        "({}, {}, 'refund.create', 'critical', 'applied', 1, NULL, {}, FALSE, 'record', NULL, NULL, {}, '{ }', {}, {}, NULL)"
                    }
                },
                "",
            ),
            effect_horizons: Table::new(
                "INSERT INTO effect_horizons (effect_id, expires_at) VALUES ",
                "({}, {})",
                "",
            ),
            effect_deliveries: Table::new(
                "INSERT INTO effect_deliveries (effect_id, delivery_id, linked_at) VALUES ",
                "({}, {}, {})",
                "",
            ),
            delivered: 0,
            retries: 0,
        }
    }

    /// Tables in insertion order.
    pub fn tables(self) -> [Table; 7] {
        [
            self.raw_bodies,
            self.journal,
            self.deliveries,
            self.transport_links,
            self.effects,
            self.effect_horizons,
            self.effect_deliveries,
        ]
    }
}
