//! Records written since they were last put into redb's B-tree: the writer keeps them in memory
//! and writes them into the records and outcomes tables only once they have settled (unchanged
//! for a tick, `pending::TICK`), or at the next checkpoint. A cycle's Claim and Complete, and a
//! hot key's counter updates, then cost one B-tree update between them instead of one each, and
//! a batch whose records all stay here commits nothing to redb: its durability is the log's
//! (`wal`), as before.
//!
//! Readers look here first. Consistency: the writer adds a batch's records here only once its log
//! frame is synced (visible only once durable), and removes records only after the commit that
//! put them in redb; a reader that misses here opens its read transaction while it still holds
//! the read lock, so a record is always either here or in the snapshot it reads. Listings copy
//! the entries of their prefix with the snapshot (`copy_under`) and merge them over the table
//! (`Merge`).

use super::internal;
use super::{OUTCOMES, RECORDS};
use oncekey_store::StoreError;
use redb::{ReadableTable, WriteTransaction};
use std::collections::{btree_map, BTreeMap};
use std::iter::Peekable;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A record's encoded row and, when stored apart (`codec`), its outcome.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Row {
    pub row: Vec<u8>,
    pub outcome: Option<Vec<u8>>,
}

/// What a key holds now: a record, or `None` once removed.
pub(super) type State = Option<Arc<Row>>;

/// One key's entry: its state and the tick of its last change.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    pub state: State,
    pub tick: u32,
}

/// The entries by id bytes.
pub(super) type Map = BTreeMap<Vec<u8>, Slot>;

/// The records not yet in redb, shared by the writer and readers.
#[derive(Default)]
pub(super) struct Overlay(RwLock<Map>);

impl Overlay {
    pub(super) fn read(&self) -> RwLockReadGuard<'_, Map> {
        // Every change is one map operation: a panic cannot leave a half-made entry.
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Map> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// The entries of `map` under `prefix`, copied (their rows shared).
pub(super) fn copy_under(map: &Map, prefix: &[u8]) -> BTreeMap<Vec<u8>, State> {
    map.range::<[u8], _>((
        std::ops::Bound::Included(prefix),
        std::ops::Bound::Unbounded,
    ))
    .take_while(|(key, _)| key.starts_with(prefix))
    .map(|(key, slot)| (key.clone(), slot.state.clone()))
    .collect()
}

/// Adds a batch's `staged` states to `map`, stamped with `tick`.
pub(super) fn merge(map: &mut Map, staged: BTreeMap<Vec<u8>, State>, tick: u32) {
    for (key, state) in staged {
        map.insert(key, Slot { state, tick });
    }
}

/// The entries of `map` unchanged since before `tick`, skipping the keys in `newer`.
pub(super) fn settled(
    map: &Map,
    before: u32,
    newer: &BTreeMap<Vec<u8>, State>,
) -> Vec<(Vec<u8>, State)> {
    map.iter()
        .filter(|(key, slot)| slot.tick < before && !newer.contains_key(*key))
        .map(|(key, slot)| (key.clone(), slot.state.clone()))
        .collect()
}

/// Writes `entries` into the records and outcomes tables in `txn`.
pub(super) fn write_in<'e>(
    txn: &WriteTransaction,
    entries: impl IntoIterator<Item = (&'e Vec<u8>, &'e State)>,
) -> Result<(), StoreError> {
    let mut records = txn.open_table(RECORDS).map_err(internal)?;
    let mut outcomes = txn.open_table(OUTCOMES).map_err(internal)?;
    for (key, state) in entries {
        let key = key.as_slice();
        match state {
            Some(row) => {
                records.insert(key, row.row.as_slice()).map_err(internal)?;
                match &row.outcome {
                    Some(outcome) => {
                        let same = outcomes
                            .get(key)
                            .map_err(internal)?
                            .is_some_and(|stored| stored.value() == outcome.as_slice());
                        if !same {
                            outcomes.insert(key, outcome.as_slice()).map_err(internal)?;
                        }
                    }
                    None => {
                        outcomes.remove(key).map_err(internal)?;
                    }
                }
            }
            None => {
                records.remove(key).map_err(internal)?;
                outcomes.remove(key).map_err(internal)?;
            }
        }
    }
    Ok(())
}

