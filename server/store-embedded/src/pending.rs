//! Index changes not yet in their tables. A cycle moves a record's listing entry three times (in
//! PROCESSING, out of it, into SUCCEEDED) and its expiry entry twice (the lease's end, then the
//! retention after the settle): five B-tree updates. The writer instead keeps where each record
//! moved since the last checkpoint and writes only the net move at the checkpoint (one insert
//! each for a cycle). So that the checkpoint's stall does not grow by all of them, moves that
//! have not changed for a tick (`TICK`, 10-20 ms: a cycle's moves are long netted by then) go into
//! the next batch's transaction; the rest go into the checkpoint's durable commit.
//!
//! Readers merge the listing moves over the listing table, so a listing lags no write; only the
//! writer's sweep reads the expiry index, and it merges the expiry moves, which only the writer
//! holds.
//!
//! Consistency: the writer merges a batch's moves under the lock right after its commit, and a
//! checkpoint writes and clears them under the lock in its commit, so a reader that opens its
//! read transaction and copies the moves under the lock sees a table and moves that agree with
//! its records. After a crash, the moves since the last durable commit are replayed from the log
//! with the records (`recovery`), and written in that same opening commit.

use super::internal;
use super::LISTING;
use oncekey_store::StoreError;
use redb::Table;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// How often moves age: a move unchanged for a whole tick is written by the next batch.
pub(super) const TICK: Duration = Duration::from_millis(10);

/// A record's index move: where the table holds it (`base`: a listing bucket's code, an expiry
/// instant) and where it is now (`None`: not in the index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Move<T> {
    pub base: Option<T>,
    pub now: Option<T>,
    /// The tick of its last change.
    pub tick: u32,
}

/// One write's change: the record stored under `key` went from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change<T> {
    pub key: Vec<u8>,
    pub from: Option<T>,
    pub to: Option<T>,
}

/// Net moves by id bytes; a record back where the table has it has none. Changes are stamped
/// with the current tick (`tick`).
#[derive(Debug, Clone)]
pub(super) struct Moves<T>(BTreeMap<Vec<u8>, Move<T>>, u32);

impl<T> Default for Moves<T> {
    fn default() -> Self {
        Self(BTreeMap::new(), 0)
    }
}

impl<T: Copy + Eq> Moves<T> {
    /// Adds `changes`, in the order they were made.
    pub(super) fn merge(&mut self, changes: impl IntoIterator<Item = Change<T>>) {
        for change in changes {
            self.change(change.key, change.from, change.to);
        }
    }

    /// Adds one change: the record under `key` went from `from` to `to`.
    pub(super) fn change(&mut self, key: Vec<u8>, from: Option<T>, to: Option<T>) {
        let tick = self.1;
        match self.0.entry(key) {
            std::collections::btree_map::Entry::Occupied(mut entry) => {
                let moved = entry.get_mut();
                (moved.now, moved.tick) = (to, tick);
                if moved.base == to {
                    entry.remove();
                }
            }
            std::collections::btree_map::Entry::Vacant(entry) => {
                if from != to {
                    entry.insert(Move {
                        base: from,
                        now: to,
                        tick,
                    });
                }
            }
        }
    }

    /// Stamps the changes from now on with `tick`.
    pub(super) fn set_tick(&mut self, tick: u32) {
        self.1 = tick;
    }

    /// The moves last changed before tick `before`.
    pub(super) fn settled(&self, before: u32) -> Moves<T> {
        let settled = self.0.iter().filter(|(_, m)| m.tick < before);
        Moves(settled.map(|(k, m)| (k.clone(), *m)).collect(), self.1)
    }

    /// Drops the moves of `written` (now in the table).
    pub(super) fn remove_all(&mut self, written: &Moves<T>) {
        for key in written.0.keys() {
            self.0.remove(key);
        }
    }

    /// Writes every move through `write` (remove the table's entry: `false`; insert: `true`).
    fn write_with(
        &self,
        mut write: impl FnMut(T, &[u8], bool) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        for (key, moved) in &self.0 {
            if let Some(at) = moved.base {
                write(at, key, false)?;
            }
            if let Some(at) = moved.now {
                write(at, key, true)?;
            }
        }
        Ok(())
    }

    pub(super) fn clear(&mut self) {
        self.0.clear();
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// The move of the record under `key`, if it moved.
    pub(super) fn get(&self, key: &[u8]) -> Option<&Move<T>> {
        self.0.get(key)
    }
}

/// Writes `moves` into the index `table` keyed (T, id bytes) — listing or expiry — which then
/// needs none of them.
macro_rules! write_into {
    ($moves:expr, $table:expr) => {
        $moves.write_with(|at, key, insert| {
            match insert {
                true => $table.insert((at, key), ()).map(|_| ()),
                false => $table.remove((at, key)).map(|_| ()),
            }
            .map_err(internal)
        })
    };
}

impl Moves<i64> {
    /// Writes every move into the expiry `table`.
    pub(super) fn write(&self, table: &mut Table<'_, (i64, &[u8]), ()>) -> Result<(), StoreError> {
        write_into!(self, table)
    }

    /// The ids whose expiry instant is now at or before `now`, with it.
    pub(super) fn due(&self, now: i64) -> impl Iterator<Item = (i64, &[u8])> + '_ {
        self.0.iter().filter_map(move |(key, m)| {
            m.now.filter(|at| *at <= now).map(|at| (at, key.as_slice()))
        })
    }
}

impl Moves<u8> {
    /// Writes every move into the listing `table`.
    pub(super) fn write(&self, table: &mut Table<'_, (u8, &[u8]), ()>) -> Result<(), StoreError> {
        write_into!(self, table)
    }

    /// Writes every move in `txn`'s listing table.
    pub(super) fn write_in(&self, txn: &redb::WriteTransaction) -> Result<(), StoreError> {
        if self.0.is_empty() {
            return Ok(());
        }
        self.write(&mut txn.open_table(LISTING).map_err(internal)?)
    }

    /// The moves of the records whose id bytes start with `prefix`.
    pub(super) fn under(&self, prefix: &[u8]) -> Moves<u8> {
        let range = self
            .0
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded));
        Moves(
            range
                .take_while(|(key, _)| key.starts_with(prefix))
                .map(|(key, moved)| (key.clone(), *moved))
                .collect(),
            self.1,
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

/// The listing moves, shared between the writer and the readers.
#[derive(Debug, Default)]
pub(super) struct Pending(Mutex<Moves<u8>>);

impl Pending {
    /// The moves, locked: held by the writer across a commit, by a reader while it opens its
    /// read transaction and copies them.
    pub(super) fn lock(&self) -> MutexGuard<'_, Moves<u8>> {
        // A panic while holding it leaves whole moves (each merge step is one map operation).
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(key: &str, from: Option<u8>, to: Option<u8>) -> Change<u8> {
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
        // Aging: a move changed in a later tick is not settled before it.
        moves.set_tick(1);
        moves.merge([change("d", None, Some(1))]);
        assert_eq!(moves.settled(1).len(), 2);
        moves.remove_all(&moves.settled(1));
        assert_eq!(moves.len(), 1);
        assert!(moves.get(b"d").is_some());
        moves.merge([change("a", None, Some(2)), change("c", Some(2), None)]);

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
        let expected = [(1, b"d".to_vec()), (2, b"a".to_vec()), (2, b"b".to_vec())];
        assert_eq!(rows, expected);
    }
}
