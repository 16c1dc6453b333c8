//! The CQL store's listing indexes (`migrations/0003_listing.cql`): where a record's index rows
//! go, the statements that write and read them, and the write side — kept beside each record's
//! lightweight transaction, never inside it (a conditional batch cannot span partitions).
//!
//! Order, so that an index row exists for every record whose state has held for a moment:
//! - a **transition of an existing record** (`Store::replace`) writes its new rows *before* its
//!   LWT; once the LWT applied, the rows of the bucket (or parent) it left are deleted in the
//!   background. A failed LWT leaves rows that point at a state the record is not in: readers
//!   skip and delete them.
//! - a **new record** (`Store::insert_if_absent`) writes its rows *after* its LWT applied (a row
//!   per insert attempt would be a stale row per Claim of an existing key), and an *intent* row
//!   before it (`pending`), deleted once the rows are written or the LWT refused: a server that
//!   dies between the LWT and the rows leaves the intent, from which the needs-attention pass
//!   writes the rows.
//!
//! Every row is written `USING TIMESTAMP` `write_timestamp(record)`, which grows with every
//! transition of a record and across its incarnations, so a delete of the bucket a record left
//! never removes the row of a later return to that bucket, whatever order they arrive in.
//! Readers delete a stale row at the row's own write time, which removes that row and nothing
//! written after it.

use super::codec::{self, Value};
use super::statements::Levels;
use oncekey_ledger::{Attention, Bucket, Millis, Record, RecordId};
use scylla::client::session::Session;
use scylla::errors::PrepareError;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::CqlValue;
use sha2::{Digest, Sha256};

/// Partitions one bucket of one scope is spread over.
pub(crate) const SHARDS: i32 = 16;
/// The scope of the buckets shared by every tenant (those the needs-attention metric counts).
pub(crate) const SHARED_SCOPE: &str = "*";
/// How old a row that points at a newer version than its record's must be before a reader deems
/// its transition failed and deletes it (a transition in flight writes its row first).
pub(crate) const STALE_AFTER_MS: Millis = 5 * 60_000;

/// The stored name of a bucket.
pub(crate) fn bucket_name(bucket: Bucket) -> &'static str {
    match bucket {
        Bucket::Stored(status) => codec::status_name(status),
        Bucket::ProcessingAtMostOnce => "PROCESSING_AT_MOST_ONCE",
    }
}

/// The partition scope of `bucket` for `tenant`: shared by all tenants for the buckets counted
/// for attention, the tenant's own otherwise.
pub(crate) fn scope(bucket: Bucket, tenant: &str) -> &str {
    match Attention::buckets().contains(&bucket) {
        true => SHARED_SCOPE,
        false => tenant,
    }
}

/// The shard of a record: a hash of its id, modulo `SHARDS`.
pub(crate) fn shard(id: &RecordId) -> i32 {
    let mut hash = Sha256::new();
    for part in [&id.tenant, &id.namespace, &id.key] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part.as_bytes());
    }
    let digest = hash.finalize();
    i32::from(u16::from_be_bytes([digest[0], digest[1]])) % SHARDS
}

/// The write timestamp of `record`'s index rows: its created_at (ms) << 20, plus its version.
/// Grows with every transition, and a new incarnation of a key (created after the old one
/// expired, at least a minute of retention later) starts above anything the old one reached.
pub(crate) fn write_timestamp(record: &Record) -> i64 {
    record
        .created_at
        .max(0)
        .saturating_mul(1 << 20)
        .saturating_add(i64::try_from(record.version).unwrap_or(i64::MAX))
}

