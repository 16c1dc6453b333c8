//! The typed error of every RPC: the gRPC code plus the `google.rpc.ErrorInfo` reason the server
//! attached (docs/api.md#errors), and the client-side failures (timeout, open circuit, bad answer).
//!
//! This module only classifies errors; it decides nothing about retrying them (see `stack::retry`).

use oncekey_api::v1::ErrorReason as Wire;
use std::fmt;
use std::time::Duration;
use tonic::Code;
use tonic_types::StatusExt;

/// The metadata key (trailer or header) by which a server asks a client to wait before retrying.
pub const RETRY_PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

/// The `ErrorInfo` reason of a server error (docs/api.md#errors).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reason {
    /// INVALID_ARGUMENT: a field is missing, malformed or out of range.
    InvalidField,
    /// INVALID_ARGUMENT: a field exceeds its size limit.
    TooLarge,
    /// FAILED_PRECONDITION: the key was first claimed with different arguments.
    KeyReused,
    /// FAILED_PRECONDITION: the lease token is not the record's current one.
    LeaseLost,
    /// FAILED_PRECONDITION: this token already settled the record differently.
    AlreadySettled,
    /// NOT_FOUND: no such record.
    NotFound,
    /// UNAUTHENTICATED: missing or unknown bearer token.
    Unauthenticated,
    /// PERMISSION_DENIED: the credentials do not allow the request.
    PermissionDenied,
    /// UNAVAILABLE: the server's store cannot answer; safe to retry with the same key.
    StoreUnavailable,
    /// ABORTED: a newer KeepAlive stream for the same lease replaced this one. The lease is not
    /// lost (the newer stream keeps it alive); the replaced stream must not be reopened.
    KeepaliveReplaced,
    /// FAILED_PRECONDITION: an Approve or Reject of an operation that does not await approval
    /// (never did, was decided otherwise, or has moved on since).
    NotAwaitingApproval,
    /// FAILED_PRECONDITION: a Purge of an unsettled at-most-once operation without `force`.
    UnsettledAtMostOnce,
    /// PERMISSION_DENIED: the token lacks the scope the RPC needs (`ledger`, `approve` or
    /// `admin`); the status message names it.
    MissingScope,
    /// RESOURCE_EXHAUSTED: the tenant is over an admission limit; the error's `retry_after`
    /// says when to come back.
    RateLimited,
    /// INTERNAL: the server could not read a stored record (a bug or damaged data).
    Internal,
    /// FAILED_PRECONDITION: a Claim of a new child operation beyond its parent's run budget
    /// (the error's `metadata` has `parent_namespace`, `parent_key`, `limit`, `spent`, `max`).
    BudgetExhausted,
    /// DATA_LOSS: the record's sealed fields cannot be opened on the server: the key they name
    /// is not in its key ring, or the ciphertext was altered (the error's `metadata` has
    /// `key_id` and `cause`: `missing_key` or `tampered`). Retrying does not help until an
    /// operator restores the key.
    UnreadableRecord,
    /// A reason this client version does not know.
    Other(String),
}

impl Reason {
    /// Parses an `ErrorInfo.reason`, by the proto's `ErrorReason` (the one list of reasons).
    pub fn parse(reason: &str) -> Reason {
        match Wire::from_wire_name(reason) {
            Some(Wire::InvalidField) => Reason::InvalidField,
            Some(Wire::TooLarge) => Reason::TooLarge,
            Some(Wire::KeyReused) => Reason::KeyReused,
            Some(Wire::LeaseLost) => Reason::LeaseLost,
            Some(Wire::AlreadySettled) => Reason::AlreadySettled,
            Some(Wire::NotFound) => Reason::NotFound,
            Some(Wire::Unauthenticated) => Reason::Unauthenticated,
            Some(Wire::PermissionDenied) => Reason::PermissionDenied,
            Some(Wire::StoreUnavailable) => Reason::StoreUnavailable,
            Some(Wire::KeepaliveReplaced) => Reason::KeepaliveReplaced,
            Some(Wire::NotAwaitingApproval) => Reason::NotAwaitingApproval,
            Some(Wire::UnsettledAtMostOnce) => Reason::UnsettledAtMostOnce,
            Some(Wire::MissingScope) => Reason::MissingScope,
            Some(Wire::RateLimited) => Reason::RateLimited,
            Some(Wire::Internal) => Reason::Internal,
            Some(Wire::BudgetExhausted) => Reason::BudgetExhausted,
            Some(Wire::UnreadableRecord) => Reason::UnreadableRecord,
            Some(Wire::Unspecified) | None => Reason::Other(reason.to_owned()),
        }
    }

