//! What the embedded store refuses to start with, in words an operator can act on: what is wrong
//! (which file, what was found), what `--accept-data-loss` would do about it, and what that loses.
//! The checks themselves are in `recovery`; docs/operations.md ("Recovering the embedded store")
//! explains each message.

use super::identity::show;
use super::scan::{Damage, Header};
use std::path::PathBuf;

/// Something on disk that starting would silently lose acknowledged writes over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// `oncekey.id` exists but does not name a store.
    IdentityDamaged { why: String },
    /// `oncekey.redb` is absent or empty (0 bytes) although the directory held a store: its
    /// identity file names one (`known`), or the log is still there (`log_bytes`).
    DatabaseLost {
        empty: bool,
        known: Option<u64>,
        log_bytes: Option<u64>,
    },
    /// redb cannot open `oncekey.redb`.
    DatabaseCorrupt { why: String },
    /// `oncekey.redb` is not the store the directory holds.
    DatabaseOfAnotherStore { known: u64, found: Option<u64> },
    /// The log is missing although the last run did not stop cleanly.
    LogMissing,
    /// The log does not start with this store's header although this version wrote one, and the
    /// last run did not stop cleanly.
    LogHeader { header: Header },
    /// The log is from another generation of this store and the last run did not stop cleanly.
    LogOfAnotherGeneration,
    /// The log's marks are gone: it ends before or inside them (`cut`: truncated, e.g. to its
    /// header), or both are damaged; the last run did not stop cleanly.
    LogMarksLost { cut: bool },
    /// The log is older than the database: its mark (`None`: it is the previous generation's
    /// log) is behind what the database's last checkpoint recorded (`checkpoint`).
    LogOlder {
        log_mark: Option<u64>,
        checkpoint: u64,
    },
    /// The log ends with frame `last` although it durably held every frame up to `mark`.
    LogCutShort { last: u64, mark: u64 },
    /// A frame of the log is damaged or missing and intact frames follow it.
    LogDamaged {
        frame: usize,
        at: usize,
        damage: Damage,
        intact: Vec<u64>,
        replayable: usize,
    },
}

const LAST_WRITES: &str = "the writes acknowledged since oncekey.redb's last checkpoint (at \
     most the last ~50 ms of writes before the crash): those keys may be claimed again as if new, \
     or be back in an earlier state";
const CUT: &str = "the writes acknowledged since oncekey.redb's last checkpoint that the log \
     no longer holds: those keys may be claimed again as if new, or be back in an earlier state";
const EVERYTHING: &str = "every record the store held: every key can be claimed again, and its \
     side effect run again";

