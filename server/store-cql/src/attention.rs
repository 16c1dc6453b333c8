//! The CQL store's needs-attention counts (`Store::attention`): a pass over the index rows of the
//! buckets every tenant shares (PROCESSING, AT_MOST_ONCE PROCESSING, UNKNOWN), each candidate
//! checked against its record like a listing does (`list`), stale rows deleted on the way. The
//! pass first resolves the insert intents left behind (`pending`): it is what lists a record whose
//! server stopped between the record's write and its index rows.

use super::index::{self, StatusRow, SHARDS};
use super::list::{record_is_stale, text, Row, PARTITION_PAGE};
use super::CqlStore;
use oncekey_ledger::{Attention, AttentionCounts, Bucket, Millis};
use oncekey_store::StoreError;
use scylla::value::CqlValue;

impl CqlStore {
    /// `Store::attention`: the shared bucket rows that may need attention, each candidate checked
    /// against its record. A PROCESSING row whose recorded lease end is still ahead is not read
    /// (every durable write rewrites the row, so a renewal shows there).
    pub(super) async fn attention_counts(
        &self,
        now: Millis,
    ) -> Result<AttentionCounts, StoreError> {
        // First the records whose insert left its intent behind (`pending`), so that they
        // are counted (and listed) too.
        self.resolve_intents(now).await?;
        let mut counts = AttentionCounts::default();
        for bucket in Attention::buckets() {
            let leased = matches!(
                bucket,
                Bucket::ProcessingAtMostOnce | Bucket::Stored(oncekey_ledger::Status::Processing)
            );
            let mut walk = SharedWalk::new(index::bucket_name(bucket));
            while let Some(rows) = self.next_shared_page(&mut walk).await? {
                let candidates: Vec<Row> = rows
                    .into_iter()
                    .filter(|r| !leased || r.lease_expires_at.is_none_or(|end| end <= now))
                    .collect();
                for (row, record) in self.read_rows(candidates, now).await? {
                    let in_place = record
                        .as_ref()
                        .is_some_and(|r| Bucket::of(r) == Some(bucket));
                    if in_place {
                        if let Some(why) = record.as_ref().and_then(|r| Attention::of(r, now)) {
                            counts.add(why);
                        }
                    } else if record_is_stale(record.as_ref(), &row, now) {
                        let status_row = StatusRow {
                            bucket,
                            id: row.id.clone(),
                        };
                        let values = index::delete_status_values(&status_row, row.write_time);
                        self.spawn_deletes(vec![("status", values)]);
                    }
                }
            }
        }
        Ok(counts)
    }

    /// The next page of `walk`'s rows (every shard of its bucket in the shared scope, in
    /// order), or `None` when the walk is over.
    pub(super) async fn next_shared_page(
        &self,
        walk: &mut SharedWalk,
    ) -> Result<Option<Vec<Row>>, StoreError> {
        while walk.shard < SHARDS {
            let values = vec![
                text(index::SHARED_SCOPE),
                text(walk.bucket),
                Some(CqlValue::Int(walk.shard)),
                text(&walk.after.0),
                text(&walk.after.1),
                text(&walk.after.2),
                Some(CqlValue::Int(PARTITION_PAGE)),
            ];
            let rows = self.rows(&self.index.page_partition, values, true).await?;
            if rows.len() < PARTITION_PAGE as usize {
                // This shard is done: the next call reads the next one.
                walk.shard += 1;
                walk.after = Default::default();
            } else if let Some(last) = rows.last() {
                walk.after = (
                    last.id.tenant.clone(),
                    last.id.namespace.clone(),
                    last.id.key.clone(),
                );
            }
            if !rows.is_empty() {
                return Ok(Some(rows));
            }
        }
        Ok(None)
    }
}

/// Where a walk over one bucket's rows in the shared scope stands: the shard, and the last
/// (tenant, namespace, key) read in it.
pub(super) struct SharedWalk {
    bucket: &'static str,
    shard: i32,
    after: (String, String, String),
}

impl SharedWalk {
    pub(super) fn new(bucket: &'static str) -> Self {
        Self {
            bucket,
            shard: 0,
            after: Default::default(),
        }
    }
}
