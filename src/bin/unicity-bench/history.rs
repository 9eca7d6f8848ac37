//! `--history H`: preloads H journaled deliveries before the measured run, so
//! cost growth with the journal's size can be seen. This is a fast bulk path,
//! not the ingest path: multi-row INSERTs straight into `journal` and
//! `raw_bodies`, in large transactions, while a generator thread renders the
//! next batch. Bodies come from the same generator as the load (another seed),
//! so history holds the same mix of new events, repeats and retries.
//!
//! WHAT IS PRELOADED. Per delivery: its `DeliveryReceived` in `journal`, its
//! body in `raw_bodies` (once per distinct body), its `deliveries` row with a
//! decision (and the provider event id and payment id search finds it by), a
//! `transport_links` row, and an applied effect (its key settled and
//! still in the fast index) with its `effect_deliveries` link under a
//! history-only business key
//! (`history@1:…`, never one the measured load uses). So every table the hot
//! path reads or writes grows with `--history`, the key index and the effects
//! ledger included. The journal holds only the reception of history deliveries
//! (not their `KeyDerived`/`DecisionMade`/`KeyReserved`/`EffectApplied`), so
//! `projections rebuild` on a preloaded database would not reproduce those rows:
//! the preload measures cost growth, it is not a replayable history.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, TransactionTrait};
use unicity::config::Source;
use unicity::domain::delivery::{BodyParse, DeliveryId, REDACTED};
use unicity::domain::journal::{DeliveryReceived, JournalEvent};

use crate::history_rows::Batch;
use crate::payloads::{Facts, Provider};
use crate::prng::hash3;
use crate::server;
use crate::workload::{Kind, Plan};

/// Rows per INSERT statement (SQLite allows 32766 bound values per statement).
const ROWS_PER_STATEMENT: usize = 1_000;
/// Rows per transaction.
const ROWS_PER_TRANSACTION: usize = 50_000;
/// History is spread over at most this much time before now.
const HISTORY_SPAN_SECS: i64 = 30 * 24 * 3600;
/// Salt so that history events never coincide with the measured run's.
const HISTORY_SALT: u64 = 0x4849_5354_4f52_5921;

/// What the preload wrote (passed from the preloading child process as JSON).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct HistoryOutcome {
    pub deliveries: u64,
    /// Of which provider retries of an earlier history event.
    pub retries: u64,
    pub bodies: u64,
    pub elapsed_s: f64,
    /// First and last preloaded deliveries, read back through the store.
    pub verified: Vec<DeliveryId>,
    /// Peak RSS of the process that ran the preload.
    pub peak_rss_mb: Option<f64>,
}

/// One historical delivery: the facts it carries, for projections to derive from.
pub struct HistoryRow {
    pub delivery_id: DeliveryId,
    pub received_at: DateTime<Utc>,
    pub facts: Facts,
    pub kind: Kind,
    pub body: Vec<u8>,
}

/// Renders history rows into batches, on its own thread.
struct Generator {
    plan: Plan,
    seed: u64,
    origins: Vec<(Provider, Source)>,
    start: DateTime<Utc>,
    spacing: TimeDelta,
    /// Bodies already stored in this batch (the same bytes are stored once).
    seen: HashSet<String>,
}

impl Generator {
    fn row(&self, index: usize) -> Option<HistoryRow> {
        let step = self.plan.steps.get(index)?;
        let facts = self.plan.facts(step);
        let body = self.plan.body(step, &facts);
        let received_at = self.start + self.spacing * index as i32;
        // A UUIDv7 of the reception time whose random bits come from the seed,
        // so that the same index always gives the same id.
        let millis = received_at.timestamp_millis().max(0) as u64;
        let mut random = [0u8; 10];
        random[..8].copy_from_slice(&hash3(self.seed, index as u64, 1).to_le_bytes());
        random[8..].copy_from_slice(&hash3(self.seed, index as u64, 2).to_le_bytes()[..2]);
        let uuid = uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid();
        Some(HistoryRow {
            delivery_id: DeliveryId::from_uuid(uuid),
            received_at,
            facts,
            kind: step.kind,
            body,
        })
    }