/// The index statements.
pub(crate) struct IndexStatements {
    /// Binds scope, bucket, shard, tenant, namespace, key, version, lease_expires_at,
    /// written_at, then the TTL and the timestamp.
    pub put_status: PreparedStatement,
    /// Binds the timestamp, then scope, bucket, shard, tenant, namespace, key.
    pub delete_status: PreparedStatement,
    /// Binds tenant, parent namespace, parent key, namespace, key, version, written_at, then the
    /// TTL and the timestamp.
    pub put_child: PreparedStatement,
    /// Binds the timestamp, then tenant, parent namespace, parent key, namespace, key.
    pub delete_child: PreparedStatement,
    /// A page of one bucket partition for a tenant; binds scope, bucket, shard, tenant, then the
    /// (namespace, key) to start after, and the limit.
    pub page_status: PreparedStatement,
    /// `page_status` within one namespace; binds scope, bucket, shard, tenant, namespace, the
    /// key to start after, and the limit.
    pub page_status_in_namespace: PreparedStatement,
    /// A page of a whole bucket partition, every tenant; binds scope, bucket, shard, then the
    /// (tenant, namespace, key) to start after, and the limit.
    pub page_partition: PreparedStatement,
    /// A page of a parent's children; binds tenant, parent namespace, parent key, then the
    /// (namespace, key) to start after, and the limit.
    pub page_children: PreparedStatement,
    /// A record without its history, result body and error details; binds its key.
    pub read_listed: PreparedStatement,
}

/// The columns of a listed record: every record column but the large or unused ones.
pub(crate) fn listed_columns() -> Vec<&'static str> {
    codec::COLUMNS
        .iter()
        .copied()
        .filter(|c| !matches!(*c, "result_body" | "error_details" | "history" | "write_id"))
        .collect()
}

/// The columns every index row read returns, in order.
const ENTRY_COLUMNS: &str =
    "tenant, namespace, key, version, lease_expires_at, written_at, WRITETIME(version)";

impl IndexStatements {
    /// Prepares them against `keyspace`; fails when migration 0003 has not run.
    pub(crate) async fn prepare(
        session: &Session,
        keyspace: &str,
        levels: Levels,
    ) -> Result<Self, PrepareError> {
        let prepare = |text: String| async move {
            let mut statement = session.prepare(text).await?;
            statement.set_consistency(levels.consistency);
            // Index writes are idempotent (a fixed timestamp): the driver may retry them.
            statement.set_is_idempotent(true);
            Ok::<_, PrepareError>(statement)
        };
        let status = format!("{keyspace}.records_by_status");
        let children = format!("{keyspace}.records_by_parent");
        let partition = "scope = ? AND bucket = ? AND shard = ?";
        Ok(Self {
            put_status: prepare(format!(
                "INSERT INTO {status} (scope, bucket, shard, tenant, namespace, key, version, \
                 lease_expires_at, written_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 USING TTL ? AND TIMESTAMP ?"
            ))
            .await?,
            delete_status: prepare(format!(
                "DELETE FROM {status} USING TIMESTAMP ? WHERE {partition} AND tenant = ? \
                 AND namespace = ? AND key = ?"
            ))
            .await?,
            put_child: prepare(format!(
                "INSERT INTO {children} (tenant, parent_namespace, parent_key, namespace, key, \
                 version, written_at) VALUES (?, ?, ?, ?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?"
            ))
            .await?,
            delete_child: prepare(format!(
                "DELETE FROM {children} USING TIMESTAMP ? WHERE tenant = ? \
                 AND parent_namespace = ? AND parent_key = ? AND namespace = ? AND key = ?"
            ))
            .await?,
            page_status: prepare(format!(
                "SELECT {ENTRY_COLUMNS} FROM {status} WHERE {partition} AND tenant = ? \
                 AND (namespace, key) > (?, ?) LIMIT ?"
            ))
            .await?,
            page_status_in_namespace: prepare(format!(
                "SELECT {ENTRY_COLUMNS} FROM {status} WHERE {partition} AND tenant = ? \
                 AND namespace = ? AND key > ? LIMIT ?"
            ))
            .await?,
            page_partition: prepare(format!(
                "SELECT {ENTRY_COLUMNS} FROM {status} WHERE {partition} \
                 AND (tenant, namespace, key) > (?, ?, ?) LIMIT ?"
            ))
            .await?,
            page_children: prepare(format!(
                "SELECT tenant, namespace, key, version, written_at, WRITETIME(version) \
                 FROM {children} WHERE tenant = ? AND parent_namespace = ? \
                 AND parent_key = ? AND (namespace, key) > (?, ?) LIMIT ?"
            ))
            .await?,
            read_listed: prepare(format!(
                "SELECT {} FROM {keyspace}.{} WHERE tenant = ? AND namespace = ? AND key = ?",
                listed_columns().join(", "),
                super::statements::RECORDS,
            ))
            .await?,
        })
    }
}

