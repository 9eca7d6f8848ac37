//! Which writer a job goes to (routing shards) and what a batch owns until it
//! commits (PostgreSQL advisory locks on its keys). Two batches wait on each
//! other only when they share a key, and take their locks in one order, so
//! never in a cycle. The hash and lock numbers are shared by every process on
//! a database: changing them breaks the protocol.

use sea_orm::sea_query::{ArrayType, Value};
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    SqliteTransactionMode, Statement, TransactionOptions, TransactionTrait,
};

use crate::store::Tx;
use crate::store::deferred::Deferred;
use crate::store::entities::{effect, transport_link};
use crate::store::key_index::{IndexKeys, KeyIndex};

/// Writers' queues on PostgreSQL: a job goes to the writer of its key's
/// shard, so that the deliveries of one key meet in one batch. Routing only:
/// what a batch owns is its keys themselves (`lock_set`).
const ROUTING_SHARDS: u32 = 64;
/// First key of the transaction-scoped advisory locks a batch holds on each
/// of its keys (PostgreSQL's two-integer form: class, key hash). Part of the
/// locking protocol every process on a database must share.
const KEY_LOCK_CLASS: i32 = 0x756e_696b; // "unik"
/// The lock every keyed batch holds shared and work that may touch any key
/// holds exclusively.
const ANY_KEY_LOCK: (i32, i32) = (0x756e_6961, 0); // "unia"

/// 32-bit FNV-1a: stable across processes, builds and platforms, unlike
/// std's hashers, which may change between Rust releases.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash: u32, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    })
}

/// The routing shard of a key.
fn shard_of(key: &str) -> u32 {
    fnv1a(key.as_bytes()) % ROUTING_SHARDS
}

/// The shard a job is routed by: its business key's, else its transport
/// key's; `None` for a job with no key.
pub(super) fn shard(keys: &IndexKeys) -> Option<usize> {
    keys.business
        .first()
        .or(keys.transport.as_ref())
        .map(|key| shard_of(key) as usize)
}

/// What a batch must own until it commits.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum LockSet {
    /// The lock of every business key its jobs read (their transport keys'
    /// if they have none), by hash, ascending, and `ANY_KEY_LOCK` shared.
    Keys(Vec<i32>),
    /// Everything: a job may read any key (`ANY_KEY_LOCK` exclusive).
    Any,
}

/// The locks a batch of these jobs takes. Two batches wait on each other
/// only when they share a key (or two keys share a 32-bit hash). Transport
/// links are not covered: they are only ever inserted, and a link another
/// writer inserted meanwhile makes this batch's claim of it fail at insert
/// (`claim_all`), never act on the stale read.
pub(super) fn lock_set<'k>(jobs: impl IntoIterator<Item = Option<&'k IndexKeys>>) -> LockSet {
    let mut hashes = Vec::new();
    for keys in jobs {
        let Some(keys) = keys else {
            return LockSet::Any;
        };
        let named = if keys.business.is_empty() {
            keys.transport.as_slice()
        } else {
            keys.business.as_slice()
        };
        hashes.extend(named.iter().map(|k| fnv1a(k.as_bytes()).cast_signed()));
    }
    hashes.sort_unstable();
    hashes.dedup();
    LockSet::Keys(hashes)
}

/// Makes the batch the only writer of its keys until it commits. SQLite's
/// `IMMEDIATE` transaction already owns the whole database; on PostgreSQL the
/// batch takes `locks` in ascending order of key hash (so that two batches
/// never wait on each other in a cycle), after the shared hold on
/// `ANY_KEY_LOCK` that keeps work touching any key out meanwhile. A keyed
/// batch reads, in the same round trip and once its locks are held, the rows
/// of `first`'s keys (the jobs it runs first) into `index`.
pub(super) async fn own_writes<'k>(
    txn: &DatabaseTransaction,
    locks: &LockSet,
    index: &mut KeyIndex,
    first: impl IntoIterator<Item = &'k IndexKeys>,
) -> Result<(), DbErr> {
    if txn.get_database_backend() != DbBackend::Postgres {
        return Ok(());
    }
    match locks {
        LockSet::Any => {
            let (any_class, any_key) = ANY_KEY_LOCK;
            txn.execute_unprepared(&format!(
                "SELECT pg_advisory_xact_lock({any_class}, {any_key})"
            ))
            .await?;
            Ok(())
        }
        LockSet::Keys(hashes) => own_keys_then_read(txn, hashes, index, first).await,
    }
}

