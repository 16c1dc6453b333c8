//! Rust types for the ledger's messages: records, stored results and errors, leases, Claim
//! answers, and their conversions from and to the generated `oncekey.v1` messages.
//!
//! Plain data only: no I/O here.

use crate::error::Error;
use oncekey_api::v1;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where an operation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordStatus {
    /// Acquired by a holder whose side effect is under way.
    Processing,
    /// Completed; the result is replayed to later Claims.
    Succeeded,
    /// Failed for good; the error is replayed to later Claims.
    Failed,
    /// Released after a retryable failure; the next Claim acquires it.
    Retry,
    /// An at-most-once operation whose lease ran out: its outcome is unknown.
    Unknown,
    /// Waits for an approval: nobody acquires it before someone Approves (or Rejects) it.
    AwaitingApproval,
    /// Approved: the next Claim acquires it.
    Approved,
}

/// What a Claim would answer (a dry run's outcome).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// It would acquire the operation.
    Acquired,
    /// It would replay the stored result.
    Completed,
    /// It would replay the stored final error.
    Failed,
    /// Another holder is performing it.
    InProgress,
    /// The outcome is unknown and needs reconciliation.
    NeedsReconciliation,
    /// It waits for an approval.
    AwaitingApproval,
    /// The intent guard would refuse it (the same arguments under another key).
    DuplicateIntent,
}

/// What an approver decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// The operation may be acquired.
    Approved,
    /// The operation failed for good (error code 403, message = the note).
    Rejected,
}

/// The decision on an operation that awaited approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Approved or rejected.
    pub decision: Decision,
    /// Who decided: the approver's token label ("dev" on a dev-mode server).
    pub decided_by: String,
    /// The approver's note.
    pub note: String,
    /// When the decision was made.
    pub decided_at: Option<SystemTime>,
}

/// What a lost lease means for an operation; fixed by its first Claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Semantics {
    /// Another caller may take over once the lease runs out (the effect may run again).
    #[default]
    AtLeastOnce,
    /// Never run twice: a lease that ran out makes the outcome unknown until reconciled.
    AtMostOnce,
}

/// How a failed attempt settles the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Disposition {
    /// Released: the next Claim acquires it again (the error is kept but not replayed).
    Retryable,
    /// Failed for good: the error is replayed to later Claims.
    Final,
    /// Forgotten: nothing happened outside, the key may be claimed again, even with other arguments.
    Abandon,
}

impl Disposition {
    pub(crate) fn wire(self) -> v1::Disposition {
        match self {
            Disposition::Retryable => v1::Disposition::Retryable,
            Disposition::Final => v1::Disposition::Final,
            Disposition::Abandon => v1::Disposition::Abandon,
        }
    }
}

/// The successful outcome of an operation, stored by Complete and replayed byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StoredResult {
    /// The caller's own status code (e.g. an HTTP status).
    pub code: i32,
    /// The response body.
    pub body: Vec<u8>,
    /// The media type of `body`, e.g. `application/json`.
    pub content_type: String,
    /// Extra string pairs.
    pub metadata: HashMap<String, String>,
}

impl StoredResult {
    /// A result whose body is the JSON of `value` (content type `application/json`, code 0).
    pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        Ok(StoredResult {
            code: 0,
            body: serde_json::to_vec(value)?,
            content_type: JSON.into(),
            metadata: HashMap::new(),
        })
    }

    /// Decodes a JSON body.
    pub fn decode_json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }
}

/// The JSON media type.
pub(crate) const JSON: &str = "application/json";

/// The error of a failed attempt, as stored in the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Default, thiserror::Error)]
#[error("operation failed (code {code}): {message}")]
pub struct StoredError {
    /// The caller's own error code.
    pub code: i32,
    /// A human-readable message.
    pub message: String,
    /// Opaque details.
    pub details: Vec<u8>,
}

/// A lease on an acquired operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The fencing token: pass it to Complete, Fail, Renew and to downstream systems that fence.
    pub token: u64,
    /// When the lease runs out unless renewed.
    pub expires_at: SystemTime,
    /// Which acquisition this is (1 for the first).
    pub attempt: u32,
}

