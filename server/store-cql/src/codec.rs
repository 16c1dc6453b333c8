//! How a `Record` maps to the columns of the `records` table and back.
//!
//! One list of columns (`COLUMNS`) drives both the statement texts (see `statements`) and the bound
//! values, so the two cannot drift apart. Rows are decoded by column name, never by position:
//! Cassandra and ScyllaDB return different column sets for a failed lightweight transaction.
//! This module does no I/O and knows nothing of consistency levels or retries.

use oncekey_ledger::{Approval, Decision, Millis, OpError, OpResult, ParentRef, Record, RecordId};
use oncekey_ledger::{Semantics, Status};
use oncekey_store::StoreError;
use scylla::response::query_result::ColumnSpecs;
use scylla::value::{CqlTimestamp, CqlValue, Row};
use std::collections::BTreeMap;

/// The partition key, in order: tenant is part of it, so tenants never share a row.
pub(crate) const KEY_COLUMNS: [&str; 3] = ["tenant", "namespace", "key"];

/// Every non-key column, in the order their values are bound (`require_approval` to
/// `kept_until` come from migration 0002_operations, `budget` from 0005_budget).
pub(crate) const COLUMNS: [&str; 32] = [
    "version",
    "status",
    "fingerprint",
    "semantics",
    "fencing_token",
    "attempt",
    "dedup_hits",
    "lease_owner",
    "lease_expires_at",
    "created_at",
    "updated_at",
    "expires_at",
    "retention_ms",
    "result_code",
    "result_body",
    "result_content_type",
    "result_metadata",
    "error_code",
    "error_message",
    "error_details",
    "parent",
    "write_id",
    "history",
    "require_approval",
    "max_attempts",
    "reconciliations",
    "approval_decision",
    "approval_decided_by",
    "approval_note",
    "approval_decided_at",
    "kept_until",
    "budget",
];

/// The columns a dedup hit's write changes (`Store::replace_if_version` with `durable == false`):
/// rewriting the others would copy a result of up to a MiB through Paxos for a counter. Not
/// `write_id`: a hit write leaves the last full write's nonce alone (writers that predate
/// `WRITE_MARKS` still recognise themselves by it).
pub(crate) const HIT_COLUMNS: [&str; 3] = ["version", "dedup_hits", "history"];

/// The map (migration 0004, named when only dedup hits' writes used it) of the latest writes'
/// nonces, by slot. Every write that leaves a row puts its nonce there, so that it recognises
/// itself even after further writes followed it (the row's `write_id` is only the last full
/// write's).
pub(crate) const WRITE_MARKS: &str = "hit_writes";

/// Slots of `WRITE_MARKS`: a write of version `v` takes slot `(v - 1) % MARK_SLOTS` (the version
/// it is conditioned on), so its nonce stays until 64 more versions of the row were written — room
/// for the writes of other servers while a write's outcome is settled (a dedup hit's write is
/// settled however long it takes). Readers look in every slot, so writers with another count of
/// slots (16 before 2026-12-02) share the map safely.
const MARK_SLOTS: u64 = 64;

/// The longest a write's nonce is kept: it is read only to settle that write's answer, at once.
/// Kept no longer than the row either, so that no nonce outlives the cells that write set.
const MARK_TTL_SECS: i32 = 600;

/// The longest TTL Cassandra and ScyllaDB accept (20 years).
pub(crate) const MAX_TTL_SECS: i32 = 630_720_000;

/// A bound value: `None` writes a null (clears the column).
pub(crate) type Value = Option<CqlValue>;

/// The stored `expires_at` of a record kept until it settles (`Record::expires_at` unset): the
/// latest timestamp, so that the writes' condition `expires_at > now` holds for it (CQL conditions
/// cannot say "or is null"), and readers that predate the rule keep the row too.
pub(crate) const NEVER: Millis = Millis::MAX;

/// The row TTL for `record` written at `now`: whole seconds until `expires_at`, rounded up so the
/// row never disappears before the record expires; at least 1 for a record that expires (0 would
/// mean "never expire"), and 0 — no TTL — for one kept until it settles.
pub(crate) fn ttl_secs(record: &Record, now: Millis) -> i32 {
    let Some(expires_at) = record.expires_at else {
        return 0;
    };
    let left = expires_at.saturating_sub(now).max(1);
    let secs = left.saturating_add(999) / 1000;
    i32::try_from(secs)
        .unwrap_or(MAX_TTL_SECS)
        .min(MAX_TTL_SECS)
}

/// The partition key values of `id`.
pub(crate) fn key_values(id: &RecordId) -> [Value; 3] {
    [text(&id.tenant), text(&id.namespace), text(&id.key)]
}

