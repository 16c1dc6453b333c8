//! Listing on the CQL store: the index rows written beside each transition (`index`), and the
//! reads that walk them — a page of a tenant's records, the counts of records needing attention.
//!
//! Every row a reader meets is checked against its record (read at QUORUM, without history or
//! large columns): a record is listed only from the row of the bucket (or parent) it is in now,
//! live and matching the filter, so it is never shown under a status it does not have, nor twice
//! in one page. Stale rows are deleted in the background (`index::is_stale`).
//!
//! A page walks the filter's buckets in order, each over its `index::SHARDS` partitions in
//! order; its cursor is (bucket, shard, namespace, key) of the last row read. A page stops when
//! full, or after `SCAN_BUDGET` rows or `QUERY_BUDGET` queries, with a cursor to go on from.
//! The needs-attention counts read the same rows (`attention`).

use super::index::{self, StatusRow, SHARDS};
use super::{errors, with_first_row, CqlStore};
use futures_util::{StreamExt, TryStreamExt};
use oncekey_ledger::{Bucket, ListFilter, Millis, Record, RecordId};
use oncekey_store::{ListPage, ListQuery, StoreError};
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlTimestamp, CqlValue};

/// Most rows one page reads beyond the records it returns.
const SCAN_BUDGET: usize = 2000;
/// Most index queries one page runs (an empty filter walks every bucket's 16 partitions).
const QUERY_BUDGET: usize = 400;
/// Records read at once while checking rows.
const READS_IN_FLIGHT: usize = 64;
/// Rows one query of a whole partition returns (the attention counts).
pub(super) const PARTITION_PAGE: i32 = 1000;

/// One index row as read.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) id: RecordId,
    pub(super) version: u64,
    /// The lease end the row recorded (`records_by_status` only).
    pub(super) lease_expires_at: Option<Millis>,
    pub(super) written_at: Millis,
    /// The row's write time, to delete exactly it.
    pub(super) write_time: i64,
}

/// Where a page stopped: which source, bucket and shard, and the last (namespace, key) read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Cursor {
    bucket: u8,
    shard: u8,
    namespace: String,
    key: String,
}

impl Cursor {
    fn encode(&self, source: u8) -> Vec<u8> {
        let mut out = vec![source, self.bucket, self.shard];
        for part in [&self.namespace, &self.key] {
            out.extend_from_slice(&(part.len() as u32).to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        out
    }

    fn decode(bytes: &[u8], source: u8) -> Result<Self, StoreError> {
        let bad = || StoreError::Corrupt("a page cursor of another listing".into());
        let [s, bucket, shard, rest @ ..] = bytes else {
            return Err(bad());
        };
        if *s != source {
            return Err(bad());
        }
        let mut rest: &[u8] = rest;
        let mut part = || -> Result<String, StoreError> {
            let (len, after) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
            let len = u32::from_be_bytes(*len) as usize;
            let text = after.get(..len).ok_or_else(bad)?;
            rest = &after[len..];
            String::from_utf8(text.to_vec()).map_err(|_| bad())
        };
        Ok(Self {
            bucket: *bucket,
            shard: *shard,
            namespace: part()?,
            key: part()?,
        })
    }
}

/// The first byte of a cursor: which index the listing walks.
const BY_STATUS: u8 = 1;
const BY_PARENT: u8 = 2;

/// A page being filled.
struct Page<'q> {
    query: ListQuery<'q>,
    now: Millis,
    records: Vec<Record>,
    examined: usize,
    queries: usize,
}

impl Page<'_> {
    fn full(&self) -> bool {
        self.records.len() >= self.query.limit
    }

    fn out_of_budget(&self) -> bool {
        self.examined >= SCAN_BUDGET || self.queries >= QUERY_BUDGET
    }

    /// How many rows the next query asks for.
    fn want(&self) -> i32 {
        let left = self.query.limit.saturating_sub(self.records.len()).max(1);
        i32::try_from(left.min(1000)).unwrap_or(1000)
    }
}