/// One round trip (`unicity_own_keys_then_read`, migration 050): the locks of
/// `hashes`, then the rows of `first`'s keys not in `index` yet, read by a
/// statement whose snapshot is taken once the locks are held. Its text never
/// changes, so each connection prepares it once.
async fn own_keys_then_read<'k>(
    txn: &DatabaseTransaction,
    hashes: &[i32],
    index: &mut KeyIndex,
    first: impl IntoIterator<Item = &'k IndexKeys>,
) -> Result<(), DbErr> {
    #[derive(serde::Deserialize)]
    struct Found {
        links: Vec<transport_link::Model>,
        effects: Vec<effect::Model>,
    }
    let asked = index.unknown(first);
    if hashes.is_empty() && asked.links.is_empty() && asked.business.is_empty() {
        return Ok(());
    }
    let (any_class, any_key) = ANY_KEY_LOCK;
    let strings = |keys: &[String]| {
        let values = keys.iter().cloned().map(Value::from).collect();
        Value::Array(ArrayType::String, Some(Box::new(values)))
    };
    let hash_values = hashes.iter().copied().map(Value::from).collect();
    let statement = Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT unicity_own_keys_then_read($1, $2, $3, $4, $5, $6) AS found",
        [
            any_class.into(),
            any_key.into(),
            KEY_LOCK_CLASS.into(),
            Value::Array(ArrayType::Int, Some(Box::new(hash_values))),
            strings(&asked.links),
            strings(&asked.business),
        ],
    );
    let row = txn
        .query_one_raw(statement)
        .await?
        .ok_or_else(|| DbErr::RecordNotFound("the keys' rows".to_owned()))?;
    let text: String = row.try_get("", "found")?;
    // serde's message may quote a value it did not expect: say where, not what.
    let found: Found = serde_json::from_str(&text).map_err(|error| {
        DbErr::Custom(format!(
            "the keys' rows could not be read ({:?} error at column {})",
            error.classify(),
            error.column()
        ))
    })?;
    index.record(asked, found.links, found.effects);
    Ok(())
}

/// Makes the transaction the only writer of every key until it commits, as
/// a batch of keyless jobs is: every group-commit batch of every process in
/// flight is waited for, and the next ones wait. For work outside the writer
/// that judges every reservation at once (`store::transaction_owning_reservations`).
async fn own_every_key(txn: &DatabaseTransaction) -> Result<(), DbErr> {
    own_writes(txn, &LockSet::Any, &mut KeyIndex::default(), []).await
}

/// A transaction owning every reservation until it ends, as
/// `transaction_owning_reservations` runs its work in; also for rebuilding
/// the projections, which clears and rewrites them while processes run.
pub async fn begin_owning_reservations(
    db: &DatabaseConnection,
) -> Result<DatabaseTransaction, DbErr> {
    let immediate = TransactionOptions {
        sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
        ..TransactionOptions::default()
    };
    let txn = db.begin_with_options(immediate).await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        own_every_key(&txn).await?;
        txn.execute_unprepared("LOCK TABLE effects IN SHARE ROW EXCLUSIVE MODE")
            .await?;
    }
    Ok(txn)
}

/// Runs `work` as `transaction` does, owning every reservation until it
/// commits: for the rare work that judges them all at once (retiring a
/// strategy version), so that what it reads of them stays true until its
/// writes are committed. No reservation is taken, settled or expired
/// meanwhile, by any process, and two such transactions run one after the
/// other. SQLite: an `IMMEDIATE` transaction, the database's only writer
/// from its first statement. PostgreSQL: every key owned as a keyless
/// writer batch owns them (group-commit batches in flight are waited for,
/// the next ones wait), then `effects` (where reservations live) locked against writes (a writer
/// in direct mode waits too); readers never wait.
pub async fn transaction_owning_reservations<T, E>(
    db: &DatabaseConnection,
    work: impl AsyncFnOnce(&mut Tx<'_>) -> Result<T, E>,
) -> Result<T, E>
where
    E: From<DbErr>,
{
    let txn = begin_owning_reservations(db).await?;
    let mut tx = Tx::new(&txn, Deferred::default());
    let value = work(&mut tx).await?;
    tx.into_rows().flush(&txn).await?;
    txn.commit().await?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_come_from_fnv_1a_as_published() {
        // Published FNV-1a 32-bit vectors: every process must agree on them.
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
        assert_eq!(fnv1a(b"foobar"), 0xbf9c_f968);
        assert_eq!(shard_of("a"), 0xe40c_292c % ROUTING_SHARDS);
    }

    #[test]
    fn a_batch_locks_its_own_keys_or_everything_for_keyless_work() {
        let keyed = IndexKeys {
            transport: Some("t".to_owned()),
            business: vec![
                "stripe-refund@2:k".to_owned(),
                "stripe-refund@1:k".to_owned(),
            ],
        };
        let unkeyed = IndexKeys {
            transport: Some("only-transport".to_owned()),
            business: Vec::new(),
        };
        let hash = |k: &str| fnv1a(k.as_bytes()).cast_signed();
        let mut expected = vec![
            hash("stripe-refund@2:k"),
            hash("stripe-refund@1:k"),
            hash("only-transport"),
        ];
        expected.sort_unstable();
        assert_eq!(
            lock_set([Some(&keyed), Some(&keyed), Some(&unkeyed)]),
            LockSet::Keys(expected)
        );
        // A transport key is locked only for a job without a business key.
        assert!(!matches!(lock_set([Some(&keyed)]), LockSet::Keys(h) if h.contains(&hash("t"))));
        // Routed by the newest business key, else the transport key.
        assert_eq!(shard(&keyed), Some(shard_of("stripe-refund@2:k") as usize));
        assert_eq!(shard(&unkeyed), Some(shard_of("only-transport") as usize));
        // Work that may read any key owns everything.
        assert_eq!(lock_set([Some(&keyed), None]), LockSet::Any);
    }
}
