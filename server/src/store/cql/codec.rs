//! How a `Record` maps to the columns of the `records` table and back.
//!
//! One list of columns (`COLUMNS`) drives both the statement texts (see `statements`) and the bound
//! values, so the two cannot drift apart. Rows are decoded by column name, never by position:
//! Cassandra and ScyllaDB return different column sets for a failed lightweight transaction.
//! This module does no I/O and knows nothing of consistency levels or retries.

use crate::ledger::{Approval, Decision, Millis, OpError, OpResult, ParentRef, Record, RecordId};
use crate::ledger::{Semantics, Status};
use crate::store::StoreError;
use scylla::response::query_result::ColumnSpecs;
use scylla::value::{CqlTimestamp, CqlValue, Row};
use std::collections::BTreeMap;

/// The partition key, in order: tenant is part of it, so tenants never share a row.
pub const KEY_COLUMNS: [&str; 3] = ["tenant", "namespace", "key"];

/// Every non-key column, in the order their values are bound (the last seven come from
/// migration 0002_operations).
pub const COLUMNS: [&str; 31] = [
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
];

/// The columns a dedup hit's write changes (`Store::replace_if_version` with `durable == false`):
/// rewriting the others would copy a result of up to a MiB through Paxos for a counter. Not
/// `write_id`: a hit write leaves the last full write's nonce alone (writers that predate
/// `WRITE_MARKS` still recognise themselves by it).
pub const HIT_COLUMNS: [&str; 3] = ["version", "dedup_hits", "history"];

/// The map (migration 0004, named when only dedup hits' writes used it) of the latest writes'
/// nonces, by slot. Every write that leaves a row puts its nonce there, so that it recognises
/// itself even after further writes followed it (the row's `write_id` is only the last full
/// write's).
pub const WRITE_MARKS: &str = "hit_writes";

/// Slots of `WRITE_MARKS`: a write of version `v` takes slot `(v - 1) % MARK_SLOTS` (the version
/// it is conditioned on), so its nonce stays until sixteen more versions of the row were written.
const MARK_SLOTS: u64 = 16;

/// The longest a write's nonce is kept: it is read only to settle that write's answer, at once.
/// Kept no longer than the row either, so that no nonce outlives the cells that write set.
const MARK_TTL_SECS: i32 = 600;

/// The longest TTL Cassandra and ScyllaDB accept (20 years).
pub const MAX_TTL_SECS: i32 = 630_720_000;

/// A bound value: `None` writes a null (clears the column).
pub type Value = Option<CqlValue>;

/// The stored `expires_at` of a record kept until it settles (`Record::expires_at` unset): the
/// latest timestamp, so that the writes' condition `expires_at > now` holds for it (CQL conditions
/// cannot say "or is null"), and readers that predate the rule keep the row too.
pub const NEVER: Millis = Millis::MAX;