pub(super) fn text(s: &str) -> Option<CqlValue> {
    Some(CqlValue::Text(s.to_owned()))
}

fn millis(t: Option<CqlTimestamp>) -> Option<Millis> {
    t.map(|t| t.0)
}

impl CqlStore {
    /// Writes `record`'s index rows: before the LWT of a transition, after that of a new record
    /// (whose intent went before it: `pending`).
    pub(super) async fn put_index(&self, record: &Record, now: Millis) -> Result<(), StoreError> {
        let session = self.session();
        let status = StatusRow::of(record).map(|row| {
            let values = index::put_status_values(&row, record, now);
            session.execute_unpaged(&self.index.put_status, values)
        });
        let child = index::put_child_values(record, now)
            .map(|values| session.execute_unpaged(&self.index.put_child, values));
        let (status, child) = futures_util::future::join(
            futures_util::future::OptionFuture::from(status),
            futures_util::future::OptionFuture::from(child),
        )
        .await;
        for result in [status, child].into_iter().flatten() {
            result.map_err(|e| errors::classify(&e).into_store_error())?;
        }
        Ok(())
    }

    /// Once `record` replaced `previous`, deletes in the background the rows of the bucket and
    /// parent `previous` was indexed under and `record` is not (a failure leaves a stale row,
    /// which readers delete).
    pub(super) fn left_behind(&self, previous: &Record, record: &Record) {
        let timestamp = index::write_timestamp(record);
        let mut deletes: Vec<(&'static str, Vec<super::Value>)> = Vec::new();
        if let Some(old) = StatusRow::of(previous) {
            if Bucket::of(record) != Some(old.bucket) {
                deletes.push(("status", index::delete_status_values(&old, timestamp)));
            }
        }
        if previous.parent != record.parent {
            if let Some(key) = index::child_key_values(previous) {
                deletes.push(("child", index::delete_child_values(key, timestamp)));
            }
        }
        if !deletes.is_empty() {
            self.spawn_deletes(deletes);
        }
    }

    /// Runs index deletes in the background; a failure only leaves a stale row.
    pub(super) fn spawn_deletes(&self, deletes: Vec<(&'static str, Vec<super::Value>)>) {
        let (session, statements) = (self.session(), self.index.clone());
        tokio::spawn(async move {
            for (table, values) in deletes {
                let statement = match table {
                    "status" => &statements.delete_status,
                    _ => &statements.delete_child,
                };
                if let Err(e) = session.execute_unpaged(statement, values).await {
                    tracing::debug!(error = %e, "index row not deleted; readers will");
                }
            }
        });
    }

    /// The record of `id` as listed (no history, result body or error details), `None` when
    /// absent or expired at `now`.
    pub(super) async fn read_listed(
        &self,
        id: &RecordId,
        now: Millis,
    ) -> Result<Option<Record>, StoreError> {
        let result = self
            .session()
            .execute_unpaged(
                &self.index.read_listed,
                super::codec::key_values(id).to_vec(),
            )
            .await
            .map_err(|e| errors::classify(&e).into_store_error())?;
        let record = with_first_row(result, |row| row.map(|r| r.record(id)).transpose())?;
        Ok(record.flatten().filter(|r| !r.is_expired(now)))
    }

    /// The records of `rows`, read concurrently, in order.
    pub(super) async fn read_rows(
        &self,
        rows: Vec<Row>,
        now: Millis,
    ) -> Result<Vec<(Row, Option<Record>)>, StoreError> {
        futures_util::stream::iter(rows)
            .map(|row| async move {
                let record = self.read_listed(&row.id, now).await?;
                Ok::<_, StoreError>((row, record))
            })
            .buffered(READS_IN_FLIGHT)
            .try_collect()
            .await
    }

    /// Runs a query for index rows (`with_lease`: rows of `records_by_status`).
    pub(super) async fn rows(
        &self,
        statement: &PreparedStatement,
        values: Vec<super::Value>,
        with_lease: bool,
    ) -> Result<Vec<Row>, StoreError> {
        let result = self
            .session()
            .execute_unpaged(statement, values)
            .await
            .map_err(|e| errors::classify(&e).into_store_error())?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Internal(format!("expected rows: {e}")))?;
        let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(e.to_string());
        let to_row = |tenant: String,
                      namespace: String,
                      key: String,
                      version: Option<i64>,
                      written_at: Option<CqlTimestamp>,
                      write_time: Option<i64>| Row {
            id: RecordId::new(tenant, namespace, key),
            version: version.and_then(|v| u64::try_from(v).ok()).unwrap_or(0),
            lease_expires_at: None,
            written_at: millis(written_at).unwrap_or(0),
            write_time: write_time.unwrap_or(0),
        };
        if with_lease {
            type Typed = (
                String,
                String,
                String,
                Option<i64>,
                Option<CqlTimestamp>,
                Option<CqlTimestamp>,
                Option<i64>,
            );
            rows.rows::<Typed>()
                .map_err(|e| corrupt(&e))?
                .map(|row| {
                    let (t, n, k, v, lease, written, wt) = row.map_err(|e| corrupt(&e))?;
                    let mut row = to_row(t, n, k, v, written, wt);
                    row.lease_expires_at = millis(lease);
                    Ok(row)
                })
                .collect()
        } else {
            type Typed = (
                String,
                String,
                String,
                Option<i64>,
                Option<CqlTimestamp>,
                Option<i64>,
            );
            rows.rows::<Typed>()
                .map_err(|e| corrupt(&e))?
                .map(|row| {
                    let (t, n, k, v, written, wt) = row.map_err(|e| corrupt(&e))?;
                    Ok(to_row(t, n, k, v, written, wt))
                })
                .collect()
        }
    }

    /// `Store::list`.
    pub(super) async fn list_page(
        &self,
        query: ListQuery<'_>,
        now: Millis,
    ) -> Result<ListPage, StoreError> {
        let mut page = Page {
            query,
            now,
            records: Vec::new(),
            examined: 0,
            queries: 0,
        };
        let next = match &query.filter.parent {
            Some(_) => {
                let cursor = query
                    .after
                    .map(|c| Cursor::decode(c, BY_PARENT))
                    .transpose()?;
                self.walk_children(&mut page, cursor.unwrap_or_default())
                    .await?
                    .map(|c| c.encode(BY_PARENT))
            }
            None => {
                let cursor = query
                    .after
                    .map(|c| Cursor::decode(c, BY_STATUS))
                    .transpose()?;
                self.walk_buckets(&mut page, cursor.unwrap_or_default())
                    .await?
                    .map(|c| c.encode(BY_STATUS))
            }
        };
        Ok(ListPage {
            records: page.records,
            next,
        })
    }

    /// Fills `page` from the bucket rows of the filter's buckets from `at`; returns where to go
    /// on from, if anything is left.
    async fn walk_buckets(
        &self,
        page: &mut Page<'_>,
        mut at: Cursor,
    ) -> Result<Option<Cursor>, StoreError> {
        let filter: &ListFilter = page.query.filter;
        let tenant = page.query.tenant;
        let buckets = filter.buckets();
        while let Some(bucket) = buckets.get(usize::from(at.bucket)).copied() {
            while i32::from(at.shard) < SHARDS {
                let scope = index::scope(bucket, tenant);
                let mut values = vec![
                    text(scope),
                    text(index::bucket_name(bucket)),
                    Some(CqlValue::Int(i32::from(at.shard))),
                    text(tenant),
                ];
                let statement = match &filter.namespace {
                    Some(ns) => {
                        values.extend([text(ns), text(&at.key)]);
                        &self.index.page_status_in_namespace
                    }
                    None => {
                        values.extend([text(&at.namespace), text(&at.key)]);
                        &self.index.page_status
                    }
                };
                let want = page.want();
                values.push(Some(CqlValue::Int(want)));
                page.queries += 1;
                let rows = self.rows(statement, values, true).await?;
                let exhausted = rows.len() < want as usize;
                for (row, record) in self.read_rows(rows, page.now).await? {
                    at.namespace.clone_from(&row.id.namespace);
                    at.key.clone_from(&row.id.key);
                    let in_place = record
                        .as_ref()
                        .is_some_and(|r| Bucket::of(r) == Some(bucket));
                    self.take(page, row, record, in_place, |row| StatusRow {
                        bucket,
                        id: row.id.clone(),
                    });
                    if page.full() {
                        return Ok(Some(at));
                    }
                }
                if page.out_of_budget() {
                    return Ok(Some(at));
                }
                if exhausted {
                    at.shard += 1;
                    at.namespace.clear();
                    at.key.clear();
                }
            }
            at = Cursor {
                bucket: at.bucket + 1,
                ..Cursor::default()
            };
        }
        Ok(None)
    }

    /// Fills `page` from the children rows of the filter's parent from `at`.
    async fn walk_children(
        &self,
        page: &mut Page<'_>,
        mut at: Cursor,
    ) -> Result<Option<Cursor>, StoreError> {
        let parent = page.query.filter.parent.clone().expect("a parent filter");
        loop {
            let want = page.want();
            let values = vec![
                text(page.query.tenant),
                text(&parent.namespace),
                text(&parent.key),
                text(&at.namespace),
                text(&at.key),
                Some(CqlValue::Int(want)),
            ];
            page.queries += 1;
            let rows = self.rows(&self.index.page_children, values, false).await?;
            let exhausted = rows.len() < want as usize;
            for (row, record) in self.read_rows(rows, page.now).await? {
                at.namespace.clone_from(&row.id.namespace);
                at.key.clone_from(&row.id.key);
                let in_place = record
                    .as_ref()
                    .is_some_and(|r| r.parent.as_ref() == Some(&parent));
                let child = row.clone();
                if !in_place && record_is_stale(record.as_ref(), &row, page.now) {
                    let mut key = vec![text(&child.id.tenant), text(&parent.namespace)];
                    key.extend([
                        text(&parent.key),
                        text(&child.id.namespace),
                        text(&child.id.key),
                    ]);
                    self.spawn_deletes(vec![(
                        "child",
                        index::delete_child_values(key, child.write_time),
                    )]);
                }
                match record {
                    Some(r) if in_place && page.query.filter.matches(&r, page.now) => {
                        page.records.push(r)
                    }
                    _ => page.examined += 1,
                }
                if page.full() {
                    return Ok(Some(at));
                }
            }
            if exhausted {
                return Ok(None);
            }
            if page.out_of_budget() {
                return Ok(Some(at));
            }
        }
    }

    /// Takes one checked bucket row into `page`: its record when it is where the row says and
    /// matches the filter; otherwise, if the row is stale, deletes it in the background.
    fn take(
        &self,
        page: &mut Page<'_>,
        row: Row,
        record: Option<Record>,
        in_place: bool,
        status_row: impl FnOnce(&Row) -> StatusRow,
    ) {
        if !in_place && record_is_stale(record.as_ref(), &row, page.now) {
            let values = index::delete_status_values(&status_row(&row), row.write_time);
            self.spawn_deletes(vec![("status", values)]);
        }
        match record {
            Some(r) if in_place && page.query.filter.matches(&r, page.now) => page.records.push(r),
            _ => page.examined += 1,
        }
    }
}

/// `index::is_stale` for a row that does not point at where its record is.
pub(super) fn record_is_stale(record: Option<&Record>, row: &Row, now: Millis) -> bool {
    index::is_stale(record, false, row.version, row.written_at, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_another_listings() {
        let cursor = Cursor {
            bucket: 2,
            shard: 15,
            namespace: "payments.charge".into(),
            key: "order/β-1".into(),
        };
        let bytes = cursor.encode(BY_STATUS);
        assert_eq!(Cursor::decode(&bytes, BY_STATUS).unwrap(), cursor);
        assert!(Cursor::decode(&bytes, BY_PARENT).is_err());
        assert!(Cursor::decode(&bytes[..bytes.len() - 1], BY_STATUS).is_err());
        assert!(Cursor::decode(&[], BY_STATUS).is_err());
    }
}
