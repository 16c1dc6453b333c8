//! Opening the embedded store: telling a new data directory from one that lost its ledger, and a
//! torn log tail from damage that would drop acknowledged writes — and refusing to start on the
//! latter unless the operator accepts the loss.
//!
//! A data directory holds `oncekey.redb`, its write-ahead log `oncekey.wal` and its identity file
//! `oncekey.id` (`identity`); all three carry the store's id. The open checks, before it changes
//! anything on disk (redb may still finish its own crash recovery of `oncekey.redb`):
//! - the identity file reads, and `oncekey.redb` is there and not empty when the directory held a
//!   store (the identity file, or a leftover log, says so) — otherwise every key could be claimed
//!   again;
//! - `oncekey.redb` is the store the identity file names;
//! - the log belongs to the database (same store and generation, see `wal`) and is there when
//!   the last run did not stop cleanly (`meta`), and no intact frame follows a damaged one
//!   (`scan`);
//! - after a run that did not stop cleanly, the log is not older than the database (its mark is
//!   not behind the one the last checkpoint recorded, and it is not the previous generation's
//!   log once the current one's was checkpointed), and it still holds every frame up to its own
//!   mark (it was not cut short).
//!
//! A failed check is an `IntegrityError` (`refusal`), unless `--accept-data-loss` was given: then
//! it is logged at ERROR with what it loses, damaged files are kept under a `.discarded-<time>`
//! name, and the open goes on. A torn log tail is normal after a crash and only logged at INFO.
//! Then the database takes the log's live frames and a new log generation in one durable
//! transaction, the log is replaced by an empty one of that generation, and the identity file is
//! written if it was missing — which is how a data directory of an earlier version, which has
//! none, is adopted.

use super::files;
use super::frame::Frame;
use super::identity::{self, Identity};
use super::meta::{self, Meta};
use super::refusal::{IntegrityError, Problem};
use super::scan::{self, End, Header, Mark};
use super::wal::{Wal, WAL_FILE};
use super::{index, internal, tables, DB_FILE};
use oncekey_store::StoreError;
use redb::{Database, DatabaseError, StorageError};
use std::path::Path;

/// Why the embedded store did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Opening would lose acknowledged writes silently; nothing on disk was changed.
    #[error(transparent)]
    Refused(#[from] IntegrityError),
    /// Anything else: the directory or a file cannot be read or written, another process has the
    /// store open.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An open database and its new, empty log, ready for the writer.
pub(super) struct Opened {
    pub db: Database,
    pub wal: Wal,
    /// The last log frame the database holds.
    pub seq: u64,
    /// How many log frames were replayed.
    pub replayed: u64,
    /// The key that signs the store's page tokens.
    pub page_token_key: [u8; 32],
}

/// Where each problem found is refused or, with `--accept-data-loss`, logged and let through.
struct Gate<'a> {
    dir: &'a Path,
    accept: bool,
    accepted: usize,
}

impl Gate<'_> {
    fn check(&mut self, problem: Problem) -> Result<(), IntegrityError> {
        if !self.accept {
            return Err(IntegrityError {
                dir: self.dir.to_owned(),
                problem,
            });
        }
        tracing::error!(
            data_dir = %self.dir.display(),
            problem = %problem.what(),
            action = %problem.accepting(),
            lost = %problem.loss(),
            "embedded store: starting despite data loss, as --accept-data-loss allows"
        );
        self.accepted += 1;
        Ok(())
    }
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> StoreError {
    StoreError::Internal(format!("cannot {what} {}: {e}", path.display()))
}

