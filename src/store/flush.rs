//! Writing what a transaction deferred, just before its commit: every row of
//! `Deferred`: on SQLite one statement per table, journal rows last; on
//! PostgreSQL every table's rows in one statement (`bulk`). A claim
//! made in memory (a link, a key, a retake, a settlement) that the
//! database refuses fails the flush, and with it the transaction: nothing of
//! it commits. This is the one place journal rows are written.

use sea_orm::sea_query::{Query, Value};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbBackend, DbErr, EntityName, IdenStatic,
    IntoActiveModel,
};

use super::bulk::{self, Part};
use super::deferred::Deferred;
use super::entities::journal;
use super::journal as journal_store;
use super::{checkpoint, projections};

impl Deferred {
    /// Writes every row and empties self.
    /// A claim made in memory that the database refuses fails the flush.
    pub async fn flush<C: ConnectionTrait>(&mut self, conn: &C) -> Result<(), DbErr> {
        if conn.get_database_backend() == DbBackend::Postgres {
            return self.flush_postgres(conn).await;
        }
        claim_all(conn, active(std::mem::take(&mut self.links))).await?;
        claim_all(conn, active(std::mem::take(&mut self.keys))).await?;
        self.update_claims(conn).await?;
        // A row already there is the same row (a body, a link): skipped.
        bulk::insert(conn, std::mem::take(&mut self.effect_links)).await?;
        bulk::insert(conn, std::mem::take(&mut self.cases)).await?;
        bulk::insert(conn, std::mem::take(&mut self.bodies)).await?;
        bulk::insert(conn, std::mem::take(&mut self.deferrals)).await?;
        // Journal rows have no key to collide on: a plain insert, so that a
        // bug can never silently drop an event.
        insert_journal(conn, std::mem::take(&mut self.journal)).await?;
        Ok(())
    }
}

impl Deferred {
    /// PostgreSQL: every row in one statement and one round trip
    /// (`bulk::unnest_all`), or, when keys are retaken or settled (updates
    /// that must see the rows claimed before them), the claims, the updates,
    /// then the rest.
    async fn flush_postgres<C: ConnectionTrait>(&mut self, conn: &C) -> Result<(), DbErr> {
        let links = std::mem::take(&mut self.links);
        let keys = std::mem::take(&mut self.keys);
        let mut parts = vec![
            (Part::of(active(links))?, Must::Claim),
            (Part::of(active(keys))?, Must::Claim),
        ];
        if !self.retakes.is_empty() || !self.settlements.is_empty() {
            write_parts(conn, std::mem::take(&mut parts)).await?;
            self.update_claims(conn).await?;
        }
        parts.extend([
            (
                Part::of(std::mem::take(&mut self.effect_links))?,
                Must::Nothing,
            ),
            (Part::of(std::mem::take(&mut self.cases))?, Must::Nothing),
            (Part::of(std::mem::take(&mut self.bodies))?, Must::Nothing),
            (
                Part::of(std::mem::take(&mut self.deferrals))?,
                Must::Nothing,
            ),
            (
                journal_part(std::mem::take(&mut self.journal)),
                Must::Journal,
            ),
        ]);
        write_parts(conn, parts).await
    }
}

impl Deferred {
    /// Takes keys back and settles them, each update checked.
    async fn update_claims<C: ConnectionTrait>(&mut self, conn: &C) -> Result<(), DbErr> {
        for (claim, at) in std::mem::take(&mut self.retakes) {
            if projections::retake(conn, &claim, at).await? != 1 {
                return Err(stale_claim("key", &claim.key));
            }
        }
        for (settled, at) in std::mem::take(&mut self.settlements) {
            if projections::settle(conn, &settled, at).await? != 1 {
                return Err(stale_claim("settlement", &settled.key));
            }
        }
        Ok(())
    }
}

/// What a part's insert must have done for the flush to go on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Must {
    /// Inserted every row: they were claimed in memory.
    Claim,
    /// Inserted every row: journal rows are never skipped.
    Journal,
    /// Nothing: a row already there is the same row (a body, a link).
    Nothing,
}

fn active<M: IntoActiveModel<A>, A: ActiveModelTrait>(rows: Vec<M>) -> Vec<A> {
    rows.into_iter()
        .map(|r| r.into_active_model().reset_all())
        .collect()
}

