//! Reading the embedded store's listing indexes (`index`): a page of a tenant's records, and the
//! counts of records needing attention; and a page of every tenant's ids from the records table
//! (`scan_ids`). Each runs on one read transaction, so a page is a consistent snapshot; the
//! indexes are exact once the writer's latest listing moves (`pending`, copied with the
//! snapshot) are merged over the listing table, and every record read is still checked against
//! the filter at `now` (its reported status depends on the clock, and it may have expired).

use super::codec::{self, bucket_code};
use super::index::parent_key;
use super::overlay::{self, Found, Merge, State};
use super::pending::Moves;
use super::{internal, EmbeddedStore, OUTCOMES, RECORDS};
use super::{CHILDREN, LISTING};
use oncekey_ledger::{Attention, AttentionCounts, Millis, Record};
use oncekey_store::{ListPage, ListQuery, ScanPage, StoreError};
use redb::{ReadOnlyTable, ReadTransaction, ReadableDatabase};
use std::collections::BTreeMap;
use std::ops::Bound;

/// Most index entries or records one page reads beyond the records it returns: a filter that
/// matches few of them (a parent filter with a status, say) ends a page early rather than
/// reading without bound.
const SCAN_BUDGET: usize = 4096;

/// Where a page reads from, the first byte of its cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The records table itself (no status or parent asked for).
    Records = 0,
    /// The listing index, bucket by bucket (a status filter).
    Buckets = 1,
    /// The children index (a parent filter).
    Children = 2,
}

/// Where the previous page stopped: the source, the bucket (an index into the filter's buckets)
/// and the last id read.
struct Cursor {
    source: Source,
    bucket: usize,
    after: Vec<u8>,
}

impl Cursor {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![
            self.source as u8,
            u8::try_from(self.bucket).unwrap_or(u8::MAX),
        ];
        out.extend_from_slice(&self.after);
        out
    }

    fn decode(bytes: &[u8], source: Source) -> Result<Self, StoreError> {
        match bytes {
            [s, bucket, after @ ..] if *s == source as u8 => Ok(Self {
                source,
                bucket: usize::from(*bucket),
                after: after.to_vec(),
            }),
            _ => Err(StoreError::Corrupt(
                "a page cursor of another listing".into(),
            )),
        }
    }
}

/// The tables a listing reads, open in one read transaction, and the overlay's records that
/// go with it.
struct Snapshot {
    records: ReadOnlyTable<&'static [u8], &'static [u8]>,
    outcomes: ReadOnlyTable<&'static [u8], &'static [u8]>,
    /// The overlay's entries under the listing's prefix, copied with the transaction.
    overlay: BTreeMap<Vec<u8>, State>,
}

impl Snapshot {
    fn open(txn: &ReadTransaction, overlay: BTreeMap<Vec<u8>, State>) -> Result<Self, StoreError> {
        Ok(Self {
            records: txn.open_table(RECORDS).map_err(internal)?,
            outcomes: txn.open_table(OUTCOMES).map_err(internal)?,
            overlay,
        })
    }

    /// The record stored under `key`, without its history; `None` when absent.
    fn record(&self, key: &[u8]) -> Result<Option<Record>, StoreError> {
        if let Some(state) = self.overlay.get(key) {
            return match state {
                Some(row) => self
                    .decode_found(key, &Found::Overlay(row.clone()))
                    .map(Some),
                None => Ok(None),
            };
        }
        let Some(row) = self.records.get(key).map_err(internal)? else {
            return Ok(None);
        };
        self.decode(key, row.value()).map(Some)
    }

    /// Decodes a row a merged scan found under `key`, without its history.
    fn decode_found(&self, key: &[u8], found: &Found) -> Result<Record, StoreError> {
        match found {
            Found::Table(row) => self.decode(key, row),
            Found::Overlay(row) => {
                let id = codec::decode_id(key)?;
                codec::decode_listed(id, &row.row, row.outcome.as_deref())
            }
        }
    }

    /// The table's rows from `lower` on with the overlay's merged over them, in key order.
    fn rows<'s>(
        &'s self,
        lower: Bound<&[u8]>,
    ) -> Result<impl Iterator<Item = Result<(Vec<u8>, Found), StoreError>> + 's, StoreError> {
        let table = self
            .records
            .range::<&[u8]>((lower, Bound::Unbounded))
            .map_err(internal)?
            .map(|entry| {
                let (key, row) = entry.map_err(internal)?;
                Ok((key.value().to_vec(), row.value().to_vec()))
            });
        let overlay = self.overlay.range::<[u8], _>((lower, Bound::Unbounded));
        Ok(Merge::new(table, overlay))
    }

    /// Decodes the row stored under `key`, without its history.
    fn decode(&self, key: &[u8], row: &[u8]) -> Result<Record, StoreError> {
        let id = codec::decode_id(key)?;
        match codec::head(row)?.outcome_apart {
            true => {
                let outcome = self.outcomes.get(key).map_err(internal)?;
                codec::decode_listed(id, row, outcome.as_ref().map(|o| o.value()))
            }
            false => codec::decode_listed(id, row, None),
        }
    }
}