    /// The proto's `ErrorReason` of this reason (`None` for one this version does not know).
    pub fn wire(&self) -> Option<Wire> {
        Some(match self {
            Reason::InvalidField => Wire::InvalidField,
            Reason::TooLarge => Wire::TooLarge,
            Reason::KeyReused => Wire::KeyReused,
            Reason::LeaseLost => Wire::LeaseLost,
            Reason::AlreadySettled => Wire::AlreadySettled,
            Reason::NotFound => Wire::NotFound,
            Reason::Unauthenticated => Wire::Unauthenticated,
            Reason::PermissionDenied => Wire::PermissionDenied,
            Reason::StoreUnavailable => Wire::StoreUnavailable,
            Reason::KeepaliveReplaced => Wire::KeepaliveReplaced,
            Reason::NotAwaitingApproval => Wire::NotAwaitingApproval,
            Reason::UnsettledAtMostOnce => Wire::UnsettledAtMostOnce,
            Reason::MissingScope => Wire::MissingScope,
            Reason::RateLimited => Wire::RateLimited,
            Reason::Internal => Wire::Internal,
            Reason::BudgetExhausted => Wire::BudgetExhausted,
            Reason::UnreadableRecord => Wire::UnreadableRecord,
            Reason::Other(_) => return None,
        })
    }

    /// The reason as the server spells it, e.g. `LEASE_LOST`.
    pub fn as_str(&self) -> &str {
        match self {
            Reason::Other(other) => other,
            known => known.wire().map(Wire::wire_name).unwrap_or_default(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server (or the transport under it) answered with a non-OK gRPC status.
    #[error("{}", describe(.0))]
    Status(Box<tonic::Status>),
    /// No answer within the per-call timeout (counts as DEADLINE_EXCEEDED).
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The circuit breaker is open after consecutive transport failures: the call was not sent.
    #[error("circuit open after consecutive failures; next probe in {0:?}")]
    CircuitOpen(Duration),
    /// The server's answer lacks a field the contract promises.
    #[error("malformed answer: {0}")]
    Protocol(&'static str),
    /// The arguments could not be fingerprinted (not serializable to I-JSON).
    #[error("cannot fingerprint the arguments: {0}")]
    Fingerprint(String),
}

fn describe(status: &tonic::Status) -> String {
    match status.get_details_error_info() {
        Some(info) => format!("{:?} {}: {}", status.code(), info.reason, status.message()),
        None => format!("{:?}: {}", status.code(), status.message()),
    }
}

impl From<tonic::Status> for Error {
    fn from(status: tonic::Status) -> Self {
        Error::Status(Box::new(status))
    }
}

impl Error {
    /// The gRPC code: the server's, or the one the client-side failure stands for.
    pub fn code(&self) -> Code {
        match self {
            Error::Status(s) => s.code(),
            Error::Timeout(_) => Code::DeadlineExceeded,
            Error::CircuitOpen(_) => Code::Unavailable,
            Error::Protocol(_) => Code::Internal,
            Error::Fingerprint(_) => Code::InvalidArgument,
        }
    }

    /// The `ErrorInfo` reason the server attached, if the error came from an Oncekey server.
    pub fn reason(&self) -> Option<Reason> {
        match self {
            Error::Status(s) => s
                .get_details_error_info()
                .filter(|i| i.domain == oncekey_api::ERROR_DOMAIN)
                .map(|i| Reason::parse(&i.reason)),
            _ => None,
        }
    }

    /// The field a `google.rpc.BadRequest` names (INVALID_ARGUMENT only).
    pub fn bad_field(&self) -> Option<String> {
        match self {
            Error::Status(s) => s
                .get_details_bad_request()
                .and_then(|b| b.field_violations.into_iter().next())
                .map(|v| v.field),
            _ => None,
        }
    }

    /// The underlying gRPC status, when there is one.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Error::Status(s) => Some(s),
            _ => None,
        }
    }

    /// True when the server said LEASE_LOST: the token is no longer the record's current one.
    pub fn is_lease_lost(&self) -> bool {
        self.reason() == Some(Reason::LeaseLost)
    }

    /// True for failures that resending the identical request may cure: UNAVAILABLE,
    /// DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, and connection errors. Never INVALID_ARGUMENT,
    /// UNAUTHENTICATED, PERMISSION_DENIED or FAILED_PRECONDITION, and never an open circuit.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Status(s) => match s.code() {
                Code::Unavailable | Code::DeadlineExceeded | Code::ResourceExhausted => true,
                Code::InvalidArgument
                | Code::Unauthenticated
                | Code::PermissionDenied
                | Code::FailedPrecondition => false,
                _ => is_connection_error(s),
            },
            Error::Timeout(_) => true,
            Error::CircuitOpen(_) | Error::Protocol(_) | Error::Fingerprint(_) => false,
        }
    }

    /// The server's `grpc-retry-pushback-ms`: `Some(Some(d))` asks to wait `d` before retrying,
    /// `Some(None)` (a negative or malformed value) asks not to retry at all.
    pub fn pushback(&self) -> Option<Option<Duration>> {
        let value = self.status()?.metadata().get(RETRY_PUSHBACK_HEADER)?;
        Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .and_then(|ms| u64::try_from(ms).ok())
                .map(Duration::from_millis),
        )
    }
}