    fn push(&mut self, batch: &mut Batch, row: HistoryRow) -> anyhow::Result<()> {
        let source = self
            .origins
            .iter()
            .find(|(p, _)| *p == row.facts.provider)
            .map(|(_, s)| s)
            .ok_or_else(|| anyhow!("no source for {:?}", row.facts.provider))?;
        let body_ref = unicity::store::bodies::body_ref(&row.body);
        let sha256 = body_ref.sha256.clone();
        let sha256_of_body = sha256.clone();
        let event = JournalEvent::DeliveryReceived(DeliveryReceived {
            origin: source.origin.clone(),
            received_at: row.received_at,
            headers: headers(&row),
            body: body_ref,
            parse: BodyParse::Json,
            signature_scheme: match row.facts.provider {
                Provider::Norefid => "standard_webhooks".to_owned(),
                Provider::Stripe => "stripe".to_owned(),
            },
            secret_index: Some(0),
            item_of: None,
        });
        if self.seen.insert(sha256.clone()) {
            let size = row.body.len() as i64;
            batch.raw_bodies.push([
                sha256.into(),
                row.body.into(),
                size.into(),
                row.received_at.into(),
            ]);
        }
        let id = row.delivery_id.to_string();
        batch.journal.push([
            id.clone().into(),
            // What sqlx writes for the live path's `Json` value: its text.
            event.data().to_string().into(),
            row.received_at.into(),
        ]);
        // The key index and the effects ledger grow with history too: every
        // preloaded delivery holds a transport link and an applied effect,
        // its key settled within its horizon, under a history-only key (never
        // one the load uses).
        let transport_key = unicity::store::bodies::body_ref(format!("t:{id}").as_bytes()).sha256;
        let business_key = format!(
            "history@1:{}",
            unicity::store::bodies::body_ref(format!("b:{id}").as_bytes()).sha256
        );
        let effect_id =
            uuid::Uuid::from_u128(
                hash3(self.seed, row.delivery_id.as_uuid().as_u128() as u64, 3) as u128,
            )
            .to_string();
        let far = row.received_at + TimeDelta::days(3650);
        let origin = &source.origin;
        batch.deliveries.push([
            id.clone().into(),
            origin.source.clone().into(),
            origin.tenant.clone().into(),
            origin.provider.clone().into(),
            origin.environment.clone().into(),
            row.received_at.into(),
            // What search finds it by: the `evt_` id or `webhook-id`, the payment.
            row.facts.event_id.clone().into(),
            row.facts.payment_id.clone().into(),
            transport_key.clone().into(),
            business_key.clone().into(),
        ]);
        batch.transport_links.push([
            transport_key.into(),
            id.clone().into(),
            sha256_of_body.into(),
            business_key.clone().into(),
            row.received_at.into(),
        ]);
        batch
            .effect_horizons
            .push([effect_id.clone().into(), far.into()]);
        batch.effects.push([
            effect_id.clone().into(),
            business_key.into(),
            far.into(),
            id.clone().into(),
            row.received_at.into(),
            row.received_at.into(),
        ]);
        batch
            .effect_deliveries
            .push([effect_id.into(), id.into(), row.received_at.into()]);
        batch.delivered += 1;
        batch.retries += u64::from(matches!(row.kind, Kind::Retry(_)));
        Ok(())
    }
}

/// The headers ingest would have journaled (signature values masked).
fn headers(row: &HistoryRow) -> Vec<(String, String)> {
    let ts = row.received_at.timestamp().to_string();
    let mut headers = vec![
        ("content-length".to_owned(), row.body.len().to_string()),
        ("content-type".to_owned(), "application/json".to_owned()),
        ("user-agent".to_owned(), "unicity-bench/1".to_owned()),
        ("host".to_owned(), "127.0.0.1:8080".to_owned()),
    ];
    match row.facts.provider {
        Provider::Norefid => {
            headers.push(("webhook-id".to_owned(), row.facts.event_id.clone()));
            headers.push(("webhook-timestamp".to_owned(), ts));
            headers.push(("webhook-signature".to_owned(), REDACTED.to_owned()));
        }
        Provider::Stripe => headers.push(("stripe-signature".to_owned(), REDACTED.to_owned())),
    }
    headers
}

