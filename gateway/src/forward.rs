//! Forwarding: an acquired request goes upstream once while its lease is kept alive, and the
//! response settles the key before the client sees it —
//!
//! - status < 500 other than 408, 425, 429, with a body that fits `--max-response-bytes`:
//!   Completed (status, body, `content-type`, `location` and `--store-headers`), then returned;
//! - 5xx, 408, 425, 429: Failed RETRYABLE (the next request with the key goes upstream again),
//!   then returned as is; no answer in time → 504, no connection → 502, both problem+json and
//!   Failed RETRYABLE;
//! - a body too large to store: the key Failed FINAL with `{507, "response too large to store"}`,
//!   then the response streamed through this once.
//!
//! If the ledger cannot record the response, it is returned anyway (the upstream acted on it);
//! the lease then lapses and the key behaves as its semantics say. Keyless and non-`--methods`
//! requests pass through with their bodies streamed.

use crate::body::{self, Prefixed, Upstream as Read};
use crate::headers::{self, Origin};
use crate::ledger::too_large;
use crate::metrics::Outcome;
use crate::problem::{Kind, Problem};
use crate::proxy::problem;
use crate::upstream::UpstreamError;
use crate::Gateway;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, Request, StatusCode};
use oncekey_client::{Disposition, LeaseGrant, OperationKey, StoredResult};
use std::sync::Arc;
use std::time::Instant;

/// The stored error message of a response too large to store.
pub const TOO_LARGE_MESSAGE: &str = "response too large to store";

/// True for the statuses that are not stored: the next request with the key tries again.
pub fn retryable(status: StatusCode) -> bool {
    status.is_server_error() || matches!(status.as_u16(), 408 | 425 | 429)
}

/// Forwards a request that is not keyed, streaming both bodies.
pub async fn passthrough(
    gw: &Arc<Gateway>,
    request: Request<Body>,
    origin: &Origin,
) -> (Response, Outcome) {
    let (parts, body) = request.into_parts();
    let started = Instant::now();
    let sent = gw
        .upstream
        .send(parts, body, origin, gw.config.args.upstream_timeout)
        .await;
    gw.metrics.upstream(started.elapsed());
    match sent {
        Ok(response) => {
            let (mut head, incoming) = response.into_parts();
            headers::for_client(&mut head.headers, head.version);
            (
                Response::from_parts(head, Body::new(incoming)),
                Outcome::passthrough,
            )
        }
        Err(e) => upstream_problem(&e),
    }
}

/// The 502/504 problem of an upstream that did not answer.
fn upstream_problem(e: &UpstreamError) -> (Response, Outcome) {
    let p = match e {
        UpstreamError::Timeout => Problem::new(
            Kind::UpstreamTimeout,
            "the upstream service did not answer in time",
        ),
        UpstreamError::Unreachable(_) => Problem::new(
            Kind::UpstreamUnreachable,
            "the upstream service could not be reached",
        ),
    };
    problem(p, Outcome::upstream_unreachable)
}

/// Forwards an acquired request and settles its key (see the module docs).
pub async fn keyed(
    gw: &Arc<Gateway>,
    op: OperationKey,
    grant: LeaseGrant,
    parts: http::request::Parts,
    request_body: Bytes,
    origin: Origin,
    key_hash: String,
) -> (Response, Outcome) {
    let settle = Settle {
        gw,
        op: &op,
        token: grant.token,
        key_hash: &key_hash,
    };
    let hold = gw.ledger.hold(&op, grant);
    let timeout = gw.config.args.upstream_timeout;
    let started = Instant::now();
    let sent = gw
        .upstream
        .send(parts, Body::from(request_body), &origin, timeout)
        .await;
    gw.metrics.upstream(started.elapsed());
    let response = match sent {
        Ok(response) => response,
        Err(e) => {
            drop(hold);
            let code = match e {
                UpstreamError::Timeout => 504,
                UpstreamError::Unreachable(_) => 502,
            };
            tracing::info!(key_hash = %key_hash, error = %e, "upstream failed: key released for a retry");
            settle
                .fail(code, &e.to_string(), Disposition::Retryable)
                .await;
            return upstream_problem(&e);
        }
    };
    let status = response.status();
    let (mut head, incoming) = response.into_parts();
    headers::for_client(&mut head.headers, head.version);
    if retryable(status) {
        drop(hold);
        let message = format!("upstream answered {}", status.as_u16());
        settle
            .fail(status.as_u16(), &message, Disposition::Retryable)
            .await;
        return (
            Response::from_parts(head, Body::new(incoming)),
            Outcome::upstream_error,
        );
    }
    let remaining = timeout.saturating_sub(started.elapsed());
    let limit = gw.config.args.max_response_bytes;
    let read = tokio::time::timeout(remaining, body::read_upstream(incoming, limit)).await;
    drop(hold);
    let whole = match read {
        Err(_) => {
            let e = UpstreamError::Timeout;
            settle
                .fail(504, "upstream body timeout", Disposition::Retryable)
                .await;
            return upstream_problem(&e);
        }
        Ok(Err(e)) => {
            let e = UpstreamError::Unreachable(e.to_string());
            settle
                .fail(502, &e.to_string(), Disposition::Retryable)
                .await;
            return upstream_problem(&e);
        }
        Ok(Ok(Read::Over(prefix, rest))) => {
            tracing::warn!(key_hash = %key_hash, limit, "response too large to store: returned once, later requests get 507");
            settle
                .fail(507, TOO_LARGE_MESSAGE, Disposition::Final)
                .await;
            let body = Body::new(Prefixed::new(prefix, rest));
            return (Response::from_parts(head, body), Outcome::too_large);
        }
        Ok(Ok(Read::Whole(bytes))) => bytes,
    };
    let result = StoredResult {
        code: i32::from(status.as_u16()),
        body: whole.to_vec(),
        content_type: head
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned(),
        metadata: headers::stored(&head.headers, &gw.config.store_headers),
    };
    let outcome = match gw.ledger.complete(&op, grant.token, result).await {
        Ok(()) => Outcome::forwarded,
        Err(e) if too_large(&e) => {
            tracing::warn!(key_hash = %key_hash, error = %e, "the ledger refused the response as too large: returned once, later requests get 507");
            settle
                .fail(507, TOO_LARGE_MESSAGE, Disposition::Final)
                .await;
            Outcome::too_large
        }
        Err(e) => {
            tracing::warn!(key_hash = %key_hash, error = %e, "response returned but not recorded: the key is retried once its lease lapses");
            Outcome::unrecorded
        }
    };
    (Response::from_parts(head, Body::from(whole)), outcome)
}

/// Settling one acquired key.
struct Settle<'a> {
    gw: &'a Arc<Gateway>,
    op: &'a OperationKey,
    token: u64,
    key_hash: &'a str,
}

impl Settle<'_> {
    /// Fails the key; a failure to record it is logged (the lease then lapses).
    async fn fail(&self, code: u16, message: &str, disposition: Disposition) {
        if let Err(e) = self
            .gw
            .ledger
            .fail(self.op, self.token, code, message, disposition)
            .await
        {
            tracing::warn!(key_hash = %self.key_hash, error = %e, ?disposition, "could not record the failure: the key is retried once its lease lapses");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_and_try_again_statuses_are_not_stored() {
        for code in [500, 502, 503, 504, 599, 408, 425, 429] {
            assert!(retryable(StatusCode::from_u16(code).unwrap()), "{code}");
        }
        for code in [200, 201, 204, 301, 400, 401, 404, 409, 422, 499] {
            assert!(!retryable(StatusCode::from_u16(code).unwrap()), "{code}");
        }
    }
}