/// The values of `COLUMNS` for `record`, tagged with `write_id` (a random per-write nonce that
/// lets an uncertain write be recognised as ours).
pub(crate) fn column_values(record: &Record, write_id: [u8; 16]) -> Vec<Value> {
    let result = record.result.as_ref();
    let error = record.error.as_ref();
    vec![
        big(record.version),
        text(status_name(record.status)),
        Some(CqlValue::Blob(record.fingerprint.to_vec())),
        text(semantics_name(record.semantics)),
        big(record.fencing_token),
        big(u64::from(record.attempt)),
        big(record.dedup_hits),
        text(&record.lease_owner),
        record.lease_expires_at.map(timestamp),
        Some(timestamp(record.created_at)),
        Some(timestamp(record.updated_at)),
        Some(timestamp(record.expires_at.unwrap_or(NEVER))),
        Some(CqlValue::BigInt(record.retention)),
        result.map(|r| CqlValue::Int(r.code)),
        result.map(|r| CqlValue::Blob(r.body.clone())),
        result.and_then(|r| text(&r.content_type)),
        result.and_then(|r| metadata(&r.metadata)),
        error.map(|e| CqlValue::Int(e.code)),
        error.and_then(|e| text(&e.message)),
        error.map(|e| CqlValue::Blob(e.details.clone())),
        record
            .parent
            .as_ref()
            .map(|p| CqlValue::Tuple(vec![text(&p.namespace), text(&p.key)])),
        Some(CqlValue::Blob(write_id.to_vec())),
        Some(CqlValue::Blob(oncekey_store::events::encode(
            &record.history,
        ))),
        Some(CqlValue::Boolean(record.require_approval)),
        big(u64::from(record.max_attempts)),
        big(u64::from(record.reconciliations)),
        record
            .approval
            .as_ref()
            .and_then(|a| text(decision_name(a.decision))),
        record.approval.as_ref().and_then(|a| text(&a.decided_by)),
        record.approval.as_ref().and_then(|a| text(&a.note)),
        record.approval.as_ref().map(|a| timestamp(a.decided_at)),
        record.kept_until.map(timestamp),
        record
            .budget
            .as_ref()
            .map(|b| CqlValue::Blob(oncekey_store::budget::encode(Some(b)))),
    ]
}

fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Approved => "APPROVED",
        Decision::Rejected => "REJECTED",
    }
}

/// The values of `HIT_COLUMNS` for `record`, in order.
pub(crate) fn hit_values(record: &Record) -> Vec<Value> {
    vec![
        big(record.version),
        big(record.dedup_hits),
        Some(CqlValue::Blob(oncekey_store::events::encode(
            &record.history,
        ))),
    ]
}

/// The values of the statement marking a write of `record` in `WRITE_MARKS` (see
/// `statements::mark_text`): its TTL, its slot, its nonce, then the key. `row_ttl` is the TTL the
/// write gives the row's cells (0: none).
pub(crate) fn mark_values(record: &Record, write_id: [u8; 16], row_ttl: i32) -> Vec<Value> {
    let ttl = match row_ttl {
        0 => MARK_TTL_SECS,
        row => row.min(MARK_TTL_SECS),
    };
    let slot = i32::try_from(record.version.saturating_sub(1) % MARK_SLOTS).unwrap_or(0);
    let mut values = vec![
        Some(CqlValue::Int(ttl)),
        Some(CqlValue::Int(slot)),
        Some(CqlValue::Blob(write_id.to_vec())),
    ];
    values.extend(key_values(&record.id));
    values
}

/// A timestamp value.
pub(crate) fn timestamp(ms: Millis) -> CqlValue {
    CqlValue::Timestamp(CqlTimestamp(ms))
}

/// A version value (`bigint`).
pub(crate) fn big(n: u64) -> Value {
    Some(CqlValue::BigInt(i64::try_from(n).unwrap_or(i64::MAX)))
}

fn text(s: &str) -> Value {
    Some(CqlValue::Text(s.to_owned()))
}

/// An empty map is stored as null (CQL does not distinguish them).
fn metadata(map: &BTreeMap<String, String>) -> Value {
    (!map.is_empty()).then(|| {
        CqlValue::Map(
            map.iter()
                .map(|(k, v)| (CqlValue::Text(k.clone()), CqlValue::Text(v.clone())))
                .collect(),
        )
    })
}

/// The stored name of a status.
pub(crate) fn status_name(status: Status) -> &'static str {
    match status {
        Status::Processing => "PROCESSING",
        Status::Succeeded => "SUCCEEDED",
        Status::Failed => "FAILED",
        Status::Retry => "RETRY",
        Status::Unknown => "UNKNOWN",
        Status::Abandoned => "ABANDONED",
        Status::AwaitingApproval => "AWAITING_APPROVAL",
        Status::Approved => "APPROVED",
        Status::Purged => "PURGED",
    }
}

fn semantics_name(semantics: Semantics) -> &'static str {
    match semantics {
        Semantics::AtLeastOnce => "AT_LEAST_ONCE",
        Semantics::AtMostOnce => "AT_MOST_ONCE",
    }
}

mod row;
#[cfg(test)]
mod tests;

pub(crate) use row::RowView;
