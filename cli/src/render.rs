//! Wire messages as JSON for people and scripts: records (with their approval, result and error),
//! leases, times, bytes as text or hex.

use oncekey_api::v1;
use serde_json::{json, Value};

pub(crate) fn time(ts: &Option<prost_types::Timestamp>) -> Value {
    ts.as_ref().map_or(Value::Null, |t| json!(t.to_string()))
}

pub(crate) fn lease_json(lease: &v1::Lease) -> Value {
    json!({ "token": lease.token, "expires_at": time(&lease.expires_at), "attempt": lease.attempt })
}

/// Bytes as text when they are UTF-8, else as hex.
fn bytes_json(name: &str, bytes: &[u8]) -> (String, Value) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (name.to_owned(), json!(text)),
        Err(_) => (format!("{name}_hex"), json!(hex::encode(bytes))),
    }
}

/// A record status's wire name without its prefix (the number when this build does not know it).
pub fn describe_status(status: i32) -> String {
    match v1::RecordStatus::try_from(status) {
        Ok(s) => s
            .as_str_name()
            .trim_start_matches("RECORD_STATUS_")
            .to_owned(),
        Err(_) => status.to_string(),
    }
}

/// A record as JSON for people and scripts.
pub fn record_json(r: &v1::Record) -> Value {
    let semantics = v1::Semantics::try_from(r.semantics).unwrap_or_default();
    let mut out = json!({
        "namespace": r.namespace,
        "key": r.key,
        "status": describe_status(r.status),
        "fingerprint": hex::encode(&r.fingerprint),
        "semantics": semantics.as_str_name().trim_start_matches("SEMANTICS_"),
        "fencing_token": r.fencing_token,
        "attempt": r.attempt,
        "dedup_hits": r.dedup_hits,
        "lease_owner": r.lease_owner,
        "lease_expires_at": time(&r.lease_expires_at),
        "created_at": time(&r.created_at),
        "updated_at": time(&r.updated_at),
        "expires_at": time(&r.expires_at),
    });
    if let Some(res) = &r.result {
        let (name, body) = bytes_json("body", &res.body);
        out["result"] =
            json!({ "code": res.code, "content_type": res.content_type, "metadata": res.metadata });
        out["result"][name] = body;
    }
    if let Some(err) = &r.error {
        let (name, details) = bytes_json("details", &err.details);
        out["error"] = json!({ "code": err.code, "message": err.message });
        out["error"][name] = details;
    }
    if let Some(p) = &r.parent {
        out["parent"] = json!({ "namespace": p.namespace, "key": p.key });
    }
    if r.require_approval {
        out["require_approval"] = json!(true);
    }
    if r.max_attempts > 0 {
        out["max_attempts"] = json!(r.max_attempts);
    }
    if let Some(a) = &r.approval {
        let decision = v1::ApprovalDecision::try_from(a.decision).unwrap_or_default();
        out["approval"] = json!({
            "decision": decision.as_str_name().trim_start_matches("APPROVAL_DECISION_"),
            "decided_by": a.decided_by,
            "note": a.note,
            "decided_at": time(&a.decided_at),
        });
    }
    out
}