/// A status made from a transport failure (connection refused, reset, broken pipe, ...).
fn is_connection_error(status: &tonic::Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(e) = source {
        if e.is::<std::io::Error>() || e.is::<tonic::transport::Error>() {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::ErrorDetails;

    fn with_reason(code: Code, reason: &str) -> Error {
        let details = ErrorDetails::with_error_info(
            reason,
            oncekey_api::ERROR_DOMAIN,
            std::collections::HashMap::new(),
        );
        tonic::Status::with_error_details(code, "m", details).into()
    }

    #[test]
    fn reads_code_and_reason() {
        let e = with_reason(Code::FailedPrecondition, "LEASE_LOST");
        assert_eq!(e.code(), Code::FailedPrecondition);
        assert_eq!(e.reason(), Some(Reason::LeaseLost));
        assert!(e.is_lease_lost() && !e.is_transient());
        let replaced = with_reason(Code::Aborted, "KEEPALIVE_REPLACED");
        assert_eq!(replaced.reason(), Some(Reason::KeepaliveReplaced));
        assert!(!replaced.is_lease_lost() && !replaced.is_transient());
        assert_eq!(Reason::KeepaliveReplaced.as_str(), "KEEPALIVE_REPLACED");
        for reason in [
            Reason::NotAwaitingApproval,
            Reason::UnsettledAtMostOnce,
            Reason::MissingScope,
        ] {
            assert_eq!(Reason::parse(reason.as_str()), reason);
        }
        let missing = with_reason(Code::PermissionDenied, "MISSING_SCOPE");
        assert_eq!(missing.reason(), Some(Reason::MissingScope));
        assert!(!missing.is_transient());
        assert_eq!(
            with_reason(Code::NotFound, "SOMETHING_NEW").reason(),
            Some(Reason::Other("SOMETHING_NEW".into()))
        );
    }

    #[test]
    fn every_reason_of_the_proto_has_a_variant_and_round_trips() {
        for n in 1.. {
            let Ok(wire) = Wire::try_from(n) else { break };
            let reason = Reason::parse(wire.wire_name());
            assert!(
                !matches!(reason, Reason::Other(_)),
                "{wire:?} has no variant"
            );
            assert_eq!(reason.wire(), Some(wire));
            assert_eq!(reason.as_str(), wire.wire_name());
        }
    }

    #[test]
    fn classifies_transient_codes() {
        for code in [
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::ResourceExhausted,
        ] {
            assert!(Error::from(tonic::Status::new(code, "x")).is_transient());
        }
        for code in [
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::FailedPrecondition,
            Code::NotFound,
            Code::Internal,
        ] {
            assert!(!Error::from(tonic::Status::new(code, "x")).is_transient());
        }
        assert!(Error::Timeout(Duration::from_secs(1)).is_transient());
        assert!(!Error::CircuitOpen(Duration::from_secs(1)).is_transient());
    }

    #[test]
    fn reads_pushback() {
        let mut s = tonic::Status::unavailable("busy");
        s.metadata_mut()
            .insert(RETRY_PUSHBACK_HEADER, "250".parse().unwrap());
        assert_eq!(
            Error::from(s).pushback(),
            Some(Some(Duration::from_millis(250)))
        );
        let mut s = tonic::Status::unavailable("go away");
        s.metadata_mut()
            .insert(RETRY_PUSHBACK_HEADER, "-1".parse().unwrap());
        assert_eq!(Error::from(s).pushback(), Some(None));
        assert_eq!(
            Error::from(tonic::Status::unavailable("x")).pushback(),
            None
        );
    }
}
