//! The embedded store's on-disk encoding: record identity as an ordered byte key, record fields as a
//! protobuf message (forward compatible: new fields get new tags, old readers skip them).
//!
//! A large outcome (result and error, up to a MiB by default) is encoded apart from the rest of the
//! record, so the tables can keep it in a row of its own: the writes that change only a record's
//! counters, lease or history — a hot key's dedup hits, a renewal — then rewrite a small row, not
//! the result it replays.

use oncekey_ledger::{Approval, Decision, Millis, OpError, OpResult, ParentRef, Record};
use oncekey_ledger::{RecordId, Semantics, Status};
use oncekey_store::StoreError;
use prost::Message;

mod bucket;
mod id;
mod summary;

pub(crate) use bucket::bucket_code;
use bucket::bucket_of_codes;
pub(crate) use id::{decode_id, encode_id, id_prefix, tenant_part};

/// The parent a stored record names, read without decoding the rest of it.
pub(crate) fn parent(bytes: &[u8]) -> Result<Option<ParentRef>, StoreError> {
    #[derive(Clone, PartialEq, Message)]
    struct ParentOnly {
        #[prost(string, optional, tag = "11")]
        parent_namespace: Option<String>,
        #[prost(string, optional, tag = "12")]
        parent_key: Option<String>,
    }
    let p = ParentOnly::decode(bytes).map_err(corrupt)?;
    Ok(match (p.parent_namespace, p.parent_key) {
        (Some(namespace), Some(key)) => Some(ParentRef { namespace, key }),
        _ => None,
    })
}

#[derive(Clone, PartialEq, Message)]
struct StoredRecord {
    #[prost(int32, tag = "1")]
    status: i32,
    #[prost(bytes = "vec", tag = "2")]
    fingerprint: Vec<u8>,
    #[prost(int32, tag = "3")]
    semantics: i32,
    #[prost(uint64, tag = "4")]
    fencing_token: u64,
    #[prost(uint32, tag = "5")]
    attempt: u32,
    #[prost(uint64, tag = "6")]
    dedup_hits: u64,
    #[prost(string, tag = "7")]
    lease_owner: String,
    #[prost(int64, optional, tag = "8")]
    lease_expires_at: Option<i64>,
    #[prost(message, optional, tag = "9")]
    result: Option<StoredResult>,
    #[prost(message, optional, tag = "10")]
    error: Option<StoredError>,
    #[prost(string, optional, tag = "11")]
    parent_namespace: Option<String>,
    #[prost(string, optional, tag = "12")]
    parent_key: Option<String>,
    #[prost(int64, tag = "13")]
    created_at: i64,
    #[prost(int64, tag = "14")]
    updated_at: i64,
    /// `NEVER` for a record kept until it settles.
    #[prost(int64, tag = "15")]
    expires_at: i64,
    #[prost(int64, tag = "16")]
    retention: i64,
    #[prost(uint64, tag = "17")]
    version: u64,
    #[prost(bytes = "vec", tag = "18")]
    history: Vec<u8>,
    /// Set when `result` and `error` are stored apart, as a `StoredOutcome`.
    #[prost(bool, tag = "19")]
    outcome_apart: bool,
    #[prost(bool, tag = "20")]
    require_approval: bool,
    #[prost(uint32, tag = "21")]
    max_attempts: u32,
    #[prost(uint32, tag = "22")]
    reconciliations: u32,
    #[prost(message, optional, tag = "23")]
    approval: Option<StoredApproval>,
    #[prost(int64, optional, tag = "24")]
    kept_until: Option<i64>,
    /// `oncekey_store::budget`'s blob; empty without a budget.
    #[prost(bytes = "vec", tag = "25")]
    budget: Vec<u8>,
}

/// A record's approval decision.
#[derive(Clone, PartialEq, Message)]
struct StoredApproval {
    /// 1 approved, 2 rejected.
    #[prost(int32, tag = "1")]
    decision: i32,
    #[prost(string, tag = "2")]
    decided_by: String,
    #[prost(string, tag = "3")]
    note: String,
    #[prost(int64, tag = "4")]
    decided_at: i64,
}