/// Inserts `parts` in one statement and checks what each must have done.
async fn write_parts<C: ConnectionTrait>(conn: &C, parts: Vec<(Part, Must)>) -> Result<(), DbErr> {
    let expected: Vec<(&'static str, usize, Must)> = parts
        .iter()
        .map(|(part, must)| (part.table, part.rows(), *must))
        .collect();
    let inserted = bulk::unnest_all(conn, parts.into_iter().map(|(p, _)| p).collect()).await?;
    for ((table, rows, must), inserted) in expected.into_iter().zip(inserted) {
        if inserted == rows as u64 {
            continue;
        }
        match must {
            Must::Claim => return Err(stale_claim(table, "a batch")),
            Must::Journal => return Err(journal_refused(inserted, rows)),
            Must::Nothing => {}
        }
    }
    Ok(())
}

fn journal_refused(inserted: u64, expected: usize) -> DbErr {
    DbErr::Custom(format!(
        "the journal took {inserted} of {expected} rows: nothing in this batch is committed"
    ))
}

/// Inserts rows claimed in memory; every one must take.
async fn claim_all<C, A>(conn: &C, rows: Vec<A>) -> Result<(), DbErr>
where
    C: ConnectionTrait,
    A: ActiveModelTrait + Send,
{
    let expected = rows.len() as u64;
    if bulk::insert(conn, rows).await? != expected {
        let table = A::Entity::default().table_name();
        return Err(stale_claim(table, "a batch"));
    }
    Ok(())
}

/// A claim made against a read the database no longer agrees with. Never
/// expected under the batch's write lock; failing is the safe answer.
fn stale_claim(what: &str, key: &str) -> DbErr {
    DbErr::Custom(format!(
        "a {what} claim for {key} was refused by the database: nothing in this batch is committed"
    ))
}

/// Inserts `rows` in order, in one statement on PostgreSQL (`bulk::unnest`),
/// in as few as `bulk::statements` allows on SQLite. The payload is bound as
/// text, cast to `json` on PostgreSQL, so that it is kept as written.
///
/// On PostgreSQL the transaction first takes the journal's lock shared, until
/// it ends: a position is then never handed out while the projector's fence
/// holds it (`checkpoint::fence`).
pub(super) async fn insert_journal<C: ConnectionTrait>(
    conn: &C,
    rows: Vec<journal_store::Row>,
) -> Result<(), DbErr> {
    if rows.is_empty() {
        return Ok(());
    }
    if conn.get_database_backend() == DbBackend::Postgres {
        let expected = rows.len();
        let inserted = bulk::unnest_all(conn, vec![journal_part(rows)]).await?[0];
        if inserted != expected as u64 {
            return Err(journal_refused(inserted, expected));
        }
        return Ok(());
    }
    for chunk in bulk::statements(rows) {
        let mut insert = Query::insert();
        insert.into_table(journal::Entity).columns([
            journal::Column::DeliveryId,
            journal::Column::EventType,
            journal::Column::EventVersion,
            journal::Column::Data,
            journal::Column::RecordedAt,
        ]);
        for row in chunk {
            insert.values_panic([
                row.delivery_id.into(),
                row.event_type.into(),
                row.event_version.into(),
                row.data.into(),
                row.recorded_at.into(),
            ]);
        }
        conn.execute(&insert).await?;
    }
    Ok(())
}

/// `rows` as part of a PostgreSQL bulk insert: appended in order, after the
/// journal's lock is taken shared (`checkpoint::share_the_journal`).
fn journal_part(rows: Vec<journal_store::Row>) -> Part {
    Part {
        table: journal::Entity.table_name(),
        columns: journal_columns(rows),
        mode: bulk::Mode::Append,
        first: Some(checkpoint::share_the_journal()),
    }
}

/// `rows` as the columns of a PostgreSQL bulk insert.
fn journal_columns(rows: Vec<journal_store::Row>) -> Vec<bulk::Column> {
    let n = rows.len();
    let mut columns: [Vec<Value>; 5] = std::array::from_fn(|_| Vec::with_capacity(n));
    for row in rows {
        columns[0].push(row.delivery_id.into());
        columns[1].push(row.event_type.into());
        columns[2].push(row.event_version.into());
        columns[3].push(row.data.into());
        columns[4].push(row.recorded_at.into());
    }
    let [delivery_id, event_type, event_version, data, recorded_at] = columns;
    let column = |column: journal::Column, values, cast| bulk::Column {
        name: column.as_str(),
        nullable: column.def().is_null(),
        values,
        cast,
    };
    vec![
        column(journal::Column::DeliveryId, delivery_id, None),
        column(journal::Column::EventType, event_type, None),
        column(journal::Column::EventVersion, event_version, None),
        column(journal::Column::Data, data, Some("json")),
        column(journal::Column::RecordedAt, recorded_at, None),
    ]
}
