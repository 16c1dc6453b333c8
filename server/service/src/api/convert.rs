//! Wire ↔ ledger: validates every request field against docs/api.md (identity and scope,
//! fingerprint, limits; errors name the field) and turns records into their wire form. Nothing
//! here touches a store.

use super::error::ApiError;
use super::limits::*;
use crate::ledger::{
    ClaimArgs, ClaimOutcome, Decision, Disposition, EventKind, Lease, Millis, OpError, OpResult,
};
use crate::ledger::{ParentRef, Record, Semantics, Status};
use oncekey_api::fingerprint;
use oncekey_api::v1;
use prost_types::{Duration, Timestamp};

/// `^[a-z0-9][a-z0-9._-]{0,127}$`
fn valid_namespace(ns: &str) -> bool {
    let bytes = ns.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_NAMESPACE_BYTES
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes.iter().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        })
}

/// Validates a namespace named `field`.
pub fn namespace(field: &str, ns: &str) -> Result<(), ApiError> {
    if valid_namespace(ns) {
        Ok(())
    } else {
        Err(ApiError::invalid(
            field,
            "must match ^[a-z0-9][a-z0-9._-]{0,127}$",
        ))
    }
}

/// Validates a key named `field`: 1..=256 bytes of UTF-8 without control characters.
pub fn key(field: &str, key: &str) -> Result<(), ApiError> {
    if key.is_empty() {
        return Err(ApiError::invalid(field, "must not be empty"));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(ApiError::too_large(
            field,
            format!("at most {MAX_KEY_BYTES} bytes"),
        ));
    }
    if key.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

fn millis_of(field: &str, d: &Duration) -> Result<Millis, ApiError> {
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 {
        return Err(ApiError::invalid(field, "must be a non-negative duration"));
    }
    Ok(d.seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(d.nanos / 1_000_000)))
}

/// A duration field within `min..=max`, or `default` when unset. The bounds are exact: a duration
/// a nanosecond over the maximum is refused, although it counts as the maximum in milliseconds.
pub(super) fn bounded(
    field: &str,
    d: Option<&Duration>,
    default: Millis,
    min: Millis,
    max: Millis,
) -> Result<Millis, ApiError> {
    let Some(d) = d else { return Ok(default) };
    let ms = millis_of(field, d)?;
    let sub_millisecond = d.nanos % 1_000_000 != 0;
    if ms >= min && (ms < max || (ms == max && !sub_millisecond)) {
        Ok(ms)
    } else {
        Err(ApiError::invalid(
            field,
            format!("must be between {} and {}", human(min), human(max)),
        ))
    }
}

fn human(ms: Millis) -> String {
    match ms {
        ms if ms % 86_400_000 == 0 => format!("{}d", ms / 86_400_000),
        ms if ms % 3_600_000 == 0 => format!("{}h", ms / 3_600_000),
        ms if ms % 60_000 == 0 => format!("{}m", ms / 60_000),
        ms if ms % 1000 == 0 => format!("{}s", ms / 1000),
        ms => format!("{ms}ms"),
    }
}

/// `lease_ttl`: 1 s ..= 1 h, default from the server's flags.
pub fn lease_ttl(d: Option<&Duration>, limits: &Limits) -> Result<Millis, ApiError> {
    bounded("lease_ttl", d, limits.default_lease, MIN_LEASE, MAX_LEASE)
}

/// `lease_token`: a token from a lease (never 0).
pub fn lease_token(token: u64) -> Result<u64, ApiError> {
    if token == 0 {
        return Err(ApiError::invalid(
            "lease_token",
            "must be the token of a lease (tokens start at 1)",
        ));
    }
    Ok(token)
}