/// One operation's entry in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The operation's namespace.
    pub namespace: String,
    /// The operation's key.
    pub key: String,
    /// Where the operation stands.
    pub status: RecordStatus,
    /// The fingerprint of the arguments of the first Claim.
    pub fingerprint: Vec<u8>,
    /// The semantics fixed by the first Claim.
    pub semantics: Semantics,
    /// The current fencing token.
    pub fencing_token: u64,
    /// How many times the operation was acquired.
    pub attempt: u32,
    /// How many Claims were answered from the record instead of acquiring it.
    pub dedup_hits: u64,
    /// Who holds (or last held) the lease, as given in Claim.owner.
    pub lease_owner: String,
    /// When the current lease runs out; `None` once settled.
    pub lease_expires_at: Option<SystemTime>,
    /// The stored outcome, when `status` is `Succeeded`.
    pub result: Option<StoredResult>,
    /// The stored error, when `status` is `Failed` (and the last one when `Retry`).
    pub error: Option<StoredError>,
    /// The parent operation as (namespace, key), if the first Claim named one.
    pub parent: Option<(String, String)>,
    /// When the first Claim created the record.
    pub created_at: Option<SystemTime>,
    /// When the record last changed.
    pub updated_at: Option<SystemTime>,
    /// When the record disappears from the ledger; `None` while an at-most-once operation is
    /// unsettled (it is kept until it settles).
    pub expires_at: Option<SystemTime>,
    /// Whether the operation waits for an approval before anyone acquires it.
    pub require_approval: bool,
    /// The most acquisitions allowed, reconciliations not counted (0: no cap).
    pub max_attempts: u32,
    /// The approval decision, once made.
    pub approval: Option<Approval>,
    /// The run budget of the operation's children and its use, when its first Claim set one.
    pub budget: Option<crate::BudgetUsage>,
}

/// The answer to a Claim: what the caller should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claimed {
    /// The caller holds the lease: perform the effect, then Complete or Fail with `lease.token`.
    Acquired {
        /// The caller's lease.
        lease: LeaseGrant,
        /// The record after the Claim.
        record: Record,
        /// Other live keys of the namespace claimed with the same arguments within the intent
        /// window, when the intent guard warned or let a deliberate repeat through (else empty).
        intent_matches: Vec<crate::IntentMatch>,
    },
    /// The operation already succeeded: use `result`, do not perform the effect.
    Completed {
        /// The stored result.
        result: StoredResult,
        /// The record.
        record: Record,
    },
    /// The operation failed for good: `error` is its stored error.
    Failed {
        /// The stored error.
        error: StoredError,
        /// The record.
        record: Record,
    },
    /// Another holder is performing it now.
    InProgress {
        /// How long to wait before claiming again.
        retry_after: Duration,
        /// The record.
        record: Record,
    },
    /// An at-most-once operation's outcome is unknown: check the outside world by the key, then
    /// Claim with `reconcile` and Complete or Fail.
    NeedsReconciliation {
        /// The record (status `Unknown`).
        record: Record,
    },
    /// The operation waits for an approval: do not perform it; Claim again once someone
    /// Approved it (a Claim with `wait` is held until then).
    AwaitingApproval {
        /// The record (status `AwaitingApproval`).
        record: Record,
    },
    /// The intent guard refused the Claim: the same arguments were claimed under the keys in
    /// `matches` within the window. Do not perform the effect: use the other key, or Claim again
    /// with [`crate::Claim::repeat_intent`] if the repeat is deliberate. Nothing was written.
    DuplicateIntent {
        /// The other keys, most recent first.
        matches: Vec<crate::IntentMatch>,
    },
    /// The answer to a dry run ([`crate::Claim::dry_run`]): what the Claim would get now; nothing
    /// was written and no lease was granted.
    DryRun {
        /// What the Claim would answer.
        outcome: Outcome,
        /// The record as stored; `None` when the key has none.
        record: Option<Record>,
    },
}

impl Claimed {
    /// The record after the Claim (for a dry run: as stored, `None` when absent).
    pub fn record(&self) -> Option<&Record> {
        match self {
            Claimed::Acquired { record, .. }
            | Claimed::Completed { record, .. }
            | Claimed::Failed { record, .. }
            | Claimed::InProgress { record, .. }
            | Claimed::NeedsReconciliation { record }
            | Claimed::AwaitingApproval { record } => Some(record),
            Claimed::DryRun { record, .. } => record.as_ref(),
            Claimed::DuplicateIntent { .. } => None,
        }
    }

