//! One request through the gateway: which requests are keyed (a `--methods` method with an
//! `Idempotency-Key`), reading the body within its limit, the caller-scoped Claim, and the answer
//! to each Claim outcome — forward (see `forward`), replay the stored response byte for byte with
//! `Idempotent-Replayed: true`, or a problem+json answer (422 reused, 409 in flight or outcome
//! unknown, the stored failure, 503 when the ledger cannot answer, in which case nothing is
//! forwarded).
//!
//! Logs carry the key's hash only, never the key, a body or a header value.

use crate::body::{self, ReadError};
use crate::fingerprint::{fingerprint, RequestParts};
use crate::forward;
use crate::headers::{self, Origin};
use crate::key::{self, KeyHeader};
use crate::ledger::{self, Answer, ClaimError};
use crate::metrics::Outcome;
use crate::problem::{problem, Kind, Problem};
use crate::Gateway;
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use http::{header, Request, StatusCode};
use oncekey_client::{StoredError, StoredResult};
use sha2::Digest;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The status of a stored failure whose code is not an HTTP error status.
const FALLBACK_FAILURE: StatusCode = StatusCode::INTERNAL_SERVER_ERROR;

/// The axum handler of every request on the proxy port.
pub async fn handle(
    State(gw): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request<Body>,
) -> Response {
    let _in_flight = gw.tracker.enter();
    let _gauge = InFlightGauge::new(gw.metrics.in_flight());
    let method = request.method().clone();
    let (response, outcome) = proxy(&gw, peer, request).await;
    gw.metrics.request(&method, outcome);
    response
}

/// Counts a request in the in-flight gauge until dropped (also when the client goes away).
struct InFlightGauge(prometheus_client::metrics::gauge::Gauge);

impl InFlightGauge {
    fn new(gauge: &prometheus_client::metrics::gauge::Gauge) -> Self {
        gauge.inc();
        InFlightGauge(gauge.clone())
    }
}

impl Drop for InFlightGauge {
    fn drop(&mut self) {
        self.0.dec();
    }
}

async fn proxy(
    gw: &Arc<Gateway>,
    peer: SocketAddr,
    mut request: Request<Body>,
) -> (Response, Outcome) {
    // Everything below — the key, the caller scope, the fingerprint — is read from the request as
    // the upstream will receive it: without the hop-by-hop fields (and those `Connection` names).
    headers::strip_hop_by_hop(request.headers_mut());
    let origin = Origin {
        peer,
        host: request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_owned)
            .or_else(|| request.uri().authority().map(|a| a.to_string())),
        version: request.version(),
    };
    if !gw.config.methods.contains(request.method()) {
        if let Some(keyed) = gw
            .config
            .methods
            .iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(request.method().as_str()))
        {
            // Many upstreams upper-case the method: forwarding it would bypass the key.
            let detail = format!(
                "method names are case-sensitive, and this one differs from {keyed} only in letter case: it is not forwarded; send it as {keyed}"
            );
            return problem(Problem::new(Kind::MethodCase, detail), Outcome::bad_request);
        }
        return forward::passthrough(gw, request, &origin).await;
    }
    let key = match key::parse(request.headers()) {
        KeyHeader::Key(key) => key,
        KeyHeader::Absent if gw.config.args.require_key => {
            let detail = format!(
                "{} requests need an Idempotency-Key header",
                request.method()
            );
            return problem(
                Problem::new(Kind::KeyRequired, detail),
                Outcome::bad_request,
            );
        }
        KeyHeader::Absent => return forward::passthrough(gw, request, &origin).await,
        KeyHeader::Invalid(why) => {
            return problem(Problem::new(Kind::InvalidKey, why), Outcome::bad_request)
        }
    };
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let limit = gw.config.args.max_request_bytes;
    let body = match body::read_request(body, declared, limit).await {
        Ok(body) => body,
        Err(ReadError::TooLarge(limit)) => {
            let detail = format!("the request body is larger than {limit} bytes");
            return problem(
                Problem::new(Kind::RequestTooLarge, detail),
                Outcome::request_too_large,
            );
        }
        Err(ReadError::Broken(_)) => {
            let p = Problem::new(Kind::BadBody, "the request body could not be read");
            return problem(p, Outcome::bad_request);
        }
    };
    let fp = match fingerprint(&RequestParts {
        method: parts.method.as_str(),
        path: parts.uri.path(),
        query: parts.uri.query().unwrap_or(""),
        content_type: parts
            .headers
            .get(header::CONTENT_TYPE)
            .map(|v| v.as_bytes()),
        body: &body,
    }) {
        Ok(fp) => fp,
        Err(inexact) => {
            let p = Problem::new(Kind::InexactNumber, inexact.to_string());
            return problem(p, Outcome::bad_request);
        }
    };
    let scope = key::caller_scope(&parts.headers, &gw.config.caller_header);
    let ledger_key = key::ledger_key(&scope, &key);
    let key_hash = hex::encode(&sha2::Sha256::digest(ledger_key.as_bytes())[..8]);
    let Ok(op) = gw.ledger.operation(&ledger_key) else {
        let p = Problem::new(Kind::InvalidKey, "the Idempotency-Key is not a valid key");
        return problem(p, Outcome::bad_request);
    };
    // Detached from the connection: a client that goes away must not abandon a Claim that
    // acquired, the upstream call, or the settling of the key; the task records the response for
    // the client's retry.
    let guard = gw.tracker.enter();
    let task = tokio::spawn({
        let gw = gw.clone();
        async move {
            let _guard = guard;
            claim_and_answer(&gw, op, fp, parts, body, origin, key_hash).await
        }
    });
    match task.await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::error!(error = %e, "request task failed");
            problem(
                Problem::new(
                    Kind::UpstreamUnreachable,
                    "the gateway failed to forward the request",
                ),
                Outcome::upstream_unreachable,
            )
        }
    }
}