/// A Claim: its arguments and its `wait`.
pub fn claim_args(
    req: &v1::ClaimRequest,
    limits: &Limits,
) -> Result<(ClaimArgs, Option<Millis>), ApiError> {
    let fingerprint = match &req.arguments {
        Some(v1::claim_request::Arguments::Fingerprint(fp)) => fp
            .as_slice()
            .try_into()
            .map_err(|_| ApiError::invalid("fingerprint", "must be 32 bytes (SHA-256)"))?,
        Some(v1::claim_request::Arguments::PayloadJson(json)) => {
            if json.len() > limits.max_payload_json_bytes {
                return Err(ApiError::too_large(
                    "payload_json",
                    format!("at most {} bytes", limits.max_payload_json_bytes),
                ));
            }
            fingerprint::fingerprint_json(json).map_err(|e| match e {
                fingerprint::FingerprintError::InexactNumber { path, why } => ApiError::invalid(
                    format!("payload_json.{path}"),
                    format!("{why}; send it as a string"),
                ),
                other => ApiError::invalid("payload_json", other.to_string()),
            })?
        }
        None => {
            return Err(ApiError::invalid(
                "fingerprint",
                "exactly one of fingerprint or payload_json is required",
            ))
        }
    };
    let lease_ttl = lease_ttl(req.lease_ttl.as_ref(), limits)?;
    // Within --max-retention, then lowered to the namespace's ceiling (never refused for it).
    let retention = bounded(
        "retention",
        req.retention.as_ref(),
        limits.default_retention.min(limits.max_retention),
        MIN_RETENTION,
        limits.max_retention,
    )?;
    let retention = limits.retention(&req.namespace, retention);
    let semantics = match v1::Semantics::try_from(req.semantics) {
        Ok(v1::Semantics::Unspecified | v1::Semantics::AtLeastOnce) => Semantics::AtLeastOnce,
        Ok(v1::Semantics::AtMostOnce) => Semantics::AtMostOnce,
        Err(_) => return Err(ApiError::invalid("semantics", "unknown value")),
    };
    if req.owner.len() > limits.max_owner_bytes {
        return Err(ApiError::too_large(
            "owner",
            format!("at most {} bytes", limits.max_owner_bytes),
        ));
    }
    // Shown to operators as `lease_owner` and in receipts: no escape sequence may forge a line.
    if req.owner.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "owner",
            "must not contain control characters",
        ));
    }
    let parent = match &req.parent {
        Some(p) => {
            namespace("parent.namespace", &p.namespace)?;
            key("parent.key", &p.key)?;
            Some(ParentRef {
                namespace: p.namespace.clone(),
                key: p.key.clone(),
            })
        }
        None => None,
    };
    let wait = match &req.wait {
        Some(d) => Some(bounded("wait", Some(d), 0, 0, MAX_WAIT)?),
        None => None,
    };
    let args = ClaimArgs {
        fingerprint,
        lease_ttl,
        retention,
        semantics,
        owner: req.owner.clone(),
        parent,
        reconcile: req.reconcile,
        require_approval: req.require_approval,
        max_attempts: req.max_attempts,
        budget: super::safety::budget(req)?,
    };
    Ok((args, wait))
}

/// A Complete's result (unset means an empty result).
pub fn op_result(
    result: Option<v1::OperationResult>,
    limits: &Limits,
) -> Result<OpResult, ApiError> {
    let result = result.unwrap_or_default();
    if result.body.len() > limits.max_result_bytes {
        return Err(ApiError::too_large(
            "result.body",
            format!("at most {} bytes", limits.max_result_bytes),
        ));
    }
    if result.metadata.len() > limits.max_metadata_entries {
        return Err(ApiError::too_large(
            "result.metadata",
            format!("at most {} entries", limits.max_metadata_entries),
        ));
    }
    if result
        .metadata
        .iter()
        .any(|(k, v)| k.len() + v.len() > limits.max_metadata_entry_bytes)
    {
        return Err(ApiError::too_large(
            "result.metadata",
            format!(
                "each entry at most {} bytes",
                limits.max_metadata_entry_bytes
            ),
        ));
    }
    content_type(&result.content_type)?;
    Ok(OpResult {
        code: result.code,
        body: result.body,
        content_type: result.content_type,
        metadata: result.metadata.into_iter().collect(),
    })
}