/// A page being filled.
struct Page<'q> {
    query: ListQuery<'q>,
    now: Millis,
    records: Vec<Record>,
    /// Entries read so far beyond the returned records.
    examined: usize,
}

impl Page<'_> {
    /// Takes `record` if it is listed; `false` once the page is full or out of budget.
    fn offer(&mut self, record: Option<Record>) -> bool {
        match record {
            Some(r) if self.query.filter.matches(&r, self.now) => self.records.push(r),
            _ => self.examined += 1,
        }
        self.records.len() < self.query.limit && self.examined < SCAN_BUDGET
    }
}

impl EmbeddedStore {
    /// `Store::list`.
    pub(super) fn list_page(
        &self,
        query: ListQuery<'_>,
        now: Millis,
    ) -> Result<ListPage, StoreError> {
        let filter = query.filter;
        let source = match (&filter.parent, filter.statuses.is_empty()) {
            (Some(_), _) => Source::Children,
            (None, false) => Source::Buckets,
            (None, true) => Source::Records,
        };
        let cursor = query
            .after
            .map(|bytes| Cursor::decode(bytes, source))
            .transpose()?;
        let prefix = codec::id_prefix(query.tenant, filter.namespace.as_deref());
        let (txn, snapshot, moves) = self.read_at(&prefix, source == Source::Buckets)?;
        let mut page = Page {
            query,
            now,
            records: Vec::new(),
            examined: 0,
        };
        let next = match source {
            Source::Records => {
                let start = cursor.as_ref().map(|c| c.after.as_slice());
                let last = scan_records(&snapshot, &prefix, start, &mut page)?;
                last.map(|after| Cursor {
                    source,
                    bucket: 0,
                    after,
                })
            }
            Source::Children => {
                let parent = filter.parent.as_ref().expect("a parent filter");
                let parent = parent_key(&prefix, parent)?;
                let children = txn.open_table(CHILDREN).map_err(internal)?;
                let start = cursor.as_ref().map(|c| c.after.as_slice());
                let last = scan_children(&snapshot, &children, &parent, start, &mut page)?;
                last.map(|after| Cursor {
                    source,
                    bucket: 0,
                    after,
                })
            }
            Source::Buckets => {
                let listing = txn.open_table(LISTING).map_err(internal)?;
                let buckets = filter.buckets();
                let (first, mut start) = match &cursor {
                    Some(c) => (c.bucket, Some(c.after.as_slice())),
                    None => (0, None),
                };
                let mut next = None;
                for (i, bucket) in buckets.iter().enumerate().skip(first) {
                    let code = bucket_code(*bucket);
                    let scan = Scan {
                        snapshot: &snapshot,
                        listing: &listing,
                        moves: &moves,
                        code,
                        prefix: &prefix,
                    };
                    let last = scan.bucket(start, &mut page)?;
                    if let Some(after) = last {
                        next = Some(Cursor {
                            source,
                            bucket: i,
                            after,
                        });
                        break;
                    }
                    start = None;
                }
                next
            }
        };
        Ok(ListPage {
            records: page.records,
            next: next.map(|c| c.encode()),
        })
    }

    /// `Store::scan`: the ids of every tenant's live records after `after` (the encoded key of
    /// the last id of the previous page), in key order, on one read transaction (a snapshot:
    /// the writer goes on meanwhile). Expired records are left out, by their head; reading
    /// more than `SCAN_BUDGET` of them ends the page early, with a cursor to go on from.
    pub(super) fn scan_ids(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        now: Millis,
    ) -> Result<ScanPage, StoreError> {
        if let Some(after) = after {
            codec::decode_id(after)?;
        }
        let (_txn, snapshot, _) = self.read_at(&[], false)?;
        let lower = after.map_or(Bound::Unbounded, Bound::Excluded);
        let (mut page, mut skipped) = (ScanPage::default(), 0);
        // The last key read.
        let mut last: Vec<u8> = Vec::new();
        for entry in snapshot.rows(lower)? {
            let (key, row) = entry?;
            if page.ids.len() == limit || skipped == SCAN_BUDGET {
                // Something follows the last key read: the next page starts after it.
                page.next = Some(last);
                break;
            }
            if codec::head(row.row())?.is_live(now) {
                page.ids.push(codec::decode_id(&key)?);
            } else {
                skipped += 1;
            }
            last = key;
        }
        Ok(page)
    }

    /// A read transaction, its snapshot with the overlay's records under `prefix`, and, when
    /// `with_moves`, the listing moves of the ids under `prefix` that go with it.
    fn read_at(
        &self,
        prefix: &[u8],
        with_moves: bool,
    ) -> Result<(ReadTransaction, Snapshot, Moves<u8>), StoreError> {
        let records = self.overlay.read();
        let moves = with_moves.then(|| self.pending.lock());
        let txn = self.db.begin_read().map_err(internal)?;
        let moves = moves.map_or_else(Moves::default, |moves| moves.under(prefix));
        let copied = overlay::copy_under(&records, prefix);
        drop(records);
        let snapshot = Snapshot::open(&txn, copied)?;
        Ok((txn, snapshot, moves))
    }