/// Opens the store in `dir` (which exists) with redb settings `builder`; `accept` lets it start
/// despite the problems it would otherwise refuse.
pub(super) fn open(dir: &Path, builder: &redb::Builder, accept: bool) -> Result<Opened, OpenError> {
    let mut gate = Gate {
        dir,
        accept,
        accepted: 0,
    };
    let identity =
        identity::read(dir).map_err(|e| io_error("read", &dir.join(identity::ID_FILE), e))?;
    let db_path = dir.join(DB_FILE);
    let log_path = dir.join(WAL_FILE);
    let db_size = files::size(&db_path).map_err(|e| io_error("read", &db_path, e))?;
    let log_size = files::size(&log_path).map_err(|e| io_error("read", &log_path, e))?;
    let known = match identity {
        Identity::Store(id) => Some(id),
        _ => None,
    };
    if let Identity::Damaged(why) = &identity {
        gate.check(Problem::IdentityDamaged { why: why.clone() })?;
    }
    let had_store = identity != Identity::Absent;
    let absent = matches!(db_size, None | Some(0));
    let mut fresh = false;
    if absent && (had_store || log_size.is_some()) {
        gate.check(Problem::DatabaseLost {
            empty: db_size.is_some(),
            known,
            log_bytes: log_size,
        })?;
        fresh = true;
    }
    let (db, discarded) = open_database(builder, dir, absent, &mut gate)?;
    fresh |= discarded;
    let meta = meta::read(&db)?;
    let id = match (known, meta.id) {
        (Some(known), Some(found)) if known == found => found,
        (Some(known), found) if !fresh => {
            gate.check(Problem::DatabaseOfAnotherStore { known, found })?;
            found.unwrap_or_else(rand::random)
        }
        (_, Some(found)) => found,
        (_, None) => rand::random(),
    };
    let (frames, keep_log) = match fresh {
        true => (Vec::new(), log_size.is_some()),
        false => {
            let log = Wal::read(dir)?;
            check_log(&mut gate, log.as_deref(), id, &meta, had_store)?
        }
    };

    // Every check passed (or was accepted): from here on, the directory changes.
    let generation = rand::random::<u64>();
    let (seq, page_token_key) = replay(&db, &frames, id, generation, &meta)?;
    let aside = keep_log.then(|| files::aside_name(dir, WAL_FILE));
    let wal = Wal::create(dir, id, generation, seq, aside.as_deref())?;
    if known != Some(id) {
        identity::write(dir, id).map_err(|e| io_error("write", &dir.join(identity::ID_FILE), e))?;
        if identity == Identity::Absent && !absent {
            tracing::info!(
                data_dir = %dir.display(),
                store_id = %identity::show(id),
                "embedded store: recorded the data directory's identity in oncekey.id"
            );
        }
    }
    if accept && gate.accepted == 0 {
        tracing::warn!(
            "--accept-data-loss is set but nothing needed it: remove it, so that damage found at a \
             later start stops the server instead of being accepted"
        );
    }
    Ok(Opened {
        db,
        wal,
        seq,
        replayed: frames.len() as u64,
        page_token_key,
    })
}

/// Opens `oncekey.redb`, creating it when `absent`; a file redb finds corrupt is refused or, when
/// accepted, set aside for a new one (then `true`).
fn open_database(
    builder: &redb::Builder,
    dir: &Path,
    absent: bool,
    gate: &mut Gate<'_>,
) -> Result<(Database, bool), OpenError> {
    let path = dir.join(DB_FILE);
    let cannot =
        |e: DatabaseError| StoreError::Internal(format!("cannot open {}: {e}", path.display()));
    let opened = match absent {
        true => builder.create(&path),
        false => builder.open(&path),
    };
    match opened {
        Ok(db) => Ok((db, false)),
        Err(DatabaseError::Storage(StorageError::Corrupted(why))) if !absent => {
            gate.check(Problem::DatabaseCorrupt { why })?;
            let aside = files::aside_name(dir, DB_FILE);
            std::fs::rename(&path, &aside).map_err(|e| io_error("set aside", &path, e))?;
            Ok((builder.create(&path).map_err(cannot)?, true))
        }
        Err(e) => Err(cannot(e).into()),
    }
}