/// `result.content_type`: a media type, replayed (by the HTTP gateway, as a header) to later
/// callers, so short and without control characters (no CR/LF to split a header with).
fn content_type(value: &str) -> Result<(), ApiError> {
    const FIELD: &str = "result.content_type";
    if value.len() > MAX_CONTENT_TYPE_BYTES {
        return Err(ApiError::too_large(
            FIELD,
            format!("at most {MAX_CONTENT_TYPE_BYTES} bytes"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            FIELD,
            "must not contain control characters (CR, LF, …)",
        ));
    }
    Ok(())
}

/// A Fail's error (unset means an empty error).
pub fn op_error(error: Option<v1::OperationError>, limits: &Limits) -> Result<OpError, ApiError> {
    let error = error.unwrap_or_default();
    if error.details.len() > limits.max_error_details_bytes {
        return Err(ApiError::too_large(
            "error.details",
            format!("at most {} bytes", limits.max_error_details_bytes),
        ));
    }
    if error.message.len() > MAX_ERROR_MESSAGE_BYTES {
        return Err(ApiError::too_large(
            "error.message",
            format!("at most {MAX_ERROR_MESSAGE_BYTES} bytes"),
        ));
    }
    Ok(OpError {
        code: error.code,
        message: error.message,
        details: error.details,
    })
}

/// A Fail's disposition: it must be chosen.
pub fn disposition(value: i32) -> Result<Disposition, ApiError> {
    match v1::Disposition::try_from(value) {
        Ok(v1::Disposition::Retryable) => Ok(Disposition::Retryable),
        Ok(v1::Disposition::Final) => Ok(Disposition::Final),
        Ok(v1::Disposition::Abandon) => Ok(Disposition::Abandon),
        _ => Err(ApiError::invalid(
            "disposition",
            "must be RETRYABLE, FINAL or ABANDON",
        )),
    }
}

/// Milliseconds since the epoch as a protobuf Timestamp.
pub fn timestamp(ms: Millis) -> Timestamp {
    Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// Milliseconds as a protobuf Duration.
pub fn duration(ms: Millis) -> Duration {
    Duration {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// A lease on the wire.
pub fn lease(lease: &Lease) -> v1::Lease {
    v1::Lease {
        token: lease.token,
        expires_at: Some(timestamp(lease.expires_at)),
        attempt: lease.attempt,
    }
}

/// A claim outcome on the wire.
pub fn outcome(outcome: ClaimOutcome) -> v1::ClaimOutcome {
    match outcome {
        ClaimOutcome::Acquired => v1::ClaimOutcome::Acquired,
        ClaimOutcome::Completed => v1::ClaimOutcome::Completed,
        ClaimOutcome::Failed => v1::ClaimOutcome::Failed,
        ClaimOutcome::InProgress => v1::ClaimOutcome::InProgress,
        ClaimOutcome::NeedsReconciliation => v1::ClaimOutcome::NeedsReconciliation,
        ClaimOutcome::AwaitingApproval => v1::ClaimOutcome::AwaitingApproval,
        ClaimOutcome::DuplicateIntent => v1::ClaimOutcome::DuplicateIntent,
    }
}

/// A record's history on the wire.
pub fn history(record: &Record) -> Vec<v1::RecordEvent> {
    record
        .history
        .iter()
        .map(|e| v1::RecordEvent {
            at: Some(timestamp(e.at)),
            kind: match e.kind {
                EventKind::Claim => v1::EventKind::Claim,
                EventKind::Takeover => v1::EventKind::Takeover,
                EventKind::Complete => v1::EventKind::Complete,
                EventKind::Fail => v1::EventKind::Fail,
                EventKind::Renew => v1::EventKind::Renew,
                EventKind::Approve => v1::EventKind::Approve,
                EventKind::Reject => v1::EventKind::Reject,
            } as i32,
            outcome: e.outcome.clone(),
            attempt: e.attempt,
            fencing_token: e.fencing_token,
            owner: e.owner.clone(),
            reason: e.reason.clone(),
        })
        .collect()
}

/// A status on the wire.
pub fn wire_status(status: Status) -> v1::RecordStatus {
    match status {
        Status::Processing => v1::RecordStatus::Processing,
        Status::Succeeded => v1::RecordStatus::Succeeded,
        Status::Failed => v1::RecordStatus::Failed,
        Status::Retry => v1::RecordStatus::Retry,
        Status::Unknown => v1::RecordStatus::Unknown,
        Status::AwaitingApproval => v1::RecordStatus::AwaitingApproval,
        Status::Approved => v1::RecordStatus::Approved,
        // Never shown: the engine answers NOT_FOUND or no record for a tombstone.
        Status::Abandoned | Status::Purged => v1::RecordStatus::Unspecified,
    }
}

/// A record on the wire as callers see it at `now` (the tenant stays implicit; the status is the
/// reported one, `Record::reported_status`). Takes the record by value: its strings and result
/// move into the message instead of being copied (every answer carries one).
pub fn record(r: Record, now: Millis) -> v1::Record {
    // Never more than its length left, even before a Claim writes that (`ledger::lease_end`).
    let lease_end = crate::ledger::lease_end(&r, now);
    v1::Record {
        status: wire_status(r.reported_status(now)) as i32,
        namespace: r.id.namespace,
        key: r.id.key,
        fingerprint: r.fingerprint.to_vec(),
        semantics: match r.semantics {
            Semantics::AtLeastOnce => v1::Semantics::AtLeastOnce,
            Semantics::AtMostOnce => v1::Semantics::AtMostOnce,
        } as i32,
        fencing_token: r.fencing_token,
        attempt: r.attempt,
        dedup_hits: r.dedup_hits,
        lease_owner: r.lease_owner,
        lease_expires_at: lease_end.map(timestamp),
        result: r.result.map(|res| v1::OperationResult {
            code: res.code,
            body: res.body,
            content_type: res.content_type,
            metadata: res.metadata.into_iter().collect(),
        }),
        error: r.error.map(|e| v1::OperationError {
            code: e.code,
            message: e.message,
            details: e.details,
        }),
        parent: r.parent.map(|p| v1::OperationRef {
            namespace: p.namespace,
            key: p.key,
        }),
        created_at: Some(timestamp(r.created_at)),
        updated_at: Some(timestamp(r.updated_at)),
        expires_at: r.expires_at.map(timestamp),
        require_approval: r.require_approval,
        max_attempts: r.max_attempts,
        budget: r.budget.map(super::safety::budget_usage),
        approval: r.approval.map(|a| v1::Approval {
            decision: match a.decision {
                Decision::Approved => v1::ApprovalDecision::Approved,
                Decision::Rejected => v1::ApprovalDecision::Rejected,
            } as i32,
            decided_by: a.decided_by,
            note: a.note,
            decided_at: Some(timestamp(a.decided_at)),
        }),
    }
}

#[cfg(test)]
mod tests;