impl Problem {
    /// What is wrong.
    pub(crate) fn what(&self) -> String {
        match self {
            Problem::IdentityDamaged { why } => format!(
                "oncekey.id, which names the store this data directory holds, cannot be read: {why}"
            ),
            Problem::DatabaseLost {
                empty,
                known,
                log_bytes,
            } => {
                let state = match empty {
                    true => "is empty (0 bytes)",
                    false => "is missing",
                };
                match (known, log_bytes) {
                    (Some(id), _) => format!(
                        "oncekey.redb {state}, but oncekey.id says this data directory holds store {}",
                        show(*id)
                    ),
                    (None, Some(bytes)) => format!(
                        "oncekey.redb {state}, but its write-ahead log oncekey.wal ({bytes} bytes) \
                         is there: this data directory held a store"
                    ),
                    (None, None) => format!("oncekey.redb {state}"),
                }
            }
            Problem::DatabaseCorrupt { why } => format!("oncekey.redb cannot be opened: {why}"),
            Problem::DatabaseOfAnotherStore { known, found } => {
                let found = match found {
                    Some(id) => format!("belongs to store {}", show(*id)),
                    None => "carries no store id (a database made by something else, or from \
                             before store ids)"
                        .to_string(),
                };
                format!(
                    "oncekey.redb {found}, but oncekey.id says this data directory holds store {} \
                     (was the file replaced, or restored from another store's backup?)",
                    show(*known)
                )
            }
            Problem::LogMissing => "the write-ahead log oncekey.wal is missing, and the last run \
                 did not stop cleanly, so it held writes that oncekey.redb lacks"
                .to_string(),
            Problem::LogHeader { header } => {
                let found = match header {
                    Header::Empty => "is empty (0 bytes)".to_string(),
                    Header::Invalid(defect) => format!(
                        "does not start with this store's header (the first frame {defect}): it is \
                         damaged, or another store's log"
                    ),
                    Header::Generation(_) | Header::Legacy => "is unreadable".to_string(),
                };
                format!(
                    "the write-ahead log oncekey.wal {found}, and the last run did not stop \
                     cleanly, so it held writes that oncekey.redb lacks"
                )
            }
            Problem::LogOfAnotherGeneration => {
                "the write-ahead log oncekey.wal is not the one \
                 that belongs to oncekey.redb (it is from another run of this store: was \
                 oncekey.redb restored from a backup without its log?), and the run that last \
                 wrote oncekey.redb did not stop cleanly, so its own log held writes the file lacks"
                    .to_string()
            }
            Problem::LogMarksLost { cut } => {
                let found = match cut {
                    true => {
                        "ends inside its header (before the marks of how far it was durably \
                             written): it was truncated"
                    }
                    false => {
                        "has lost both marks of how far it was durably written (they are \
                              damaged)"
                    }
                };
                format!(
                    "the write-ahead log oncekey.wal {found}, and the last run did not stop \
                     cleanly, so it held writes that oncekey.redb lacks"
                )
            }
            Problem::LogOlder {
                log_mark: Some(mark),
                checkpoint,
            } => format!(
                "the write-ahead log oncekey.wal is older than oncekey.redb: it says it held the \
                 writes up to sequence number {mark}, but oncekey.redb's last checkpoint saw it \
                 hold them up to {checkpoint} (was an older copy of the log put back, or \
                 oncekey.redb copied without the log copied with it?), and the last run did not \
                 stop cleanly, so the log that belongs to it may have held writes that oncekey.redb \
                 lacks"
            ),
            Problem::LogOlder {
                log_mark: None,
                checkpoint,
            } => format!(
                "the write-ahead log oncekey.wal is the previous run's log, but oncekey.redb holds \
                 writes of the last run's log (up to sequence number {checkpoint}): an older copy \
                 of the log was put back, and the last run did not stop cleanly, so its own log \
                 may have held writes that oncekey.redb lacks"
            ),
            Problem::LogCutShort { last, mark } => format!(
                "the write-ahead log oncekey.wal was cut short: it ends with the writes of \
                 sequence number {last}, but it had durably held them up to {mark} (it was \
                 truncated, or an older copy of it put back); the writes of {lost} were \
                 acknowledged and oncekey.redb lacks them",
                lost = numbers(last + 1, *mark)
            ),
            Problem::LogDamaged {
                frame,
                at,
                damage,
                intact,
                ..
            } => {
                let (first, last) = (intact[0], intact[intact.len() - 1]);
                let seqs = match intact.len() {
                    1 => format!("sequence number {first}"),
                    _ => format!("sequence numbers {first} to {last}"),
                };
                format!(
                    "the write-ahead log oncekey.wal is damaged: frame {frame} at byte {at} \
                     {damage}, and {n} intact {frames} ({seqs}) follow it; they hold acknowledged \
                     writes that replaying only up to the damage would silently drop",
                    n = intact.len(),
                    frames = if intact.len() == 1 { "frame" } else { "frames" },
                )
            }
        }
    }

