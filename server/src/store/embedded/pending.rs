//! The listing index's changes not yet in its table. A cycle moves a record's listing entry three
//! times (in PROCESSING, out of it, into SUCCEEDED), each a B-tree update of its own; the writer
//! instead keeps where each record moved since the last checkpoint and writes only the net move
//! at the checkpoint (one insert for a cycle), in the same durable commit as everything it makes
//! durable. Readers merge these moves over the table, so a listing lags no write.
//!
//! Consistency: the writer merges a batch's moves under the lock right after its commit, and a
//! checkpoint writes and clears them under the lock in its commit, so a reader that opens its
//! read transaction and copies the moves under the lock sees a table and moves that agree with
//! its records. After a crash, the moves since the last durable commit are replayed from the log
//! with the records (`recovery`), and written in that same opening commit.

use super::index::LISTING;
use super::internal;
use crate::store::StoreError;
use redb::Table;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};

/// A record's listing move: the bucket code the table holds it under (`base`) and the one it is
/// in now (`None`: in no bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Move {
    pub base: Option<u8>,
    pub now: Option<u8>,
}

/// One write's change: the record stored under `key` went from bucket `from` to bucket `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    pub key: Vec<u8>,
    pub from: Option<u8>,
    pub to: Option<u8>,
}

/// Net moves by id bytes; a record back where the table has it has none.
#[derive(Debug, Default, Clone)]
pub(super) struct Moves(BTreeMap<Vec<u8>, Move>);

impl Moves {
    /// Adds `changes`, in the order they were made.
    pub(super) fn merge(&mut self, changes: impl IntoIterator<Item = Change>) {
        for change in changes {
            match self.0.entry(change.key) {
                std::collections::btree_map::Entry::Occupied(mut entry) => {
                    entry.get_mut().now = change.to;
                    if entry.get().base == change.to {
                        entry.remove();
                    }
                }
                std::collections::btree_map::Entry::Vacant(entry) => {
                    if change.from != change.to {
                        entry.insert(Move {
                            base: change.from,
                            now: change.to,
                        });
                    }
                }
            }
        }
    }

    /// Writes every move into the listing `table` (which then needs none of them).
    pub(super) fn write(&self, table: &mut Table<'_, (u8, &[u8]), ()>) -> Result<(), StoreError> {
        for (key, moved) in &self.0 {
            if let Some(code) = moved.base {
                table.remove((code, key.as_slice())).map_err(internal)?;
            }
            if let Some(code) = moved.now {
                table.insert((code, key.as_slice()), ()).map_err(internal)?;
            }
        }
        Ok(())
    }

    /// Writes every move in `txn`'s listing table.
    pub(super) fn write_in(&self, txn: &redb::WriteTransaction) -> Result<(), StoreError> {
        if self.0.is_empty() {
            return Ok(());
        }
        self.write(&mut txn.open_table(LISTING).map_err(internal)?)
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The moves of the records whose id bytes start with `prefix`.
    pub(super) fn under(&self, prefix: &[u8]) -> Moves {
        let range = self
            .0
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded));
        Moves(
            range
                .take_while(|(key, _)| key.starts_with(prefix))
                .map(|(key, moved)| (key.clone(), *moved))
                .collect(),
        )
    }

    /// Whether the table's entry of `key` in bucket `code` is gone.
    pub(super) fn removed(&self, code: u8, key: &[u8]) -> bool {
        self.0
            .get(key)
            .is_some_and(|m| m.base == Some(code) && m.now != Some(code))
    }

    /// The ids in bucket `code` the table lacks, in order, from `lower` on.
    pub(super) fn added<'a>(
        &'a self,
        code: u8,
        lower: Bound<&'a [u8]>,
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0
            .range::<[u8], _>((lower, Bound::Unbounded))
            .filter(move |(_, m)| m.now == Some(code) && m.base != Some(code))
            .map(|(key, _)| key.as_slice())
    }
}

/// The moves shared between the writer and the readers.
#[derive(Debug, Default)]
pub(super) struct Pending(Mutex<Moves>);

impl Pending {
    /// The moves, locked: held by the writer across a commit, by a reader while it opens its
    /// read transaction and copies them.
    pub(super) fn lock(&self) -> MutexGuard<'_, Moves> {
        // A panic while holding it leaves whole moves (each merge step is one map operation).
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(key: &str, from: Option<u8>, to: Option<u8>) -> Change {
        Change {
            key: key.as_bytes().to_vec(),
            from,
            to,
        }
    }

    #[test]
    fn a_cycle_nets_to_one_insert_and_a_round_trip_to_none() {
        let mut moves = Moves::default();
        // A new record claimed (PROCESSING = 1) then settled (SUCCEEDED = 2).
        moves.merge([change("a", None, Some(1)), change("a", Some(1), Some(2))]);
        // A record the table holds in 2 moves to 3 and back.
        moves.merge([change("b", Some(2), Some(3)), change("b", Some(3), Some(2))]);
        // One the table holds in 2, removed.
        moves.merge([change("c", Some(2), None)]);
        assert_eq!(moves.len(), 2);
        assert_eq!(moves.added(2, Bound::Unbounded).collect::<Vec<_>>(), [b"a"]);
        assert!(moves.removed(2, b"c"));
        assert!(!moves.removed(2, b"b") && !moves.removed(1, b"a"));
        assert_eq!(moves.under(b"c").len(), 1);
        assert_eq!(moves.under(b"d").len(), 0);

        let dir = tempfile::tempdir().unwrap();
        let db = redb::Database::create(dir.path().join("t.redb")).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(LISTING).unwrap();
            table.insert((2, &b"b"[..]), ()).unwrap();
            table.insert((2, &b"c"[..]), ()).unwrap();
        }
        moves.write_in(&txn).unwrap();
        let table = txn.open_table(LISTING).unwrap();
        let rows: Vec<(u8, Vec<u8>)> = redb::ReadableTable::iter(&table)
            .unwrap()
            .map(|e| {
                let (k, _) = e.unwrap();
                let (code, key) = k.value();
                (code, key.to_vec())
            })
            .collect();
        assert_eq!(rows, [(2, b"a".to_vec()), (2, b"b".to_vec())]);
    }
}