/// A table's row as a merged scan reads it: id bytes and row, owned.
pub(super) type TableRow = Result<(Vec<u8>, Vec<u8>), StoreError>;

/// A row found by a merged scan: read from the table (owned), or the overlay's.
pub(super) enum Found {
    Table(Vec<u8>),
    Overlay(Arc<Row>),
}

impl Found {
    pub(super) fn row(&self) -> &[u8] {
        match self {
            Found::Table(row) => row,
            Found::Overlay(row) => &row.row,
        }
    }
}

/// A table's rows in key order with the overlay's entries of the same range merged over them:
/// an entry replaces the table's row under its key, a removal hides it.
pub(super) struct Merge<'o, I: Iterator> {
    table: Peekable<I>,
    overlay: Peekable<btree_map::Range<'o, Vec<u8>, State>>,
}

impl<'o, I> Merge<'o, I>
where
    I: Iterator<Item = TableRow>,
{
    pub(super) fn new(table: I, overlay: btree_map::Range<'o, Vec<u8>, State>) -> Self {
        Self {
            table: table.peekable(),
            overlay: overlay.peekable(),
        }
    }
}

impl<I> Iterator for Merge<'_, I>
where
    I: Iterator<Item = TableRow>,
{
    type Item = Result<(Vec<u8>, Found), StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let next_table = match self.table.peek() {
                Some(Ok((key, _))) => Some(key),
                Some(Err(_)) => {
                    return self
                        .table
                        .next()
                        .map(|r| r.map(|(key, row)| (key, Found::Table(row))))
                }
                None => None,
            };
            let take_overlay = match (next_table, self.overlay.peek()) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(table_key), Some((key, _))) => *key <= table_key,
            };
            if !take_overlay {
                return self
                    .table
                    .next()
                    .map(|r| r.map(|(key, row)| (key, Found::Table(row))));
            }
            let (key, state) = self.overlay.next()?;
            if matches!(self.table.peek(), Some(Ok((table_key, _))) if table_key == key) {
                self.table.next();
            }
            if let Some(row) = state {
                return Some(Ok((key.clone(), Found::Overlay(row.clone()))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(text: &str) -> State {
        Some(Arc::new(Row {
            row: text.as_bytes().to_vec(),
            outcome: None,
        }))
    }

    #[test]
    fn a_merged_scan_takes_the_overlay_over_the_table_and_hides_removals() {
        let table: Vec<TableRow> = ["a", "c", "d", "f"]
            .iter()
            .map(|k| Ok((k.as_bytes().to_vec(), format!("t{k}").into_bytes())))
            .collect();
        let overlay: BTreeMap<Vec<u8>, State> = [
            (b"b".to_vec(), row("ob")),
            (b"c".to_vec(), row("oc")),
            (b"d".to_vec(), None),
            (b"g".to_vec(), row("og")),
        ]
        .into_iter()
        .collect();
        let merged: Vec<(String, String)> =
            Merge::new(table.into_iter(), overlay.range::<Vec<u8>, _>(..))
                .map(|r| {
                    let (key, found) = r.unwrap();
                    let row = String::from_utf8(found.row().to_vec()).unwrap();
                    (String::from_utf8(key).unwrap(), row)
                })
                .collect();
        let expected = [
            ("a", "ta"),
            ("b", "ob"),
            ("c", "oc"),
            ("f", "tf"),
            ("g", "og"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(merged, expected);
    }

    #[test]
    fn settled_entries_leave_out_the_newer_and_the_recent() {
        let mut map = Map::new();
        merge(
            &mut map,
            [(b"old".to_vec(), row("1")), (b"both".to_vec(), row("2"))].into(),
            1,
        );
        merge(&mut map, [(b"new".to_vec(), row("3"))].into(), 2);
        let newer: BTreeMap<Vec<u8>, State> = [(b"both".to_vec(), None)].into();
        let keys: Vec<Vec<u8>> = settled(&map, 2, &newer)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec![b"old".to_vec()]);
        let under = copy_under(&map, b"n");
        assert_eq!(under.keys().collect::<Vec<_>>(), vec![&b"new".to_vec()]);
    }
}