    pub(crate) fn from_wire(r: v1::ClaimResponse, dry_run: bool) -> Result<Self, Error> {
        if dry_run {
            let outcome = match v1::ClaimOutcome::try_from(r.outcome).unwrap_or_default() {
                v1::ClaimOutcome::Acquired => Outcome::Acquired,
                v1::ClaimOutcome::Completed => Outcome::Completed,
                v1::ClaimOutcome::Failed => Outcome::Failed,
                v1::ClaimOutcome::InProgress => Outcome::InProgress,
                v1::ClaimOutcome::NeedsReconciliation => Outcome::NeedsReconciliation,
                v1::ClaimOutcome::AwaitingApproval => Outcome::AwaitingApproval,
                v1::ClaimOutcome::DuplicateIntent => Outcome::DuplicateIntent,
                v1::ClaimOutcome::Unspecified => {
                    return Err(Error::Protocol("claim with an unknown outcome"))
                }
            };
            let record = r.record.map(Record::from_wire).transpose()?;
            return Ok(Claimed::DryRun { outcome, record });
        }
        let matches = || {
            r.intent_matches
                .iter()
                .cloned()
                .map(crate::IntentMatch::from_wire)
                .collect::<Vec<_>>()
        };
        if r.outcome == v1::ClaimOutcome::DuplicateIntent as i32 {
            return Ok(Claimed::DuplicateIntent { matches: matches() });
        }
        let intent_matches = matches();
        let record = Record::from_wire(r.record.ok_or(Error::Protocol("claim without record"))?)?;
        Ok(
            match v1::ClaimOutcome::try_from(r.outcome).unwrap_or_default() {
                v1::ClaimOutcome::Acquired => Claimed::Acquired {
                    lease: LeaseGrant::from_wire(
                        r.lease.ok_or(Error::Protocol("ACQUIRED without lease"))?,
                    ),
                    record,
                    intent_matches,
                },
                v1::ClaimOutcome::Completed => Claimed::Completed {
                    result: record
                        .result
                        .clone()
                        .ok_or(Error::Protocol("COMPLETED without result"))?,
                    record,
                },
                v1::ClaimOutcome::Failed => Claimed::Failed {
                    error: record.error.clone().unwrap_or_default(),
                    record,
                },
                v1::ClaimOutcome::InProgress => Claimed::InProgress {
                    retry_after: r
                        .retry_after
                        .map(duration_from_wire)
                        .unwrap_or(Duration::from_secs(1)),
                    record,
                },
                v1::ClaimOutcome::NeedsReconciliation => Claimed::NeedsReconciliation { record },
                v1::ClaimOutcome::AwaitingApproval => Claimed::AwaitingApproval { record },
                v1::ClaimOutcome::DuplicateIntent | v1::ClaimOutcome::Unspecified => {
                    return Err(Error::Protocol("claim with an unknown outcome"))
                }
            },
        )
    }
}

impl LeaseGrant {
    pub(crate) fn from_wire(l: v1::Lease) -> Self {
        LeaseGrant {
            token: l.token,
            expires_at: l.expires_at.map(time_from_wire).unwrap_or(UNIX_EPOCH),
            attempt: l.attempt,
        }
    }
}

impl RecordStatus {
    /// The status of a wire value; `None` for one this client does not know.
    pub(crate) fn from_wire(status: i32) -> Option<Self> {
        Some(
            match v1::RecordStatus::try_from(status).unwrap_or_default() {
                v1::RecordStatus::Processing => RecordStatus::Processing,
                v1::RecordStatus::Succeeded => RecordStatus::Succeeded,
                v1::RecordStatus::Failed => RecordStatus::Failed,
                v1::RecordStatus::Retry => RecordStatus::Retry,
                v1::RecordStatus::Unknown => RecordStatus::Unknown,
                v1::RecordStatus::AwaitingApproval => RecordStatus::AwaitingApproval,
                v1::RecordStatus::Approved => RecordStatus::Approved,
                v1::RecordStatus::Unspecified => return None,
            },
        )
    }
}