fn stored_approval(approval: &Approval) -> StoredApproval {
    StoredApproval {
        decision: match approval.decision {
            Decision::Approved => 1,
            Decision::Rejected => 2,
        },
        decided_by: approval.decided_by.clone(),
        note: approval.note.clone(),
        decided_at: approval.decided_at,
    }
}

fn approval_from(stored: StoredApproval) -> Result<Approval, StoreError> {
    Ok(Approval {
        decision: match stored.decision {
            1 => Decision::Approved,
            2 => Decision::Rejected,
            other => return Err(StoreError::Corrupt(format!("unknown decision {other}"))),
        },
        decided_by: stored.decided_by,
        note: stored.note,
        decided_at: stored.decided_at,
    })
}

/// A record's outcome, stored apart from it when large.
#[derive(Clone, PartialEq, Message)]
struct StoredOutcome {
    #[prost(message, optional, tag = "1")]
    result: Option<StoredResult>,
    #[prost(message, optional, tag = "2")]
    error: Option<StoredError>,
}

/// The stored `expires_at` of a record that never expires before it settles (`Record::expires_at`
/// unset). A sentinel rather than an absent field: an absent int64 reads as 0, "long expired".
const NEVER: i64 = i64::MAX;

fn stored_expiry(expires_at: Option<Millis>) -> i64 {
    expires_at.unwrap_or(NEVER)
}

fn expiry_from(stored: i64) -> Option<Millis> {
    (stored != NEVER).then_some(stored)
}

/// Encoded outcomes at least this large are stored apart from their record.
pub(crate) const OUTCOME_APART_BYTES: usize = 4096;

/// A record as the tables store it: its row and, when large, its outcome apart.
pub(crate) struct Encoded {
    pub row: Vec<u8>,
    pub outcome: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct StoredResult {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(bytes = "vec", tag = "2")]
    body: Vec<u8>,
    #[prost(string, tag = "3")]
    content_type: String,
    #[prost(btree_map = "string, string", tag = "4")]
    metadata: std::collections::BTreeMap<String, String>,
}

#[derive(Clone, PartialEq, Message)]
struct StoredError {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(bytes = "vec", tag = "3")]
    details: Vec<u8>,
}

fn status_code(status: Status) -> i32 {
    match status {
        Status::Processing => 1,
        Status::Succeeded => 2,
        Status::Failed => 3,
        Status::Retry => 4,
        Status::Unknown => 5,
        Status::Abandoned => 6,
        Status::AwaitingApproval => 7,
        Status::Approved => 8,
        Status::Purged => 9,
    }
}

fn status_from(code: i32) -> Result<Status, StoreError> {
    Ok(match code {
        1 => Status::Processing,
        2 => Status::Succeeded,
        3 => Status::Failed,
        4 => Status::Retry,
        5 => Status::Unknown,
        6 => Status::Abandoned,
        7 => Status::AwaitingApproval,
        8 => Status::Approved,
        9 => Status::Purged,
        other => return Err(StoreError::Corrupt(format!("unknown status {other}"))),
    })
}