/// Claims the key and answers by the outcome: forward, replay, or a problem.
async fn claim_and_answer(
    gw: &Arc<Gateway>,
    op: oncekey_client::OperationKey,
    fp: oncekey_api::fingerprint::Fingerprint,
    parts: http::request::Parts,
    body: bytes::Bytes,
    origin: Origin,
    key_hash: String,
) -> (Response, Outcome) {
    let started = Instant::now();
    let answer = gw.ledger.claim(&op, fp).await;
    gw.metrics.claim(started.elapsed());
    match answer {
        Err(ClaimError::KeyReused) => problem(
            Problem::new(
                Kind::KeyReused,
                "this Idempotency-Key was already used with a different request (method, path, query, content type or body)",
            ),
            Outcome::reused,
        ),
        Err(ClaimError::Unavailable { error, retry_after }) => {
            tracing::warn!(key_hash = %key_hash, error = %error, "ledger unavailable: request not forwarded");
            let detail = format!(
                "{}, so the request was not forwarded; retry it with the same Idempotency-Key",
                ledger::cause(&error)
            );
            problem(
                Problem::new(Kind::LedgerUnavailable, detail)
                    .retry_after(retry_after.unwrap_or(Duration::from_secs(1))),
                Outcome::ledger_unavailable,
            )
        }
        Ok(Answer::Completed(result)) => (replay(result), Outcome::replayed),
        Ok(Answer::Failed(error)) => stored_failure(&error),
        Ok(Answer::InProgress(_)) if gw.unknowns.contains(op.key()) => outcome_unknown(),
        Ok(Answer::InProgress(after)) => problem(
            Problem::new(
                Kind::InProgress,
                "a request with this Idempotency-Key is still being processed; retry later to get its response",
            )
            .retry_after(after),
            Outcome::conflict,
        ),
        Ok(Answer::NeedsReconciliation) => outcome_unknown(),
        // The other key is not named: it may be another caller's.
        Ok(Answer::DuplicateIntent) => problem(
            Problem::new(
                Kind::DuplicateIntent,
                "the same request was made under another Idempotency-Key within the ledger's intent window, so this one was not forwarded: retry with that key to get its response",
            ),
            Outcome::duplicate_intent,
        ),
        Ok(Answer::Acquired {
            grant,
            at_most_once,
        }) => {
            tracing::debug!(key_hash = %key_hash, token = grant.token, "acquired: forwarding");
            forward::keyed(gw, op, grant, at_most_once, parts, body, origin, key_hash).await
        }
    }
}

/// 409 "outcome unknown": an at-most-once request with the key may have reached the upstream
/// without its answer being recorded.
fn outcome_unknown() -> (Response, Outcome) {
    problem(
        Problem::new(
            Kind::OutcomeUnknown,
            "an earlier request with this Idempotency-Key may have reached the upstream without its answer being recorded (no answer in time, a broken connection, or a gateway that stopped): the upstream may or may not have acted on it. An operator must check and reconcile it (oncekey claim --reconcile) before the key answers again",
        ),
        Outcome::needs_reconciliation,
    )
}

/// The stored response of `result`, byte for byte, with `Idempotent-Replayed: true`.
fn replay(result: StoredResult) -> Response {
    let status = u16::try_from(result.code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(FALLBACK_FAILURE);
    let headers = headers::replayed(&result.metadata, &result.content_type);
    let mut response = Response::new(Body::from(result.body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// A stored final failure as problem+json with its own code (an HTTP error status) and message.
fn stored_failure(error: &StoredError) -> (Response, Outcome) {
    let status = u16::try_from(error.code)
        .ok()
        .filter(|c| (400..=599).contains(c))
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(FALLBACK_FAILURE);
    if status == StatusCode::INSUFFICIENT_STORAGE {
        let detail = if error.message.is_empty() {
            forward::TOO_LARGE_MESSAGE.to_owned()
        } else {
            error.message.clone()
        };
        return problem(
            Problem::new(Kind::ResponseTooLarge, detail),
            Outcome::too_large,
        );
    }
    let detail = if error.message.is_empty() {
        format!(
            "an earlier request with this Idempotency-Key failed with status {}",
            status.as_u16()
        )
    } else {
        error.message.clone()
    };
    problem(
        Problem::new(Kind::Failed, detail).with_status(status),
        Outcome::failed,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::collections::HashMap;

    #[tokio::test]
    async fn a_replay_is_the_stored_response_with_the_marker() {
        let body = vec![0u8, 159, 146, 150, b'{'];
        let r = replay(StoredResult {
            code: 201,
            body: body.clone(),
            content_type: "application/octet-stream".into(),
            metadata: HashMap::from([("location".to_owned(), "/x/1".to_owned())]),
        });
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers()["idempotent-replayed"], "true");
        assert_eq!(r.headers()["location"], "/x/1");
        let got = r.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&got[..], &body[..]);
    }

    #[test]
    fn stored_failures_keep_their_code_and_message() {
        let (r, outcome) = stored_failure(&StoredError {
            code: 507,
            message: "response too large to store".into(),
            details: vec![],
        });
        assert_eq!(
            (r.status(), outcome),
            (StatusCode::INSUFFICIENT_STORAGE, Outcome::too_large)
        );
        let (r, outcome) = stored_failure(&StoredError {
            code: 403,
            message: "rejected".into(),
            details: vec![],
        });
        assert_eq!(
            (r.status(), outcome),
            (StatusCode::FORBIDDEN, Outcome::failed)
        );
        let (r, _) = stored_failure(&StoredError::default());
        assert_eq!(r.status(), FALLBACK_FAILURE);
    }
}
