//! Forwarding: an acquired request goes upstream once while its lease is kept alive, and the
//! outcome settles the key before the client sees it, as `policy` decides under the key's
//! semantics —
//!
//! - a complete answer to store: Completed (status, body, `content-type`, `location` and
//!   `--store-headers`), then returned; a body too large to store: Failed FINAL with
//!   `{507, "response too large to store"}`, then streamed through this once;
//! - an answer to release (at-least-once: 5xx, 408, 425, 429; both: `--retryable-status`):
//!   Failed RETRYABLE, then returned as is;
//! - no complete answer (no connection, timeout, broken connection, body cut short, a 1xx): a
//!   502/504 problem, and the key Failed RETRYABLE — except under at-most-once once the request
//!   may have reached the upstream: then nothing is recorded, the lease is ended at once (the
//!   record turns UNKNOWN) and this gateway answers the key "outcome unknown" meanwhile.
//!
//! If the ledger cannot record the response, it is returned anyway (the upstream acted on it);
//! the lease then lapses and the key behaves as its semantics say. Keyless and non-`--methods`
//! requests pass through with their bodies streamed.

use crate::body::{self, Prefixed, Upstream as Read};
use crate::headers::{self, Origin};
use crate::ledger::{too_large, SHORTEST_LEASE};
use crate::metrics::Outcome;
use crate::policy::{self, Head, NoAnswer};
use crate::problem::{problem, Kind, Problem};
use crate::upstream::UpstreamError;
use crate::Gateway;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{header, Request, StatusCode};
use oncekey_client::{Disposition, LeaseGrant, OperationKey, StoredResult};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The stored error message of a response too large to store.
pub const TOO_LARGE_MESSAGE: &str = "response too large to store";

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
        Ok(response) if response.status().is_informational() => {
            upgrade_problem(response.status(), false)
        }
        Ok(response) => {
            let (mut head, incoming) = response.into_parts();
            headers::for_client(&mut head.headers, head.version);
            (
                Response::from_parts(head, Body::new(incoming)),
                Outcome::passthrough,
            )
        }
        Err(e) => upstream_problem(&e, false),
    }
}

/// The 502/504 problem of an upstream that gave no complete answer; `unknown` when the key's
/// outcome is left unknown (at-most-once).
fn upstream_problem(e: &UpstreamError, unknown: bool) -> (Response, Outcome) {
    let (kind, what) = match e {
        UpstreamError::Timeout { .. } => (
            Kind::UpstreamTimeout,
            "the upstream service did not answer in time",
        ),
        UpstreamError::Unreachable(_) => (
            Kind::UpstreamUnreachable,
            "the upstream service could not be reached",
        ),
        UpstreamError::Broken(_) => (
            Kind::UpstreamUnreachable,
            "the connection to the upstream service broke before its whole answer arrived",
        ),
    };
    if unknown {
        let detail = format!("{what}. {UNKNOWN_DETAIL}");
        return problem(Problem::new(kind, detail), Outcome::outcome_unknown);
    }
    problem(Problem::new(kind, what), Outcome::upstream_unreachable)
}

/// What an at-most-once client is told when its request's outcome became unknown.
const UNKNOWN_DETAIL: &str = "The request may have reached it, so this Idempotency-Key is not forwarded again: its outcome is unknown until an operator reconciles it";

/// The 502 problem of a 1xx final answer (101 Switching Protocols): upgrades are not proxied.
fn upgrade_problem(status: StatusCode, unknown: bool) -> (Response, Outcome) {
    let mut detail = format!(
        "the upstream service answered {} to a request that asked for no protocol switch; the gateway does not proxy it",
        status.as_u16()
    );
    if unknown {
        detail.push_str(". ");
        detail.push_str(UNKNOWN_DETAIL);
        return problem(
            Problem::new(Kind::UpstreamUpgrade, detail),
            Outcome::outcome_unknown,
        );
    }
    problem(
        Problem::new(Kind::UpstreamUpgrade, detail),
        Outcome::upstream_unreachable,
    )
}

/// Forwards an acquired request and settles its key (see the module docs).
#[allow(clippy::too_many_arguments)]
pub async fn keyed(
    gw: &Arc<Gateway>,
    op: OperationKey,
    grant: LeaseGrant,
    at_most_once: bool,
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
        at_most_once,
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
            return settle.no_answer(&e).await;
        }
    };
    let status = response.status();
    let (mut head, incoming) = response.into_parts();
    headers::for_client(&mut head.headers, head.version);
    match gw.policy.head(status, at_most_once) {
        Head::Store => {}
        Head::Refuse => {
            drop(hold);
            let e = UpstreamError::Broken(format!("upstream answered {}", status.as_u16()));
            let unknown = settle.settle_no_answer(&e).await;
            return upgrade_problem(status, unknown);
        }
        Head::Release => {
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
    }
    let remaining = timeout.saturating_sub(started.elapsed());
    let limit = gw.config.args.max_response_bytes;
    let read = tokio::time::timeout(remaining, body::read_upstream(incoming, limit)).await;
    drop(hold);
    let whole = match read {
        Err(_) => {
            return settle
                .no_answer(&UpstreamError::Timeout { sent: true })
                .await
        }
        Ok(Err(e)) => {
            return settle
                .no_answer(&UpstreamError::Broken(e.to_string()))
                .await
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
            tracing::warn!(key_hash = %key_hash, error = %e, "response returned but not recorded: the key is retried or needs reconciliation once its lease lapses");
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
    at_most_once: bool,
}

impl Settle<'_> {
    /// Settles a request that got no complete answer and builds the client's 502/504 problem.
    async fn no_answer(&self, e: &UpstreamError) -> (Response, Outcome) {
        let unknown = self.settle_no_answer(e).await;
        upstream_problem(e, unknown)
    }

    /// Settles a request that got no complete answer: Failed RETRYABLE, or (at-most-once, the
    /// request may have arrived) its outcome left unknown. True in the latter case.
    async fn settle_no_answer(&self, e: &UpstreamError) -> bool {
        match policy::no_answer(e.sent(), self.at_most_once) {
            NoAnswer::Release => {
                let code = match e {
                    UpstreamError::Timeout { .. } => 504,
                    _ => 502,
                };
                tracing::info!(key_hash = %self.key_hash, error = %e, "upstream failed: key released for a retry");
                self.fail(code, &e.to_string(), Disposition::Retryable)
                    .await;
                false
            }
            NoAnswer::Unknown => {
                self.unknown(e).await;
                true
            }
        }
    }

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

    /// Leaves the outcome unknown: records nothing, ends the lease as soon as the ledger allows
    /// (the keep-alive has stopped already), and remembers the key meanwhile. Remembered for a
    /// whole `--lease` in case a renewal already under way outlived the keep-alive's end.
    async fn unknown(&self, e: &UpstreamError) {
        tracing::warn!(key_hash = %self.key_hash, error = %e, "at-most-once request may have reached the upstream without a complete answer: its outcome is unknown until reconciled");
        let remember = self.gw.config.args.lease.max(SHORTEST_LEASE) + Duration::from_secs(1);
        self.gw
            .unknowns
            .insert(self.op.key(), Instant::now() + remember);
        if let Err(e) = self.gw.ledger.shorten(self.op, self.token).await {
            tracing::warn!(key_hash = %self.key_hash, error = %e, "could not end the lease early: the record turns UNKNOWN when it lapses");
        }
    }
}