/// Preloads `h` deliveries into the (migrated) database at `database_url`.
pub async fn preload(database_url: &str, h: usize, seed: u64) -> anyhow::Result<HistoryOutcome> {
    let started = Instant::now();
    let db = unicity::store::connect(database_url).await?;
    let backend = db.get_database_backend();
    let sources = server::sources()?;
    let origins = [Provider::Norefid, Provider::Stripe]
        .into_iter()
        .map(|p| {
            let slug = server::source_for(p).0;
            sources
                .iter()
                .find(|s| s.slug() == slug)
                .cloned()
                .map(|s| (p, s))
                .ok_or_else(|| anyhow!("no source {slug}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let spacing_ms = (HISTORY_SPAN_SECS * 1000 / h.max(1) as i64).clamp(1, 2_000);
    let spacing = TimeDelta::milliseconds(spacing_ms);
    let mut generator = Generator {
        plan: Plan::new(seed ^ HISTORY_SALT, h, 1),
        seed: seed ^ HISTORY_SALT,
        origins,
        start: Utc::now() - spacing * h as i32 - TimeDelta::minutes(1),
        spacing,
        seen: HashSet::new(),
    };
    let mut samples = Vec::new();
    if let Some(first) = generator.row(0) {
        samples.push(first.delivery_id);
    }
    if let Some(last) = h.checked_sub(1).and_then(|i| generator.row(i)) {
        samples.push(last.delivery_id);
    }

    let (batches, mut inbox) = tokio::sync::mpsc::channel::<anyhow::Result<Batch>>(4);
    let producer = std::thread::Builder::new()
        .name("history-generator".to_owned())
        .spawn(move || {
            let mut index = 0;
            while index < h {
                generator.seen.clear();
                let mut batch = Batch::new(backend);
                let end = (index + ROWS_PER_STATEMENT).min(h);
                let mut result = Ok(());
                for i in index..end {
                    if let Some(row) = generator.row(i) {
                        result = result.and_then(|()| generator.push(&mut batch, row));
                    }
                }
                index = end;
                if batches.blocking_send(result.map(|()| batch)).is_err() {
                    return;
                }
            }
        })
        .context("cannot spawn the history generator")?;

    let mut outcome = HistoryOutcome::default();
    let mut txn = begin(&db, backend).await?;
    let mut in_txn = 0;
    let mut last_report = Instant::now();
    while let Some(batch) = inbox.recv().await {
        let batch = batch?;
        outcome.deliveries += batch.delivered;
        outcome.retries += batch.retries;
        outcome.bodies += batch.raw_bodies.rows as u64;
        in_txn += batch.delivered as usize;
        let journaled = batch.journal.rows;
        for table in batch.tables() {
            if let Some(statement) = table.statement(backend) {
                txn.execute_raw(statement)
                    .await
                    .context("history bulk insert failed")?;
            }
        }
        // Each delivery's read-model row says where its reception is
        // journaled, as the projector's would: the batch's journal rows are
        // the last ones (read after the writes: on SQLite a read first would
        // pin a snapshot that another connection's commit makes unwritable).
        txn.execute_unprepared(&format!(
            "UPDATE deliveries SET received_position = j.position FROM journal j \
             WHERE j.position > (SELECT MAX(position) FROM journal) - {journaled} \
             AND j.delivery_id = deliveries.delivery_id"
        ))
        .await
        .context("history read-model positions failed")?;
        if in_txn >= ROWS_PER_TRANSACTION {
            txn.commit().await?;
            txn = begin(&db, backend).await?;
            in_txn = 0;
            if last_report.elapsed() > Duration::from_secs(5) {
                note!(
                    "  history: {} / {h} deliveries ({:.0}/s)",
                    outcome.deliveries,
                    outcome.deliveries as f64 / started.elapsed().as_secs_f64()
                );
                last_report = Instant::now();
            }
        }
    }
    txn.commit().await?;
    producer
        .join()
        .map_err(|_| anyhow!("the history generator panicked"))?;
    // The preload wrote the read model's rows itself: its projector starts
    // after them, as a server's that has been running would.
    let head = unicity::store::projector::head(&db).await?;
    unicity::store::projector::reset(&db, unicity::store::projector::DELIVERIES, head).await?;
    settle(&db, backend).await;
    for id in &samples {
        verify(&db, *id).await?;
    }
    let _ = db.close().await;
    outcome.verified = samples;
    outcome.elapsed_s = started.elapsed().as_secs_f64();
    Ok(outcome)
}

/// A bulk transaction. On SQLite its connection gets a page cache large enough
/// to hold a whole transaction's dirty pages (the default 2 MB spills them).
async fn begin(
    db: &DatabaseConnection,
    backend: DbBackend,
) -> anyhow::Result<sea_orm::DatabaseTransaction> {
    let txn = db.begin().await?;
    if backend == DbBackend::Sqlite {
        txn.execute_unprepared("PRAGMA cache_size = -262144")
            .await?;
    }
    Ok(txn)
}

/// Leaves the database as a server that has been running would be: the WAL
/// checkpointed and emptied (SQLite), statistics and a checkpoint done
/// (PostgreSQL), so the bulk load's deferred I/O does not land in the
/// measured phase.
async fn settle(db: &DatabaseConnection, backend: DbBackend) {
    let statements: &[&str] = match backend {
        DbBackend::Postgres => &["ANALYZE", "CHECKPOINT"],
        _ => &["ANALYZE"],
    };
    if backend == DbBackend::Sqlite {
        truncate_wal(db).await;
    }
    for sql in statements {
        if let Err(error) = db.execute_unprepared(sql).await {
            note!("  history: {sql} failed ({error}); continuing");
        }
    }
}

/// `PRAGMA wal_checkpoint(TRUNCATE)` answers a row rather than an error when
/// it could not finish (`busy` = 1: a connection still read an older
/// snapshot); then every frame of the bulk load would stay in the WAL and
/// the server's checkpointer would copy them into the database during the
/// measured phase. Tried again until it finishes, or said.
async fn truncate_wal(db: &DatabaseConnection) {
    let sql = "PRAGMA wal_checkpoint(TRUNCATE)";
    for attempt in 1..=20 {
        let row = db
            .query_one_raw(sea_orm::Statement::from_string(DbBackend::Sqlite, sql))
            .await;
        match row {
            Ok(Some(row)) => {
                let busy: i64 = row.try_get_by_index(0).unwrap_or(1);
                let frames: i64 = row.try_get_by_index(1).unwrap_or(-1);
                let copied: i64 = row.try_get_by_index(2).unwrap_or(-1);
                if busy == 0 {
                    note!(
                        "  history: WAL checkpointed and emptied ({copied} of {frames} frames copied)"
                    );
                    return;
                }
                note!(
                    "  history: checkpoint busy ({copied} of {frames} frames copied), attempt {attempt}"
                );
            }
            Ok(None) => return,
            Err(error) => note!("  history: {sql} failed ({error})"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    note!("  history: the WAL could not be emptied; the measured phase will copy it");
}

/// Reads a preloaded delivery back through Unicity's own store: the bulk rows
/// must decode exactly like ingested ones.
async fn verify(db: &DatabaseConnection, id: DeliveryId) -> anyhow::Result<()> {
    let events = unicity::store::journal::for_delivery(db, id)
        .await
        .with_context(|| format!("preloaded delivery {id} does not read back"))?;
    match events.first().map(|e| &e.event) {
        Some(JournalEvent::DeliveryReceived(received)) => {
            let body = unicity::store::bodies::get(db, &received.body.sha256).await?;
            if body.is_none() {
                return Err(anyhow!("preloaded delivery {id} has no stored body"));
            }
            Ok(())
        }
        _ => Err(anyhow!("preloaded delivery {id} is not in the journal")),
    }
}