impl Record {
    pub(crate) fn from_wire(r: v1::Record) -> Result<Self, Error> {
        let status = RecordStatus::from_wire(r.status)
            .ok_or(Error::Protocol("record with an unknown status"))?;
        let semantics = match v1::Semantics::try_from(r.semantics).unwrap_or_default() {
            v1::Semantics::AtMostOnce => Semantics::AtMostOnce,
            _ => Semantics::AtLeastOnce,
        };
        Ok(Record {
            namespace: r.namespace,
            key: r.key,
            status,
            fingerprint: r.fingerprint,
            semantics,
            fencing_token: r.fencing_token,
            attempt: r.attempt,
            dedup_hits: r.dedup_hits,
            lease_owner: r.lease_owner,
            lease_expires_at: r.lease_expires_at.map(time_from_wire),
            result: r.result.map(|res| StoredResult {
                code: res.code,
                body: res.body,
                content_type: res.content_type,
                metadata: res.metadata.into_iter().collect(),
            }),
            error: r.error.map(|e| StoredError {
                code: e.code,
                message: e.message,
                details: e.details,
            }),
            parent: r.parent.map(|p| (p.namespace, p.key)),
            created_at: r.created_at.map(time_from_wire),
            updated_at: r.updated_at.map(time_from_wire),
            expires_at: r.expires_at.map(time_from_wire),
            require_approval: r.require_approval,
            max_attempts: r.max_attempts,
            approval: r.approval.map(approval_from_wire).transpose()?,
            budget: r.budget.map(crate::BudgetUsage::from_wire),
        })
    }
}

fn approval_from_wire(a: v1::Approval) -> Result<Approval, Error> {
    let decision = match v1::ApprovalDecision::try_from(a.decision).unwrap_or_default() {
        v1::ApprovalDecision::Approved => Decision::Approved,
        v1::ApprovalDecision::Rejected => Decision::Rejected,
        v1::ApprovalDecision::Unspecified => {
            return Err(Error::Protocol("approval with an unknown decision"))
        }
    };
    Ok(Approval {
        decision,
        decided_by: a.decided_by,
        note: a.note,
        decided_at: a.decided_at.map(time_from_wire),
    })
}

impl From<StoredResult> for v1::OperationResult {
    fn from(r: StoredResult) -> Self {
        v1::OperationResult {
            code: r.code,
            body: r.body,
            content_type: r.content_type,
            metadata: r.metadata.into_iter().collect(),
        }
    }
}

impl From<StoredError> for v1::OperationError {
    fn from(e: StoredError) -> Self {
        v1::OperationError {
            code: e.code,
            message: e.message,
            details: e.details,
        }
    }
}

pub(crate) fn duration_to_wire(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

pub(crate) fn duration_from_wire(d: prost_types::Duration) -> Duration {
    Duration::try_from(d).unwrap_or_default()
}

pub(crate) fn time_from_wire(t: prost_types::Timestamp) -> SystemTime {
    SystemTime::try_from(t).unwrap_or(UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_trip() {
        let d = Duration::from_millis(1500);
        assert_eq!(duration_from_wire(duration_to_wire(d)), d);
    }

    #[test]
    fn a_claim_answer_becomes_typed() {
        let wire = v1::ClaimResponse {
            outcome: v1::ClaimOutcome::InProgress as i32,
            record: Some(v1::Record {
                namespace: "n".into(),
                key: "k".into(),
                status: v1::RecordStatus::Processing as i32,
                ..Default::default()
            }),
            lease: None,
            retry_after: Some(duration_to_wire(Duration::from_millis(300))),
            intent_matches: Vec::new(),
        };
        match Claimed::from_wire(wire, false).unwrap() {
            Claimed::InProgress {
                retry_after,
                record,
            } => {
                assert_eq!(retry_after, Duration::from_millis(300));
                assert_eq!(record.status, RecordStatus::Processing);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_dry_run_answer_may_come_without_a_record() {
        let wire = v1::ClaimResponse {
            outcome: v1::ClaimOutcome::AwaitingApproval as i32,
            ..Default::default()
        };
        let dry = Claimed::from_wire(wire.clone(), true).unwrap();
        assert_eq!(
            dry,
            Claimed::DryRun {
                outcome: Outcome::AwaitingApproval,
                record: None
            }
        );
        assert_eq!(dry.record(), None);
        // A real Claim without a record is a broken answer.
        assert!(matches!(
            Claimed::from_wire(wire, false),
            Err(Error::Protocol(_))
        ));
    }
}