/// Encodes a record's fields (its id is the table key), with a large outcome apart.
pub(crate) fn encode_record(record: &Record) -> Encoded {
    let mut outcome = StoredOutcome {
        result: record.result.as_ref().map(|r| StoredResult {
            code: r.code,
            body: r.body.clone(),
            content_type: r.content_type.clone(),
            metadata: r.metadata.clone(),
        }),
        error: record.error.as_ref().map(|e| StoredError {
            code: e.code,
            message: e.message.clone(),
            details: e.details.clone(),
        }),
    };
    let apart = outcome.encoded_len() >= OUTCOME_APART_BYTES;
    let outcome_bytes = apart.then(|| {
        let bytes = outcome.encode_to_vec();
        outcome = StoredOutcome::default();
        bytes
    });
    let row = StoredRecord {
        status: status_code(record.status),
        fingerprint: record.fingerprint.to_vec(),
        semantics: match record.semantics {
            Semantics::AtLeastOnce => 1,
            Semantics::AtMostOnce => 2,
        },
        fencing_token: record.fencing_token,
        attempt: record.attempt,
        dedup_hits: record.dedup_hits,
        lease_owner: record.lease_owner.clone(),
        lease_expires_at: record.lease_expires_at,
        result: outcome.result,
        error: outcome.error,
        parent_namespace: record.parent.as_ref().map(|p| p.namespace.clone()),
        parent_key: record.parent.as_ref().map(|p| p.key.clone()),
        created_at: record.created_at,
        updated_at: record.updated_at,
        expires_at: stored_expiry(record.expires_at),
        retention: record.retention,
        version: record.version,
        history: oncekey_store::events::encode(&record.history),
        outcome_apart: apart,
        require_approval: record.require_approval,
        max_attempts: record.max_attempts,
        reconciliations: record.reconciliations,
        approval: record.approval.as_ref().map(stored_approval),
        kept_until: record.kept_until,
        budget: oncekey_store::budget::encode(record.budget.as_ref()),
    }
    .encode_to_vec();
    Encoded {
        row,
        outcome: outcome_bytes,
    }
}

/// When a record encoded by `encode_record` expires (`None`: not before it settles), without
/// decoding the rest of it.
pub(crate) fn expires_at(bytes: &[u8]) -> Result<Option<Millis>, StoreError> {
    head(bytes).map(|h| h.expires_at)
}

/// The fields of a stored record a conditional write checks, read without decoding the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub version: u64,
    /// `None`: kept until it settles.
    pub expires_at: Option<Millis>,
    /// Whether the record's outcome is stored apart.
    pub outcome_apart: bool,
    /// Where the listing index holds it (`bucket_code`); `None` for a tombstone.
    pub bucket: Option<u8>,
    /// Whether it names a parent (then the children index holds it).
    pub has_parent: bool,
}

/// The `Head` of a record encoded by `encode_record`.
pub(crate) fn head(bytes: &[u8]) -> Result<Head, StoreError> {
    /// The fields of `StoredRecord` this needs; prost skips the others.
    #[derive(Clone, PartialEq, Message)]
    struct HeadOnly {
        #[prost(int32, tag = "1")]
        status: i32,
        #[prost(int32, tag = "3")]
        semantics: i32,
        #[prost(bytes = "vec", optional, tag = "11")]
        parent_namespace: Option<Vec<u8>>,
        #[prost(int64, tag = "15")]
        expires_at: i64,
        #[prost(uint64, tag = "17")]
        version: u64,
        #[prost(bool, tag = "19")]
        outcome_apart: bool,
    }
    HeadOnly::decode(bytes)
        .map(|h| Head {
            version: h.version,
            expires_at: expiry_from(h.expires_at),
            outcome_apart: h.outcome_apart,
            bucket: bucket_of_codes(h.status, h.semantics),
            has_parent: h.parent_namespace.is_some(),
        })
        .map_err(corrupt)
}

impl Head {
    /// Whether the record is live at `now` (the same rule as `Record::is_expired`).
    pub(crate) fn is_live(&self, now: Millis) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }
}

/// A decoder of a stored record: `decode_record` or `decode_brief`.
pub(crate) type Decode = fn(RecordId, &[u8], Option<&[u8]>) -> Result<Record, StoreError>;

/// Decodes what `encode_record` wrote for `id`: its row and, if the row says it is stored apart,
/// its outcome.
pub(crate) fn decode_record(
    id: RecordId,
    row: &[u8],
    outcome: Option<&[u8]>,
) -> Result<Record, StoreError> {
    decode(id, row, outcome, Parts::Whole)
}