    /// What opening changed before the problem showed: redb's recovery of its own file from a
    /// crash, when the problem is found after opening it.
    fn note(&self) -> &'static str {
        match self {
            Problem::IdentityDamaged { .. }
            | Problem::DatabaseLost { .. }
            | Problem::DatabaseCorrupt { .. } => "",
            _ => " (beyond redb's own crash recovery inside oncekey.redb, which every start does)",
        }
    }

    /// What to restore instead of accepting the loss.
    fn restore(&self) -> &'static str {
        match self {
            Problem::IdentityDamaged { .. }
            | Problem::DatabaseLost { .. }
            | Problem::DatabaseCorrupt { .. }
            | Problem::DatabaseOfAnotherStore { .. } => "restore the data directory from a backup",
            _ => {
                "restore the data directory from a backup, oncekey.redb together with the \
                  oncekey.wal copied with it"
            }
        }
    }

    /// What `--accept-data-loss` does about it.
    pub(crate) fn accepting(&self) -> String {
        match self {
            Problem::IdentityDamaged { .. } => {
                "rewrite oncekey.id for the store in oncekey.redb".into()
            }
            Problem::DatabaseLost { .. } => "start an empty ledger as a new store (an old \
                 oncekey.wal is kept as oncekey.wal.discarded-<time>)"
                .into(),
            Problem::DatabaseCorrupt { .. } => "set oncekey.redb aside as \
                 oncekey.redb.discarded-<time> and start an empty ledger as a new store"
                .into(),
            Problem::DatabaseOfAnotherStore { .. } => "adopt this oncekey.redb as the directory's \
                 store and rewrite oncekey.id (a log of the other store is kept as \
                 oncekey.wal.discarded-<time>)"
                .into(),
            Problem::LogMissing
            | Problem::LogHeader { .. }
            | Problem::LogOfAnotherGeneration
            | Problem::LogMarksLost { .. }
            | Problem::LogOlder { log_mark: None, .. } => "start from oncekey.redb alone (the \
                 log is kept as oncekey.wal.discarded-<time>)"
                .into(),
            Problem::LogOlder { .. } | Problem::LogCutShort { .. } => "start from oncekey.redb \
                 and the writes the log still holds (the log is kept as \
                 oncekey.wal.discarded-<time>)"
                .into(),
            Problem::LogDamaged { at, replayable, .. } => {
                let replay = match replayable {
                    0 => "replay nothing".to_string(),
                    1 => "replay the frame".to_string(),
                    n => format!("replay the {n} frames"),
                };
                format!(
                    "{replay} before byte {at} and drop the rest (the damaged log is kept as \
                     oncekey.wal.discarded-<time>)"
                )
            }
        }
    }

    /// What accepting it loses.
    pub(crate) fn loss(&self) -> String {
        match self {
            Problem::IdentityDamaged { .. } => {
                "nothing, if oncekey.redb is this directory's own file".into()
            }
            Problem::DatabaseLost { .. } | Problem::DatabaseCorrupt { .. } => EVERYTHING.into(),
            Problem::DatabaseOfAnotherStore { known, .. } => format!(
                "every record of store {} that this file does not hold",
                show(*known)
            ),
            Problem::LogMissing | Problem::LogHeader { .. } | Problem::LogOfAnotherGeneration => {
                LAST_WRITES.into()
            }
            Problem::LogMarksLost { .. } | Problem::LogOlder { .. } => CUT.into(),
            Problem::LogCutShort { last, mark } => format!(
                "the writes of {}, and any after them: those keys may be claimed again as if \
                 new, or be back in an earlier state",
                numbers(last + 1, *mark)
            ),
            Problem::LogDamaged { intact, .. } => format!(
                "the writes in the damaged frame and in the {} after it: those keys may be \
                 claimed again as if new, or be back in an earlier state",
                intact.len()
            ),
        }
    }
}

/// "sequence number N" or "sequence numbers N to M".
fn numbers(from: u64, to: u64) -> String {
    match from == to {
        true => format!("sequence number {from}"),
        false => format!("sequence numbers {from} to {to}"),
    }
}

/// The embedded store did not open because of `problem`; nothing on disk was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the embedded store in {dir} was not opened: {what}. Nothing on disk was changed{note}. To \
     proceed, either {restore} (docs/operations.md, \"Recovering the embedded store\"), or start \
     once with --accept-data-loss (ONCEKEY_ACCEPT_DATA_LOSS=true) to {accepting}; that loses \
     {loss}.",
    dir = .dir.display(),
    what = .problem.what(),
    note = .problem.note(),
    restore = .problem.restore(),
    accepting = .problem.accepting(),
    loss = .problem.loss()
)]
pub struct IntegrityError {
    /// The data directory.
    pub(crate) dir: PathBuf,
    /// What is wrong.
    pub(crate) problem: Problem,
}