    /// `Store::attention`: every record of the buckets that may need attention, checked at `now`.
    pub(super) fn attention_counts(&self, now: Millis) -> Result<AttentionCounts, StoreError> {
        let (txn, snapshot, moves) = self.read_at(&[], true)?;
        let listing = txn.open_table(LISTING).map_err(internal)?;
        let mut counts = AttentionCounts::default();
        for bucket in Attention::buckets() {
            let code = bucket_code(bucket);
            let mut count = |key: &[u8]| -> Result<(), StoreError> {
                if let Some(why) = snapshot.record(key)?.and_then(|r| Attention::of(&r, now)) {
                    counts.add(why);
                }
                Ok(())
            };
            for entry in listing.range((code, &[][..])..).map_err(internal)? {
                let (k, _) = entry.map_err(internal)?;
                let (c, key) = k.value();
                if c != code {
                    break;
                }
                if !moves.removed(code, key) {
                    count(key)?;
                }
            }
            for key in moves.added(code, Bound::Unbounded) {
                count(key)?;
            }
        }
        Ok(counts)
    }
}

/// The lower bound of a scan: after `start` when resuming, else from `prefix`.
fn from<'a>(prefix: &'a [u8], start: Option<&'a [u8]>) -> Bound<&'a [u8]> {
    match start {
        Some(after) => Bound::Excluded(after),
        None => Bound::Included(prefix),
    }
}

/// Reads the records under `prefix` after `start` into `page`; returns the last key read if the
/// page stopped before the end.
fn scan_records(
    snapshot: &Snapshot,
    prefix: &[u8],
    start: Option<&[u8]>,
    page: &mut Page<'_>,
) -> Result<Option<Vec<u8>>, StoreError> {
    for entry in snapshot.rows(from(prefix, start))? {
        let (key, row) = entry?;
        if !key.starts_with(prefix) {
            break;
        }
        let record = snapshot.decode_found(&key, &row)?;
        if !page.offer(Some(record)) {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// Reads the children of `parent` after `start` into `page`; returns the last child read if the
/// page stopped before the end.
fn scan_children(
    snapshot: &Snapshot,
    children: &ReadOnlyTable<(&'static [u8], &'static [u8]), ()>,
    parent: &[u8],
    start: Option<&[u8]>,
    page: &mut Page<'_>,
) -> Result<Option<Vec<u8>>, StoreError> {
    let lower = match start {
        Some(after) => Bound::Excluded((parent, after)),
        None => Bound::Included((parent, &[][..])),
    };
    let range = children
        .range::<(&[u8], &[u8])>((lower, Bound::Unbounded))
        .map_err(internal)?;
    for entry in range {
        let (k, _) = entry.map_err(internal)?;
        let (p, child) = k.value();
        if p != parent {
            break;
        }
        if !page.offer(snapshot.record(child)?) {
            return Ok(Some(child.to_vec()));
        }
    }
    Ok(None)
}

/// A scan of one bucket of the listing index under an id prefix, with the moves not yet in it.
struct Scan<'s> {
    snapshot: &'s Snapshot,
    listing: &'s ReadOnlyTable<(u8, &'static [u8]), ()>,
    moves: &'s Moves<u8>,
    code: u8,
    prefix: &'s [u8],
}

impl Scan<'_> {
    /// Reads the ids of the bucket after `start` into `page`, the table's and the moves' merged
    /// in order; returns the last id read if the page stopped before the bucket's end.
    fn bucket(
        &self,
        start: Option<&[u8]>,
        page: &mut Page<'_>,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let (code, prefix) = (self.code, self.prefix);
        let lower = match start {
            Some(after) => Bound::Excluded((code, after)),
            None => Bound::Included((code, prefix)),
        };
        let range = self
            .listing
            .range::<(u8, &[u8])>((lower, Bound::Unbounded))
            .map_err(internal)?;
        let mut added = self
            .moves
            .added(code, from(prefix, start))
            .take_while(|key| key.starts_with(prefix))
            .peekable();
        for entry in range {
            let (k, _) = entry.map_err(internal)?;
            let (c, key) = k.value();
            if c != code || !key.starts_with(prefix) {
                break;
            }
            while let Some(add) = added.next_if(|add| *add <= key) {
                if add != key && !page.offer(self.snapshot.record(add)?) {
                    return Ok(Some(add.to_vec()));
                }
            }
            if !self.moves.removed(code, key) && !page.offer(self.snapshot.record(key)?) {
                return Ok(Some(key.to_vec()));
            }
        }
        for add in added {
            if !page.offer(self.snapshot.record(add)?) {
                return Ok(Some(add.to_vec()));
            }
        }
        Ok(None)
    }
}