/// `decode_record`, leaving the receipt history out (empty).
pub(crate) fn decode_brief(
    id: RecordId,
    row: &[u8],
    outcome: Option<&[u8]>,
) -> Result<Record, StoreError> {
    decode(id, row, outcome, Parts::Brief)
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

/// A `StoredRecord` decoded without its history: the field is skipped, not copied (a replayed
/// Claim reads its record this way, and a history holds up to 64 receipts).
#[derive(Debug, Default)]
struct WithoutHistory(StoredRecord);

/// `StoredRecord`'s history field.
const HISTORY_TAG: u32 = 18;

impl Message for WithoutHistory {
    fn encode_raw(&self, buf: &mut impl prost::bytes::BufMut) {
        self.0.encode_raw(buf)
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: prost::encoding::WireType,
        buf: &mut impl prost::bytes::Buf,
        ctx: prost::encoding::DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            HISTORY_TAG => prost::encoding::skip_field(wire_type, tag, buf, ctx),
            _ => self.0.merge_field(tag, wire_type, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        self.0.encoded_len()
    }

    fn clear(&mut self) {
        self.0.clear()
    }
}

/// `decode_brief`, leaving out the result body and the error details too (empty): what a listing
/// shows. An outcome stored apart is decoded without copying them.
pub(crate) fn decode_listed(
    id: RecordId,
    row: &[u8],
    outcome: Option<&[u8]>,
) -> Result<Record, StoreError> {
    let mut record = decode(id, row, outcome, Parts::Listed)?;
    if let Some(result) = record.result.as_mut() {
        result.body = Vec::new();
    }
    if let Some(error) = record.error.as_mut() {
        error.details = Vec::new();
    }
    Ok(record)
}

/// What a decode reads of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parts {
    /// Everything.
    Whole,
    /// Everything but the history.
    Brief,
    /// Everything but the history, the result body and the error details.
    Listed,
}

fn decode(
    id: RecordId,
    row: &[u8],
    outcome: Option<&[u8]>,
    parts: Parts,
) -> Result<Record, StoreError> {
    let mut s = match parts {
        Parts::Whole => StoredRecord::decode(row),
        Parts::Brief | Parts::Listed => WithoutHistory::decode(row).map(|brief| brief.0),
    }
    .map_err(corrupt)?;
    if s.outcome_apart {
        let bytes = outcome.ok_or_else(|| corrupt("the record's outcome is missing"))?;
        let apart = match parts {
            Parts::Whole | Parts::Brief => StoredOutcome::decode(bytes),
            Parts::Listed => summary::decode(bytes),
        }
        .map_err(corrupt)?;
        (s.result, s.error) = (apart.result, apart.error);
    }
    let fingerprint: [u8; 32] = s
        .fingerprint
        .as_slice()
        .try_into()
        .map_err(|_| StoreError::Corrupt("fingerprint is not 32 bytes".into()))?;
    Ok(Record {
        id,
        status: status_from(s.status)?,
        fingerprint,
        semantics: if s.semantics == 2 {
            Semantics::AtMostOnce
        } else {
            Semantics::AtLeastOnce
        },
        fencing_token: s.fencing_token,
        attempt: s.attempt,
        dedup_hits: s.dedup_hits,
        lease_owner: s.lease_owner,
        lease_expires_at: s.lease_expires_at,
        result: s.result.map(|r| OpResult {
            code: r.code,
            body: r.body,
            content_type: r.content_type,
            metadata: r.metadata,
        }),
        error: s.error.map(|e| OpError {
            code: e.code,
            message: e.message,
            details: e.details,
        }),
        parent: match (s.parent_namespace, s.parent_key) {
            (Some(namespace), Some(key)) => Some(ParentRef { namespace, key }),
            _ => None,
        },
        created_at: s.created_at,
        updated_at: s.updated_at,
        expires_at: expiry_from(s.expires_at),
        retention: s.retention,
        version: s.version,
        history: oncekey_store::events::decode(&s.history)?,
        require_approval: s.require_approval,
        max_attempts: s.max_attempts,
        reconciliations: s.reconciliations,
        approval: s.approval.map(approval_from).transpose()?,
        kept_until: s.kept_until,
        budget: oncekey_store::budget::decode(&s.budget)?,
    })
}

#[cfg(test)]
mod tests;
