//! The embedded store's bookkeeping inside redb (the `meta` table): which store the database is,
//! how far into the write-ahead log it holds, which log generation belongs to it, how far that
//! log was durably written at the last checkpoint, and whether the last run stopped cleanly. Read
//! when the store opens (`recovery`), written by the open and the writer.

use super::internal;
use oncekey_store::StoreError;
use redb::{Database, ReadableDatabase, TableDefinition, TableError, WriteTransaction};

/// name → value.
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// The last write-ahead log frame redb holds.
const WAL_SEQ: &str = "wal_seq";
/// The store's id: the data directory's identity file names it, and it keys the log's checksums.
const WAL_ID: &str = "wal_id";
/// The generation named by the header of the log that belongs to this database, and the one
/// before it (the log may still carry that one when a crash hit right after the open).
const WAL_GENERATION: &str = "wal_generation";
const WAL_PREVIOUS_GENERATION: &str = "wal_previous_generation";
/// The generation whose log this version made, with marks (`wal`); versions before marks leave
/// it behind, so a generation other than the current one means its log has none.
const WAL_MARKED_GENERATION: &str = "wal_marked_generation";
/// The last frame the database held when the current generation's log was made.
const WAL_START: &str = "wal_start";
/// The mark the current generation's log durably held at the last checkpoint.
const WAL_MARK: &str = "wal_mark";
/// 1 when the last run ended with a final checkpoint (the log then holds nothing redb lacks),
/// 0 once a run has opened the database since.
const CLEAN: &str = "clean_shutdown";

/// What the `meta` table says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Meta {
    /// The store's id, if the database has one (versions before the log had none).
    pub id: Option<u64>,
    /// The last log frame the database holds.
    pub applied: u64,
    /// Whether the last run stopped cleanly; `None` when no version that records it opened the
    /// database.
    pub clean: Option<bool>,
    /// The log generations that belong to the database, newest first.
    pub generations: Vec<u64>,
    /// What the database knows of the current generation's log, when this version made it.
    pub log: Option<LogMeta>,
}

/// What the database knows of the log of its current generation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogMeta {
    /// The generation.
    pub generation: u64,
    /// The last frame the database held when the log was made.
    pub start: u64,
    /// The mark the log durably held at the last checkpoint.
    pub mark: u64,
}

/// Reads the `meta` table of `db` (empty for a new database).
pub(crate) fn read(db: &Database) -> Result<Meta, StoreError> {
    let txn = db.begin_read().map_err(internal)?;
    let table = match txn.open_table(META) {
        Ok(table) => table,
        Err(TableError::TableDoesNotExist(_)) => return Ok(Meta::default()),
        Err(e) => return Err(internal(e)),
    };
    let get = |name| -> Result<Option<u64>, StoreError> {
        Ok(table.get(name).map_err(internal)?.map(|v| v.value()))
    };
    let generation = get(WAL_GENERATION)?;
    let log = match (generation, get(WAL_MARKED_GENERATION)?) {
        (Some(generation), Some(marked)) if generation == marked => Some(LogMeta {
            generation,
            start: get(WAL_START)?.unwrap_or(0),
            mark: get(WAL_MARK)?.unwrap_or(0),
        }),
        _ => None,
    };
    Ok(Meta {
        id: get(WAL_ID)?,
        applied: get(WAL_SEQ)?.unwrap_or(0),
        clean: get(CLEAN)?.map(|v| v == 1),
        generations: [generation, get(WAL_PREVIOUS_GENERATION)?]
            .into_iter()
            .flatten()
            .collect(),
        log,
    })
}

/// Records in `txn` that the database is store `id`, its log generation is `generation` (after
/// `previous`) with marks, starting after frame `seq`, and that a run has opened it.
pub(crate) fn set_opened(
    txn: &WriteTransaction,
    id: u64,
    generation: u64,
    previous: Option<u64>,
    seq: u64,
) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META).map_err(internal)?;
    meta.insert(WAL_ID, id).map_err(internal)?;
    meta.insert(WAL_GENERATION, generation).map_err(internal)?;
    meta.insert(WAL_MARKED_GENERATION, generation)
        .map_err(internal)?;
    meta.insert(WAL_START, seq).map_err(internal)?;
    meta.insert(WAL_MARK, seq).map_err(internal)?;
    match previous {
        Some(previous) => meta.insert(WAL_PREVIOUS_GENERATION, previous),
        None => meta.remove(WAL_PREVIOUS_GENERATION),
    }
    .map_err(internal)?;
    meta.insert(CLEAN, 0).map_err(internal)?;
    Ok(())
}

/// Records in `txn` that redb holds the log up to frame `seq`.
pub(crate) fn set_seq(txn: &WriteTransaction, seq: u64) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META).map_err(internal)?;
    meta.insert(WAL_SEQ, seq).map_err(internal)?;
    Ok(())
}

/// Records in `txn` that the log durably holds every frame up to `mark` (in a checkpoint).
pub(crate) fn set_mark(txn: &WriteTransaction, mark: u64) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META).map_err(internal)?;
    meta.insert(WAL_MARK, mark).map_err(internal)?;
    Ok(())
}

/// Records in `txn` whether the run is ending cleanly (`true` only in the final checkpoint).
pub(crate) fn set_clean(txn: &WriteTransaction, clean: bool) -> Result<(), StoreError> {
    let mut meta = txn.open_table(META).map_err(internal)?;
    meta.insert(CLEAN, u64::from(clean)).map_err(internal)?;
    Ok(())
}
