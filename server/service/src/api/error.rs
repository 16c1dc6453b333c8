//! The one place where errors become gRPC statuses: every non-OK status carries exactly one
//! `google.rpc.ErrorInfo` (domain `oncekey`), and INVALID_ARGUMENT also a `google.rpc.BadRequest`
//! naming the field (docs/api.md#errors). Store failures are logged here, once.
//!
//! Messages never contain another tenant's data, a token, a key or a stored body.

use crate::engine::EngineError;
use crate::ledger::LedgerError;
use crate::store::StoreError;
use oncekey_api::v1::ErrorReason as Reason;
use oncekey_api::ERROR_DOMAIN;
use std::collections::HashMap;
use std::time::Duration;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

/// An error answered to a caller.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A field is missing, malformed or out of range.
    #[error("invalid {field}: {description}")]
    InvalidField {
        /// The request field, e.g. `namespace` or `result.body`.
        field: String,
        /// What is wrong with it.
        description: String,
    },
    /// A field exceeds its size limit.
    #[error("{field} is too large: {description}")]
    TooLarge {
        /// The request field.
        field: String,
        /// The limit it exceeds.
        description: String,
    },
    /// No valid credentials.
    #[error("{0}")]
    Unauthenticated(&'static str),
    /// Valid credentials that do not allow the request.
    #[error("{0}")]
    PermissionDenied(&'static str),
    /// Valid credentials whose token lacks the scope the RPC needs.
    #[error("{rpc} needs a token with the {scope} scope")]
    MissingScope {
        /// The scope the token lacks: `ledger`, `approve` or `admin`.
        scope: &'static str,
        /// The RPC, e.g. `Approve`.
        rpc: String,
    },
    /// The engine refused or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A newer KeepAlive stream for the same lease took over from this one: the lease is still
    /// kept alive, by that stream; this one must not be reopened.
    #[error("a newer keep-alive stream for this lease replaced this one")]
    KeepAliveReplaced,
    /// The tenant is over an admission limit (`limit`: `rate` or `inflight`; a Claim refused for
    /// the held-claims bound, `held`, comes as `Engine(HeldLimit)`); come back after
    /// `retry_after`.
    #[error("too many requests from this tenant ({limit} limit); retry in {} ms", pushback_ms(*.retry_after))]
    RateLimited {
        /// Which limit: `rate` or `inflight`.
        limit: &'static str,
        /// When to come back.
        retry_after: Duration,
    },
}

impl ApiError {
    /// A malformed field.
    pub fn invalid(field: impl Into<String>, description: impl Into<String>) -> Self {
        ApiError::InvalidField {
            field: field.into(),
            description: description.into(),
        }
    }

    /// A field over its limit.
    pub fn too_large(field: impl Into<String>, description: impl Into<String>) -> Self {
        ApiError::TooLarge {
            field: field.into(),
            description: description.into(),
        }
    }
}

impl From<LedgerError> for ApiError {
    fn from(e: LedgerError) -> Self {
        ApiError::Engine(EngineError::Ledger(e))
    }
}

fn status(code: Code, reason: Reason, message: String, field: Option<(&str, &str)>) -> Status {
    let mut metadata = HashMap::new();
    if let Some((field, _)) = field {
        metadata.insert("field".to_string(), field.to_string());
    }
    let mut details = ErrorDetails::with_error_info(reason.wire_name(), ERROR_DOMAIN, metadata);
    if let Some((field, description)) = field {
        details.add_bad_request_violation(field, description);
    }
    Status::with_error_details(code, message, details)
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Self {
        let message = e.to_string();
        match &e {
            ApiError::InvalidField { field, description } => status(
                Code::InvalidArgument,
                Reason::InvalidField,
                message,
                Some((field, description)),
            ),
            ApiError::TooLarge { field, description } => status(
                Code::InvalidArgument,
                Reason::TooLarge,
                message,
                Some((field, description)),
            ),
            ApiError::Unauthenticated(_) => status(
                Code::Unauthenticated,
                Reason::Unauthenticated,
                message,
                None,
            ),
            ApiError::PermissionDenied(_) => status(
                Code::PermissionDenied,
                Reason::PermissionDenied,
                message,
                None,
            ),
            ApiError::MissingScope { scope, .. } => {
                let metadata = HashMap::from([("scope".to_string(), scope.to_string())]);
                let details = ErrorDetails::with_error_info(
                    Reason::MissingScope.wire_name(),
                    ERROR_DOMAIN,
                    metadata,
                );
                Status::with_error_details(Code::PermissionDenied, message, details)
            }
            ApiError::Engine(engine) => engine_status(engine, message),
            ApiError::KeepAliveReplaced => {
                status(Code::Aborted, Reason::KeepaliveReplaced, message, None)
            }
            ApiError::RateLimited { limit, retry_after } => {
                rate_limited(limit, *retry_after, message)
            }
        }
    }
}

/// The header (a trailer of the answer) that tells gRPC clients when to retry (gRFC A6).
pub const RETRY_PUSHBACK_HEADER: &str = "grpc-retry-pushback-ms";

/// A delay in whole milliseconds, rounded up (coming back early would be refused again).
fn pushback_ms(delay: Duration) -> u64 {
    u64::try_from(delay.as_nanos().div_ceil(1_000_000))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// RESOURCE_EXHAUSTED `RATE_LIMITED`: ErrorInfo naming the limit, RetryInfo and the pushback
/// trailer, both saying when to come back.
fn rate_limited(limit: &str, retry_after: Duration, message: String) -> Status {
    let ms = pushback_ms(retry_after);
    let metadata = HashMap::from([("limit".to_string(), limit.to_string())]);
    let mut details =
        ErrorDetails::with_error_info(Reason::RateLimited.wire_name(), ERROR_DOMAIN, metadata);
    details.set_retry_info(Some(Duration::from_millis(ms)));
    let mut trailers = MetadataMap::new();
    trailers.insert(RETRY_PUSHBACK_HEADER, MetadataValue::from(ms));
    Status::with_error_details_and_metadata(Code::ResourceExhausted, message, details, trailers)
}

fn engine_status(e: &EngineError, message: String) -> Status {
    match e {
        EngineError::Ledger(LedgerError::KeyReused) => {
            status(Code::FailedPrecondition, Reason::KeyReused, message, None)
        }
        EngineError::Ledger(LedgerError::LeaseLost) => {
            status(Code::FailedPrecondition, Reason::LeaseLost, message, None)
        }
        EngineError::Ledger(LedgerError::AlreadySettled) => status(
            Code::FailedPrecondition,
            Reason::AlreadySettled,
            message,
            None,
        ),
        EngineError::Ledger(LedgerError::NotAwaitingApproval) => status(
            Code::FailedPrecondition,
            Reason::NotAwaitingApproval,
            message,
            None,
        ),
        EngineError::Ledger(LedgerError::UnsettledAtMostOnce) => status(
            Code::FailedPrecondition,
            Reason::UnsettledAtMostOnce,
            message,
            None,
        ),
        EngineError::NotFound | EngineError::Ledger(LedgerError::NotFound) => {
            status(Code::NotFound, Reason::NotFound, message, None)
        }
        EngineError::HeldLimit { retry_after } => rate_limited(
            "held",
            Duration::from_millis(u64::try_from(*retry_after).unwrap_or(1)),
            message,
        ),
        EngineError::BudgetExhausted { parent, exhausted } => {
            let metadata = HashMap::from([
                ("parent_namespace".to_string(), parent.namespace.clone()),
                ("parent_key".to_string(), parent.key.clone()),
                ("limit".to_string(), exhausted.limit.clone()),
                ("spent".to_string(), exhausted.spent.to_string()),
                ("max".to_string(), exhausted.max.to_string()),
            ]);
            let details = ErrorDetails::with_error_info(
                Reason::BudgetExhausted.wire_name(),
                ERROR_DOMAIN,
                metadata,
            );
            Status::with_error_details(Code::FailedPrecondition, message, details)
        }
        EngineError::Contention => {
            tracing::warn!("conditional writes kept conflicting on one record");
            status(Code::Unavailable, Reason::StoreUnavailable, message, None)
        }
        EngineError::Store(StoreError::Unavailable(detail) | StoreError::Internal(detail)) => {
            tracing::error!(error = %detail, "store failure");
            status(
                Code::Unavailable,
                Reason::StoreUnavailable,
                "the store is unavailable; retry with the same key".into(),
                None,
            )
        }
        EngineError::Store(StoreError::Unreadable { key_id, cause }) => {
            tracing::error!(key_id = %key_id, cause = cause.as_str(), "a sealed record cannot be opened");
            let metadata = HashMap::from([
                ("key_id".to_string(), key_id.clone()),
                ("cause".to_string(), cause.as_str().to_string()),
            ]);
            let details = ErrorDetails::with_error_info(
                Reason::UnreadableRecord.wire_name(),
                ERROR_DOMAIN,
                metadata,
            );
            Status::with_error_details(
                Code::DataLoss,
                format!(
                    "the record's sealed fields cannot be opened: {}",
                    StoreError::Unreadable {
                        key_id: key_id.clone(),
                        cause: *cause
                    }
                ),
                details,
            )
        }
        EngineError::Store(StoreError::Corrupt(detail)) => {
            tracing::error!(error = %detail, "corrupt record in store");
            status(
                Code::Internal,
                Reason::Internal,
                "the stored record could not be read".into(),
                None,
            )
        }
    }
}
