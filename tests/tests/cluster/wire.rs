//! The recorded workload on the wire: a recorded `Call` as its RPC through the raw generated
//! client, and the answer (or the error status) as an `Answer` in the ledger's terms.

use super::history::{Answer, Call, Seen};
use oncekey_api::v1;
use oncekey_client::LedgerRpc;
use oncekey_server::ledger::{ClaimOutcome, Disposition, LedgerError, Millis};
use oncekey_server::ledger::{OpError, OpResult, Semantics, Status};
use tonic_types::StatusExt;

/// Sends `call` for `key` in namespace `ns`: its answer, or the error status.
pub async fn send(
    rpc: &mut LedgerRpc,
    ns: &str,
    key: &str,
    call: &Call,
) -> Result<Answer, tonic::Status> {
    let (ns, key) = (ns.to_owned(), key.to_owned());
    match call {
        Call::Claim(a) => rpc
            .claim(v1::ClaimRequest {
                namespace: ns,
                key,
                arguments: Some(v1::claim_request::Arguments::Fingerprint(
                    a.fingerprint.to_vec(),
                )),
                lease_ttl: Some(duration(a.lease_ttl)),
                retention: Some(duration(a.retention)),
                semantics: match a.semantics {
                    Semantics::AtLeastOnce => v1::Semantics::AtLeastOnce,
                    Semantics::AtMostOnce => v1::Semantics::AtMostOnce,
                } as i32,
                owner: a.owner.clone(),
                reconcile: a.reconcile,
                ..Default::default()
            })
            .await
            .map(|r| {
                let r = r.into_inner();
                Answer::Claimed {
                    outcome: outcome(r.outcome),
                    record: seen(
                        r.record
                            .as_ref()
                            .expect("a claim answer carries the record"),
                    ),
                    lease: r.lease.map(|l| (l.token, millis(l.expires_at.as_ref()))),
                }
            }),
        Call::Complete { token, result } => rpc
            .complete(v1::CompleteRequest {
                namespace: ns,
                key,
                lease_token: *token,
                result: Some(v1::OperationResult {
                    code: result.code,
                    body: result.body.clone(),
                    content_type: result.content_type.clone(),
                    metadata: Default::default(),
                }),
            })
            .await
            .map(|r| Answer::Settled(seen(r.into_inner().record.as_ref().expect("record")))),
        Call::Fail {
            token,
            error,
            disposition,
        } => rpc
            .fail(v1::FailRequest {
                namespace: ns,
                key,
                lease_token: *token,
                error: Some(v1::OperationError {
                    code: error.code,
                    message: error.message.clone(),
                    details: error.details.clone(),
                }),
                disposition: match disposition {
                    Disposition::Retryable => v1::Disposition::Retryable,
                    Disposition::Final => v1::Disposition::Final,
                    Disposition::Abandon => v1::Disposition::Abandon,
                } as i32,
                nothing_ran: false,
            })
            .await
            .map(|r| Answer::Settled(seen(r.into_inner().record.as_ref().expect("record")))),
        Call::Renew { token, lease_ttl } => rpc
            .renew(v1::RenewRequest {
                namespace: ns,
                key,
                lease_token: *token,
                lease_ttl: Some(duration(*lease_ttl)),
            })
            .await
            .map(|r| Answer::Renewed {
                expires_at: millis(r.into_inner().lease.expect("lease").expires_at.as_ref()),
            }),
        Call::Lookup => rpc
            .lookup(v1::LookupRequest {
                namespace: ns,
                key,
                include_history: false,
            })
            .await
            .map(|r| Answer::Found(Some(seen(r.into_inner().record.as_ref().expect("record"))))),
    }
}

/// What an error status means for the history: a definite refusal, NOT_FOUND for a Lookup, or no
/// definite answer (INTERNAL included: counted by the caller as a server bug).
pub fn refusal(call: &Call, status: &tonic::Status) -> Answer {
    use tonic::Code;
    let reason = status
        .get_details_error_info()
        .map(|i| i.reason)
        .unwrap_or_default();
    match (status.code(), reason.as_str()) {
        (Code::FailedPrecondition, "LEASE_LOST") => Answer::Refused(LedgerError::LeaseLost),
        (Code::FailedPrecondition, "ALREADY_SETTLED") => {
            Answer::Refused(LedgerError::AlreadySettled)
        }
        (Code::FailedPrecondition, "KEY_REUSED") => Answer::Refused(LedgerError::KeyReused),
        (Code::NotFound, _) if matches!(call, Call::Lookup) => Answer::Found(None),
        (Code::Unavailable | Code::DeadlineExceeded | Code::Cancelled | Code::Unknown, _) => {
            Answer::Unknown(format!("{:?} {reason}", status.code()))
        }
        (Code::Internal, _) => Answer::Unknown(format!("INTERNAL {}", status.message())),
        _ => panic!("unexpected answer to {call:?}: {status:?}"),
    }
}
fn duration(ms: Millis) -> prost_types::Duration {
    prost_types::Duration {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

fn millis(ts: Option<&prost_types::Timestamp>) -> Millis {
    let ts = ts.expect("a timestamp");
    ts.seconds * 1000 + Millis::from(ts.nanos) / 1_000_000
}

fn outcome(v: i32) -> ClaimOutcome {
    match v1::ClaimOutcome::try_from(v).expect("known outcome") {
        v1::ClaimOutcome::Acquired => ClaimOutcome::Acquired,
        v1::ClaimOutcome::Completed => ClaimOutcome::Completed,
        v1::ClaimOutcome::Failed => ClaimOutcome::Failed,
        v1::ClaimOutcome::InProgress => ClaimOutcome::InProgress,
        v1::ClaimOutcome::NeedsReconciliation => ClaimOutcome::NeedsReconciliation,
        other => panic!("outcome {other:?} is not part of the recorded workload"),
    }
}

/// The modelled fields of a record on the wire.
fn seen(r: &v1::Record) -> Seen {
    Seen {
        status: match v1::RecordStatus::try_from(r.status).expect("known status") {
            v1::RecordStatus::Processing => Status::Processing,
            v1::RecordStatus::Succeeded => Status::Succeeded,
            v1::RecordStatus::Failed => Status::Failed,
            v1::RecordStatus::Retry => Status::Retry,
            v1::RecordStatus::Unknown => Status::Unknown,
            other => panic!("status {other:?} is not part of the recorded workload"),
        },
        token: r.fencing_token,
        attempt: r.attempt,
        owner: r.lease_owner.clone(),
        lease_expires_at: r.lease_expires_at.as_ref().map(|t| millis(Some(t))),
        result: r.result.as_ref().map(|x| OpResult {
            code: x.code,
            body: x.body.clone(),
            content_type: x.content_type.clone(),
            metadata: x.metadata.clone().into_iter().collect(),
        }),
        error: r.error.as_ref().map(|e| OpError {
            code: e.code,
            message: e.message.clone(),
            details: e.details.clone(),
        }),
    }
}
