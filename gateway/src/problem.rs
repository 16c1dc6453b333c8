//! The gateway's own error answers: `application/problem+json` bodies (RFC 9457) with `type`,
//! `title`, `status` and `detail`. They are built only from fixed text and numbers the gateway
//! chose, plus a stored error's message: never a stored body, a token, a key or anything of
//! another tenant.

use crate::metrics::Outcome;
use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use std::time::Duration;

/// The media type of every problem answer.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The kinds of problem, each with a stable `type` URI (`urn:oncekey:gateway:<slug>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 400: `--require-key` and no Idempotency-Key.
    KeyRequired,
    /// 400: a malformed Idempotency-Key.
    InvalidKey,
    /// 400: the request body could not be read.
    BadBody,
    /// 400: a method that differs from a `--methods` one only in letter case.
    MethodCase,
    /// 400: a JSON body with a number its canonical form cannot keep exactly (send it as a string).
    InexactNumber,
    /// 413: the request body is over `--max-request-bytes`.
    RequestTooLarge,
    /// 422: the key was first used with another request.
    KeyReused,
    /// 409: a request with the key is still in flight.
    InProgress,
    /// 409: an at-most-once request's outcome is unknown.
    OutcomeUnknown,
    /// 409: the ledger's intent guard refused it: the same request was made under another key.
    DuplicateIntent,
    /// The stored final failure of an earlier request.
    Failed,
    /// 507: the response was too large to store.
    ResponseTooLarge,
    /// 503: the ledger cannot be reached; nothing was forwarded.
    LedgerUnavailable,
    /// 502: the upstream could not be reached or broke off.
    UpstreamUnreachable,
    /// 504: the upstream did not answer in time.
    UpstreamTimeout,
    /// 502: the upstream answered 1xx (101 Switching Protocols): not stored, not proxied.
    UpstreamUpgrade,
}

impl Kind {
    fn slug(self) -> &'static str {
        match self {
            Kind::KeyRequired => "key-required",
            Kind::InvalidKey => "invalid-key",
            Kind::BadBody => "bad-request-body",
            Kind::MethodCase => "method-case",
            Kind::InexactNumber => "inexact-number",
            Kind::RequestTooLarge => "request-too-large",
            Kind::KeyReused => "key-reused",
            Kind::InProgress => "in-progress",
            Kind::OutcomeUnknown => "outcome-unknown",
            Kind::DuplicateIntent => "duplicate-intent",
            Kind::Failed => "failed",
            Kind::ResponseTooLarge => "response-too-large",
            Kind::LedgerUnavailable => "ledger-unavailable",
            Kind::UpstreamUnreachable => "upstream-unreachable",
            Kind::UpstreamTimeout => "upstream-timeout",
            Kind::UpstreamUpgrade => "upstream-upgrade",
        }
    }

    fn default_status(self) -> StatusCode {
        match self {
            Kind::KeyRequired
            | Kind::InvalidKey
            | Kind::BadBody
            | Kind::MethodCase
            | Kind::InexactNumber => StatusCode::BAD_REQUEST,
            Kind::RequestTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Kind::KeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Kind::InProgress | Kind::OutcomeUnknown | Kind::DuplicateIntent => StatusCode::CONFLICT,
            Kind::Failed => StatusCode::INTERNAL_SERVER_ERROR,
            Kind::ResponseTooLarge => StatusCode::INSUFFICIENT_STORAGE,
            Kind::LedgerUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            Kind::UpstreamUnreachable | Kind::UpstreamUpgrade => StatusCode::BAD_GATEWAY,
            Kind::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Kind::KeyRequired => "Idempotency-Key required",
            Kind::InvalidKey => "Invalid Idempotency-Key",
            Kind::BadBody => "Unreadable request body",
            Kind::MethodCase => "Method name in the wrong letter case",
            Kind::InexactNumber => "A number in the JSON body cannot be fingerprinted exactly",
            Kind::RequestTooLarge => "Request body too large",
            Kind::KeyReused => "Idempotency-Key reused with a different request",
            Kind::InProgress => "A request with this Idempotency-Key is in progress",
            Kind::OutcomeUnknown => "Outcome unknown: the request must be reconciled",
            Kind::DuplicateIntent => "The same request was made under another Idempotency-Key",
            Kind::Failed => "The request failed earlier",
            Kind::ResponseTooLarge => "Response too large to store",
            Kind::LedgerUnavailable => "Idempotency ledger unavailable",
            Kind::UpstreamUnreachable => "Upstream unreachable",
            Kind::UpstreamTimeout => "Upstream timeout",
            Kind::UpstreamUpgrade => "Upstream switched protocols",
        }
    }
}

/// One problem answer.
#[derive(Debug, Clone)]
pub struct Problem {
    kind: Kind,
    status: StatusCode,
    detail: String,
    retry_after: Option<Duration>,
}

impl Problem {
    /// A problem of `kind` with its usual status and `detail`.
    pub fn new(kind: Kind, detail: impl Into<String>) -> Self {
        Problem {
            kind,
            status: kind.default_status(),
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// The same with another status (a stored failure's own code).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Adds `Retry-After` (whole seconds, at least 1).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// The problem's `type` URI.
    pub fn type_uri(&self) -> String {
        format!("urn:oncekey:gateway:{}", self.kind.slug())
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        serde_json::json!({
            "type": self.type_uri(),
            "title": self.kind.title(),
            "status": self.status.as_u16(),
            "detail": self.detail,
        })
        .to_string()
    }
}

/// Whole seconds for `Retry-After`, rounded up, at least 1.
pub fn retry_after_secs(after: Duration) -> u64 {
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    secs.max(1)
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.body()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if let Some(after) = self.retry_after {
            headers.insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_secs(after)),
            );
        }
        response
    }
}

/// A problem answer and how to count it.
pub(crate) fn problem(p: Problem, outcome: Outcome) -> (Response, Outcome) {
    (p.into_response(), outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_has_the_rfc_9457_members() {
        let p = Problem::new(Kind::KeyReused, "the key was used with another request");
        let body: serde_json::Value = serde_json::from_str(&p.body()).unwrap();
        assert_eq!(body["type"], "urn:oncekey:gateway:key-reused");
        assert_eq!(body["status"], 422);
        assert!(body["title"].as_str().unwrap().contains("reused"));
        assert_eq!(body["detail"], "the key was used with another request");
        assert_eq!(body.as_object().unwrap().len(), 4);
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up() {
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1500)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(3)), 3);
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        let r = Problem::new(Kind::InProgress, "x")
            .retry_after(Duration::from_millis(2500))
            .into_response();
        assert_eq!(r.status(), StatusCode::CONFLICT);
        assert_eq!(r.headers()[header::RETRY_AFTER], "3");
        assert_eq!(r.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
    }

    #[test]
    fn the_unknown_outcome_title_says_it_must_be_reconciled() {
        let title = Kind::OutcomeUnknown.title().to_lowercase();
        assert!(title.contains("unknown") && title.contains("reconciled"));
    }
}