/// The row TTL for `record` written at `now`: whole seconds until `expires_at`, rounded up so the
/// row never disappears before the record expires; at least 1 for a record that expires (0 would
/// mean "never expire"), and 0 — no TTL — for one kept until it settles.
pub fn ttl_secs(record: &Record, now: Millis) -> i32 {
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
pub fn key_values(id: &RecordId) -> [Value; 3] {
    [text(&id.tenant), text(&id.namespace), text(&id.key)]
}

/// The values of `COLUMNS` for `record`, tagged with `write_id` (a random per-write nonce that
/// lets an uncertain write be recognised as ours).
pub fn column_values(record: &Record, write_id: [u8; 16]) -> Vec<Value> {
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
        Some(CqlValue::Blob(crate::store::events::encode(
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
    ]
}

fn decision_name(decision: Decision) -> &'static str {
    match decision {
        Decision::Approved => "APPROVED",
        Decision::Rejected => "REJECTED",
    }
}

/// The values of `HIT_COLUMNS` for `record`, in order.
pub fn hit_values(record: &Record) -> Vec<Value> {
    vec![
        big(record.version),
        big(record.dedup_hits),
        Some(CqlValue::Blob(crate::store::events::encode(
            &record.history,
        ))),
    ]
}

/// The values of the statement marking a write of `record` in `WRITE_MARKS` (see
/// `statements::mark_text`): its TTL, its slot, its nonce, then the key. `row_ttl` is the TTL the
/// write gives the row's cells (0: none).
pub fn mark_values(record: &Record, write_id: [u8; 16], row_ttl: i32) -> Vec<Value> {
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
pub fn timestamp(ms: Millis) -> CqlValue {
    CqlValue::Timestamp(CqlTimestamp(ms))
}

/// A version value (`bigint`).
pub fn big(n: u64) -> Value {
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
pub fn status_name(status: Status) -> &'static str {
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

/// One returned row, read by column name.
pub struct RowView<'a> {
    specs: ColumnSpecs<'a, 'a>,
    row: &'a Row,
}

impl<'a> RowView<'a> {
    /// Wraps a row with the column specs of its result.
    pub fn new(specs: ColumnSpecs<'a, 'a>, row: &'a Row) -> Self {
        Self { specs, row }
    }

    /// Whether the result carries column `name` at all (Cassandra omits columns on some failed
    /// conditions).
    pub fn has(&self, name: &str) -> bool {
        self.specs.get_by_name(name).is_some()
    }

    /// The value of column `name`, `None` when absent from the result or null.
    pub fn get(&self, name: &str) -> Option<&'a CqlValue> {
        let (index, _) = self.specs.get_by_name(name)?;
        self.row.columns.get(index)?.as_ref()
    }

    /// `[applied]` of a conditional statement.
    pub fn applied(&self) -> Result<bool, StoreError> {
        match self.get("[applied]") {
            Some(CqlValue::Boolean(b)) => Ok(*b),
            other => Err(corrupt("[applied]", other)),
        }
    }

    /// The stored version; `None` for a row whose cells all expired (only its row marker is left).
    pub fn version(&self) -> Result<Option<u64>, StoreError> {
        self.get("version")
            .map(|v| u64_of("version", v))
            .transpose()
    }

    /// The stored write nonce, if any.
    pub fn write_id(&self) -> Option<&'a [u8]> {
        match self.get("write_id") {
            Some(CqlValue::Blob(b)) => Some(b),
            _ => None,
        }
    }

    /// The nonces of the latest writes the row took (`WRITE_MARKS`).
    pub fn write_marks(&self) -> Vec<[u8; 16]> {
        match self.get(WRITE_MARKS) {
            Some(CqlValue::Map(slots)) => slots
                .iter()
                .filter_map(|(_, nonce)| match nonce {
                    CqlValue::Blob(b) => <[u8; 16]>::try_from(b.as_slice()).ok(),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether every record column is present (a full row rather than just condition columns).
    pub fn is_full(&self) -> bool {
        COLUMNS.iter().all(|c| self.has(c))
    }

    /// Decodes the record of `id`; `None` when the row holds no record: its cells expired, or
    /// are expiring. TTLs count whole seconds, so the cells of two writes expire up to a second
    /// apart after `expires_at`; a dedup hit's write sets only `HIT_COLUMNS`, so for that second
    /// a row may keep `version` and lose every other column (which the full writes set together,
    /// `expires_at` among them), or the other way round.
    pub fn record(&self, id: &RecordId) -> Result<Option<Record>, StoreError> {
        let (Some(version), Some(expires_at)) = (self.version()?, self.timestamp("expires_at")?)
        else {
            return Ok(None);
        };
        let status = match self.text_req("status")? {
            "PROCESSING" => Status::Processing,
            "SUCCEEDED" => Status::Succeeded,
            "FAILED" => Status::Failed,
            "RETRY" => Status::Retry,
            "UNKNOWN" => Status::Unknown,
            "ABANDONED" => Status::Abandoned,
            "AWAITING_APPROVAL" => Status::AwaitingApproval,
            "APPROVED" => Status::Approved,
            "PURGED" => Status::Purged,
            other => return Err(StoreError::Corrupt(format!("unknown status {other:?}"))),
        };
        let semantics = match self.text_req("semantics")? {
            "AT_LEAST_ONCE" => Semantics::AtLeastOnce,
            "AT_MOST_ONCE" => Semantics::AtMostOnce,
            other => return Err(StoreError::Corrupt(format!("unknown semantics {other:?}"))),
        };
        let fingerprint = self
            .blob("fingerprint")
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| StoreError::Corrupt("fingerprint is not 32 bytes".into()))?;
        let result = match self.get("result_code") {
            None => None,
            Some(code) => Some(OpResult {
                code: i32_of("result_code", code)?,
                body: self.blob("result_body").unwrap_or_default().to_vec(),
                content_type: self.text("result_content_type")?.unwrap_or_default().into(),
                metadata: self.metadata("result_metadata")?,
            }),
        };
        let error = match self.get("error_code") {
            None => None,
            Some(code) => Some(OpError {
                code: i32_of("error_code", code)?,
                message: self.text("error_message")?.unwrap_or_default().into(),
                details: self.blob("error_details").unwrap_or_default().to_vec(),
            }),
        };
        Ok(Some(Record {
            id: id.clone(),
            status,
            fingerprint,
            semantics,
            fencing_token: self.u64_req("fencing_token")?,
            attempt: u32::try_from(self.u64_req("attempt")?)
                .map_err(|_| StoreError::Corrupt("attempt out of range".into()))?,
            dedup_hits: self.u64_req("dedup_hits")?,
            lease_owner: self.text("lease_owner")?.unwrap_or_default().into(),
            lease_expires_at: self.timestamp("lease_expires_at")?,
            result,
            error,
            parent: self.parent()?,
            created_at: self.timestamp_req("created_at")?,
            updated_at: self.timestamp_req("updated_at")?,
            expires_at: (expires_at != NEVER).then_some(expires_at),
            retention: match self.get("retention_ms") {
                Some(CqlValue::BigInt(n)) => *n,
                other => return Err(corrupt("retention_ms", other)),
            },
            version,
            history: match self.get("history") {
                Some(CqlValue::Blob(bytes)) => crate::store::events::decode(bytes)?,
                None => Vec::new(),
                other => return Err(corrupt("history", other)),
            },
            // Rows written before migration 0002 hold nulls here: no gate, no cap.
            require_approval: match self.get("require_approval") {
                None => false,
                Some(CqlValue::Boolean(b)) => *b,
                other => return Err(corrupt("require_approval", other)),
            },
            max_attempts: self.u32_or_zero("max_attempts")?,
            reconciliations: self.u32_or_zero("reconciliations")?,
            approval: self.approval()?,
            kept_until: self.timestamp("kept_until")?,
        }))
    }

    fn u32_or_zero(&self, name: &str) -> Result<u32, StoreError> {
        match self.get(name) {
            None => Ok(0),
            Some(value) => u32::try_from(u64_of(name, value)?)
                .map_err(|_| StoreError::Corrupt(format!("{name} out of range"))),
        }
    }

    fn approval(&self) -> Result<Option<Approval>, StoreError> {
        let Some(decision) = self.text("approval_decision")? else {
            return Ok(None);
        };
        let decision = match decision {
            "APPROVED" => Decision::Approved,
            "REJECTED" => Decision::Rejected,
            other => return Err(StoreError::Corrupt(format!("unknown decision {other:?}"))),
        };
        Ok(Some(Approval {
            decision,
            decided_by: self.text("approval_decided_by")?.unwrap_or_default().into(),
            note: self.text("approval_note")?.unwrap_or_default().into(),
            decided_at: self.timestamp_req("approval_decided_at")?,
        }))
    }

    fn text(&self, name: &str) -> Result<Option<&'a str>, StoreError> {
        match self.get(name) {
            None => Ok(None),
            Some(CqlValue::Text(s) | CqlValue::Ascii(s)) => Ok(Some(s)),
            other => Err(corrupt(name, other)),
        }
    }

    fn text_req(&self, name: &str) -> Result<&'a str, StoreError> {
        self.text(name)?.ok_or_else(|| corrupt(name, None))
    }

    fn blob(&self, name: &str) -> Option<&'a [u8]> {
        match self.get(name) {
            Some(CqlValue::Blob(b)) => Some(b),
            _ => None,
        }
    }

    fn u64_req(&self, name: &str) -> Result<u64, StoreError> {
        u64_of(name, self.get(name).ok_or_else(|| corrupt(name, None))?)
    }

    fn timestamp(&self, name: &str) -> Result<Option<Millis>, StoreError> {
        match self.get(name) {
            None => Ok(None),
            Some(CqlValue::Timestamp(CqlTimestamp(ms))) => Ok(Some(*ms)),
            other => Err(corrupt(name, other)),
        }
    }

    fn timestamp_req(&self, name: &str) -> Result<Millis, StoreError> {
        self.timestamp(name)?.ok_or_else(|| corrupt(name, None))
    }

    fn metadata(&self, name: &str) -> Result<BTreeMap<String, String>, StoreError> {
        match self.get(name) {
            None => Ok(BTreeMap::new()),
            Some(CqlValue::Map(pairs)) => pairs
                .iter()
                .map(|pair| match pair {
                    (CqlValue::Text(k), CqlValue::Text(v)) => Ok((k.clone(), v.clone())),
                    _ => Err(StoreError::Corrupt(format!(
                        "{name} holds a non-text entry"
                    ))),
                })
                .collect(),
            other => Err(corrupt(name, other)),
        }
    }

    fn parent(&self) -> Result<Option<ParentRef>, StoreError> {
        match self.get("parent") {
            None => Ok(None),
            Some(CqlValue::Tuple(parts)) => match parts.as_slice() {
                [Some(CqlValue::Text(namespace)), Some(CqlValue::Text(key))] => {
                    Ok(Some(ParentRef {
                        namespace: namespace.clone(),
                        key: key.clone(),
                    }))
                }
                _ => Err(StoreError::Corrupt("parent is not (text, text)".into())),
            },
            other => Err(corrupt("parent", other)),
        }
    }
}

fn u64_of(name: &str, value: &CqlValue) -> Result<u64, StoreError> {
    match value {
        CqlValue::BigInt(n) => u64::try_from(*n).map_err(|_| corrupt(name, Some(value))),
        other => Err(corrupt(name, Some(other))),
    }
}

fn i32_of(name: &str, value: &CqlValue) -> Result<i32, StoreError> {
    match value {
        CqlValue::Int(n) => Ok(*n),
        other => Err(corrupt(name, Some(other))),
    }
}

/// Names the column and the kind of value found, never the value (it may be a stored body).
fn corrupt(name: &str, found: Option<&CqlValue>) -> StoreError {
    let kind = match found {
        None => "null".to_owned(),
        Some(v) => format!("{:?}", std::mem::discriminant(v)),
    };
    StoreError::Corrupt(format!("column {name}: unexpected {kind}"))
}

#[cfg(test)]
mod tests;