/// The frames of the log (`None`: there is none) to replay, and whether to keep the log aside
/// rather than drop it.
fn check_log(
    gate: &mut Gate<'_>,
    log: Option<&[u8]>,
    id: u64,
    meta: &Meta,
    had_store: bool,
) -> Result<(Vec<Frame>, bool), IntegrityError> {
    let unclean = meta.clean != Some(true);
    let Some(bytes) = log else {
        // Versions before the log, and new directories, have none.
        if had_store && unclean {
            gate.check(Problem::LogMissing)?;
        }
        return Ok((Vec::new(), false));
    };
    let current = meta.log.map(|log| log.generation);
    let scan = scan::scan(bytes, id, meta.applied, &meta.generations, current);
    match scan.header {
        Header::Generation(generation) if !meta.generations.contains(&generation) => {
            if unclean {
                gate.check(Problem::LogOfAnotherGeneration)?;
                return Ok((Vec::new(), true));
            }
            tracing::info!(
                "embedded store: oncekey.wal is from another run of this store (oncekey.redb \
                 restored from a backup?); oncekey.redb was stopped cleanly, so it needs nothing \
                 from it"
            );
            return Ok((Vec::new(), false));
        }
        // The previous generation's log is left when a crash came right after an open recorded
        // the new one; once the database holds frames of the new one, it is an old copy.
        Header::Generation(generation)
            if unclean
                && current.is_some_and(|current| current != generation)
                && meta.log.is_some_and(|log| meta.applied > log.start) =>
        {
            gate.check(Problem::LogOlder {
                log_mark: None,
                checkpoint: meta.applied,
            })?;
            return Ok((Vec::new(), true));
        }
        // This version wrote a header when it made the directory's log (an earlier version's
        // log, which has none, starts with an intact frame: `Header::Legacy`).
        Header::Empty | Header::Invalid(_)
            if had_store && !matches!(scan.end, End::Damaged { .. }) =>
        {
            if unclean {
                gate.check(Problem::LogHeader {
                    header: scan.header,
                })?;
            } else {
                tracing::warn!(
                    "embedded store: oncekey.wal is empty or damaged; oncekey.redb was stopped \
                     cleanly, so it needs nothing from it"
                );
            }
            return Ok((Vec::new(), !bytes.is_empty()));
        }
        _ => {}
    }
    let mut keep = false;
    if unclean {
        keep = check_mark(gate, &scan, meta)?;
    }
    let frames = scan.frames;
    match scan.end {
        End::Clean => Ok((frames, keep)),
        End::Torn { at, frame } => {
            if !frames.is_empty() {
                tracing::info!(
                    replayed = frames.len(),
                    at,
                    frame,
                    "embedded store: the write-ahead log's live frames end in a torn frame or in \
                     frames already checkpointed; nothing after them was acknowledged"
                );
            }
            Ok((frames, keep))
        }
        End::Damaged {
            at,
            frame,
            damage,
            intact,
        } => {
            gate.check(Problem::LogDamaged {
                frame,
                at,
                damage,
                intact,
                replayable: frames.len(),
            })?;
            Ok((frames, true))
        }
    }
}

/// Checks a log that the database needs (the last run did not stop cleanly) against its own mark
/// and the database's; returns whether a problem was accepted (the log is then kept aside).
fn check_mark(gate: &mut Gate<'_>, scan: &scan::Scan, meta: &Meta) -> Result<bool, IntegrityError> {
    let mark = match scan.mark {
        Mark::Unmarked => return Ok(false),
        Mark::Lost { cut } => {
            gate.check(Problem::LogMarksLost { cut })?;
            return Ok(true);
        }
        Mark::At(mark) => mark,
    };
    let checkpoint = meta.log.map_or(0, |log| log.mark);
    if mark < checkpoint {
        gate.check(Problem::LogOlder {
            log_mark: Some(mark),
            checkpoint,
        })?;
        return Ok(true);
    }
    // A damaged log is refused for its damage (which also cuts what follows it).
    let last = scan.frames.last().map_or(meta.applied, |frame| frame.seq);
    if last < mark && !matches!(scan.end, End::Damaged { .. }) {
        gate.check(Problem::LogCutShort { last, mark })?;
        return Ok(true);
    }
    Ok(false)
}

/// Applies `frames` to `db`, builds the listing indexes if the database has none yet, and records
/// the store's id and new log generation, in one durable transaction; returns the last frame the
/// database then holds and the key that signs page tokens.
fn replay(
    db: &Database,
    frames: &[Frame],
    id: u64,
    generation: u64,
    meta: &Meta,
) -> Result<(u64, [u8; 32]), StoreError> {
    let txn = db.begin_write().map_err(internal)?;
    let mut seq = meta.applied;
    {
        // Opening every table also creates it, so that readers never see one missing.
        let mut tables = tables::Tables::open(&txn)?;
        for frame in frames {
            for effect in &frame.effects {
                tables.replay(effect)?;
            }
            seq = frame.seq;
        }
        tables.write_indexes()?;
    }
    let page_token_key = index::prepare(&txn)?;
    meta::set_seq(&txn, seq)?;
    meta::set_opened(&txn, id, generation, meta.generations.first().copied(), seq)?;
    txn.commit().map_err(internal)?;
    if !frames.is_empty() {
        tracing::info!(
            frames = frames.len(),
            "embedded store: replayed the write-ahead log"
        );
    }
    Ok((seq, page_token_key))
}