/// The key that signs this keyspace's page tokens: made by the first server that asks (a
/// lightweight transaction, so concurrent starts agree), read at SERIAL by every server.
pub(crate) async fn page_token_key(
    session: &Session,
    keyspace: &str,
    levels: Levels,
) -> Result<[u8; 32], scylla::errors::ExecutionError> {
    let mut insert = scylla::statement::unprepared::Statement::new(format!(
        "INSERT INTO {keyspace}.listing_keys (name, value) VALUES ('page_token', ?) IF NOT EXISTS"
    ));
    insert.set_consistency(levels.consistency);
    insert.set_serial_consistency(Some(levels.serial));
    let fresh: [u8; 32] = rand::random();
    session.query_unpaged(insert, (fresh.to_vec(),)).await?;
    let mut read = scylla::statement::unprepared::Statement::new(format!(
        "SELECT value FROM {keyspace}.listing_keys WHERE name = 'page_token'"
    ));
    read.set_consistency(levels.serial_read());
    let result = session.query_unpaged(read, ()).await?;
    let key = result
        .into_rows_result()
        .ok()
        .and_then(|rows| rows.maybe_first_row::<(Vec<u8>,)>().ok().flatten())
        .and_then(|(value,)| <[u8; 32]>::try_from(value.as_slice()).ok());
    // Absent only if the insert's row vanished: then this server's own key serves (its tokens
    // work on this replica only).
    Ok(key.unwrap_or(fresh))
}

/// A record's row in `records_by_status`: where it is and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusRow {
    pub bucket: Bucket,
    pub id: RecordId,
}

impl StatusRow {
    /// The row of `record`; `None` for a tombstone (never listed).
    pub(crate) fn of(record: &Record) -> Option<Self> {
        Bucket::of(record).map(|bucket| Self {
            bucket,
            id: record.id.clone(),
        })
    }

    /// Its primary key values: scope, bucket, shard, tenant, namespace, key.
    pub(crate) fn key_values(&self) -> Vec<Value> {
        vec![
            text(scope(self.bucket, &self.id.tenant)),
            text(bucket_name(self.bucket)),
            Some(CqlValue::Int(shard(&self.id))),
            text(&self.id.tenant),
            text(&self.id.namespace),
            text(&self.id.key),
        ]
    }
}

/// The values of `put_status` for `record` written at `now`.
pub(crate) fn put_status_values(row: &StatusRow, record: &Record, now: Millis) -> Vec<Value> {
    let mut values = row.key_values();
    values.extend([
        codec::big(record.version),
        record.lease_expires_at.map(codec::timestamp),
        Some(codec::timestamp(now)),
        Some(CqlValue::Int(codec::ttl_secs(record, now))),
        Some(CqlValue::BigInt(write_timestamp(record))),
    ]);
    values
}

/// The values of `delete_status` for `row`, at write time `timestamp`.
pub(crate) fn delete_status_values(row: &StatusRow, timestamp: i64) -> Vec<Value> {
    let mut values = vec![Some(CqlValue::BigInt(timestamp))];
    values.extend(row.key_values());
    values
}

/// The primary key values of `record`'s row in `records_by_parent`, if it names a parent.
pub(crate) fn child_key_values(record: &Record) -> Option<Vec<Value>> {
    let parent = record.parent.as_ref()?;
    Some(vec![
        text(&record.id.tenant),
        text(&parent.namespace),
        text(&parent.key),
        text(&record.id.namespace),
        text(&record.id.key),
    ])
}

