//! Request builders and status readers for tests that talk gRPC with the generated types: a
//! Claim, Complete, Fail or Lookup in one line, and the ErrorInfo reason or BadRequest field of a
//! refusal.

use oncekey_api::v1;
use tonic_types::StatusExt;

/// The ErrorInfo reason of a status (panics if the status has none: every error must carry one).
pub fn reason(status: &tonic::Status) -> String {
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("status without ErrorInfo: {status:?}"));
    assert_eq!(info.domain, oncekey_api::ERROR_DOMAIN);
    info.reason
}

/// The field a BadRequest names.
pub fn bad_field(status: &tonic::Status) -> String {
    let bad = status
        .get_details_bad_request()
        .unwrap_or_else(|| panic!("INVALID_ARGUMENT without BadRequest: {status:?}"));
    bad.field_violations
        .first()
        .expect("a violation")
        .field
        .clone()
}

/// A Claim with `payload_json`.
pub fn claim(ns: &str, key: &str, payload: &str) -> v1::ClaimRequest {
    v1::ClaimRequest {
        namespace: ns.into(),
        key: key.into(),
        arguments: Some(v1::claim_request::Arguments::PayloadJson(payload.into())),
        owner: "e2e".into(),
        ..Default::default()
    }
}

/// A protobuf Duration of `ms` milliseconds.
pub fn ms(ms: i64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

/// An OperationResult with `body`.
pub fn result(code: i32, body: &[u8]) -> v1::OperationResult {
    v1::OperationResult {
        code,
        body: body.to_vec(),
        content_type: "application/json".into(),
        ..Default::default()
    }
}

/// A Complete of `key` with `token`.
pub fn complete(ns: &str, key: &str, token: u64, res: v1::OperationResult) -> v1::CompleteRequest {
    v1::CompleteRequest {
        namespace: ns.into(),
        key: key.into(),
        lease_token: token,
        result: Some(res),
    }
}

/// A Fail of `key` with `token`.
pub fn fail(
    ns: &str,
    key: &str,
    token: u64,
    disposition: v1::Disposition,
    message: &str,
) -> v1::FailRequest {
    v1::FailRequest {
        namespace: ns.into(),
        key: key.into(),
        lease_token: token,
        error: Some(v1::OperationError {
            code: 1,
            message: message.into(),
            details: vec![],
        }),
        disposition: disposition as i32,
        ..Default::default()
    }
}

/// A Lookup of `key`.
pub fn lookup(ns: &str, key: &str) -> v1::LookupRequest {
    v1::LookupRequest {
        namespace: ns.into(),
        key: key.into(),
        include_history: false,
    }
}

/// The outcome of a Claim response.
pub fn outcome(r: &v1::ClaimResponse) -> v1::ClaimOutcome {
    v1::ClaimOutcome::try_from(r.outcome).expect("known outcome")
}

/// The status of a record.
pub fn status(r: &v1::Record) -> v1::RecordStatus {
    v1::RecordStatus::try_from(r.status).expect("known status")
}