/// The values of `put_child` for `record` written at `now`, if it names a parent.
pub(crate) fn put_child_values(record: &Record, now: Millis) -> Option<Vec<Value>> {
    let mut values = child_key_values(record)?;
    values.extend([
        codec::big(record.version),
        Some(codec::timestamp(now)),
        Some(CqlValue::Int(codec::ttl_secs(record, now))),
        Some(CqlValue::BigInt(write_timestamp(record))),
    ]);
    Some(values)
}

/// The values of `delete_child` for the child row `key_values`, at write time `timestamp`.
pub(crate) fn delete_child_values(key_values: Vec<Value>, timestamp: i64) -> Vec<Value> {
    let mut values = vec![Some(CqlValue::BigInt(timestamp))];
    values.extend(key_values);
    values
}

fn text(s: &str) -> Value {
    Some(CqlValue::Text(s.to_owned()))
}

/// Whether an index row written for version `row_version` at `written_at` (server clock) is
/// stale given the record it points at (`None`: absent or expired) and whether that record is
/// where the row says (`in_place`): a row is kept while its record is there, and while it may
/// belong to a transition still in flight (its version is ahead of the record's, and it is
/// young).
pub(crate) fn is_stale(
    record: Option<&Record>,
    in_place: bool,
    row_version: u64,
    written_at: Millis,
    now: Millis,
) -> bool {
    match record {
        None => true,
        Some(_) if in_place => false,
        Some(r) if row_version <= r.version => true,
        Some(_) => now.saturating_sub(written_at) >= STALE_AFTER_MS,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oncekey_ledger::{claim, complete, ClaimArgs, OpResult, Semantics, Status};

    fn claimed(semantics: Semantics, now: Millis) -> Record {
        let id = RecordId::new("t", "ns", "k");
        let args = ClaimArgs::for_test([1; 32], semantics, 1_000, 60_000, "o");
        claim(&id, None, &args, now).unwrap().record().clone()
    }

    #[test]
    fn write_timestamps_grow_with_transitions_and_incarnations() {
        let first = claimed(Semantics::AtLeastOnce, 1_000);
        let done = complete(Some(&first), 1, &OpResult::default(), 2_000)
            .unwrap()
            .record
            .unwrap();
        assert!(write_timestamp(&done) > write_timestamp(&first));
        let mut hot = done.clone();
        hot.version = 1_000_000;
        // The next incarnation is created after the first expired (retention ≥ 1 min).
        let next = claimed(Semantics::AtLeastOnce, done.expires_at.unwrap());
        assert!(write_timestamp(&next) > write_timestamp(&hot));
    }

    #[test]
    fn attention_buckets_are_shared_and_settled_ones_per_tenant() {
        let processing = Bucket::of(&claimed(Semantics::AtLeastOnce, 0)).unwrap();
        let amo = Bucket::of(&claimed(Semantics::AtMostOnce, 0)).unwrap();
        assert_eq!(scope(processing, "acme"), SHARED_SCOPE);
        assert_eq!(scope(amo, "acme"), SHARED_SCOPE);
        assert_eq!(scope(Bucket::Stored(Status::Unknown), "acme"), SHARED_SCOPE);
        assert_eq!(scope(Bucket::Stored(Status::Succeeded), "acme"), "acme");
        assert_eq!(bucket_name(amo), "PROCESSING_AT_MOST_ONCE");
        for i in 0..200 {
            let s = shard(&RecordId::new("t", "ns", format!("k{i}")));
            assert!((0..SHARDS).contains(&s));
        }
    }

    #[test]
    fn a_row_is_stale_only_once_its_record_moved_on_or_its_transition_failed() {
        let rec = claimed(Semantics::AtLeastOnce, 0);
        assert!(is_stale(None, false, 1, 0, 0), "no record");
        assert!(!is_stale(Some(&rec), true, 1, 0, 0), "where it says");
        assert!(is_stale(Some(&rec), false, 1, 0, 0), "the record moved on");
        // A row written for the next version, before that transition's LWT: kept while young.
        assert!(!is_stale(Some(&rec), false, 2, 0, STALE_AFTER_MS - 1));
        assert!(is_stale(Some(&rec), false, 2, 0, STALE_AFTER_MS));
    }
}
