//! Classifies driver errors by what they mean for the caller: the request was refused (a bug or a
//! missing schema), it surely never ran (no connection), or it may have run (a timeout or a broken
//! connection after sending: the outcome of a conditional write is then unknown).
//!
//! Only classification lives here; settling an unknown outcome is `mod.rs`'s job.

use oncekey_store::StoreError;
use scylla::errors::{DbError, ExecutionError, RequestAttemptError};

/// What a failed request means.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The cluster refused the statement itself (invalid, unauthorized, unknown table): retrying
    /// will not help.
    Refused(String),
    /// The request never reached a node that could run it.
    NotSent(String),
    /// The request may have run: a conditional write's outcome is unknown until read at SERIAL.
    MaybeRan(String),
}

impl Failure {
    /// The error a read (or a settled write) reports for this failure.
    pub(crate) fn into_store_error(self) -> StoreError {
        match self {
            Failure::Refused(msg) => StoreError::Internal(msg),
            Failure::NotSent(msg) | Failure::MaybeRan(msg) => StoreError::Unavailable(msg),
        }
    }
}

/// Classifies an execution error.
pub(crate) fn classify(error: &ExecutionError) -> Failure {
    let msg = error.to_string();
    match error {
        ExecutionError::BadQuery(_) => Failure::Refused(msg),
        ExecutionError::EmptyPlan | ExecutionError::ConnectionPoolError(_) => Failure::NotSent(msg),
        ExecutionError::PrepareError(_) => Failure::NotSent(msg),
        ExecutionError::LastAttemptError(attempt) => classify_attempt(attempt, msg),
        // A client-side timeout: the request may be running still.
        ExecutionError::RequestTimeout(_) => Failure::MaybeRan(msg),
        _ => Failure::MaybeRan(msg),
    }
}

/// Classifies the error of one attempt (`msg`: the message to carry).
pub(crate) fn classify_attempt(error: &RequestAttemptError, msg: String) -> Failure {
    match error {
        RequestAttemptError::SerializationError(_)
        | RequestAttemptError::CqlRequestSerialization(_) => Failure::Refused(msg),
        RequestAttemptError::UnableToAllocStreamId => Failure::NotSent(msg),
        RequestAttemptError::DbError(db, _) => classify_db(db, msg),
        _ => Failure::MaybeRan(msg),
    }
}

fn classify_db(error: &DbError, msg: String) -> Failure {
    match error {
        DbError::SyntaxError
        | DbError::Invalid
        | DbError::AlreadyExists { .. }
        | DbError::FunctionFailure { .. }
        | DbError::AuthenticationError
        | DbError::Unauthorized
        | DbError::ConfigError
        | DbError::ProtocolError => Failure::Refused(msg),
        // The coordinator turned the request away before doing anything.
        DbError::Overloaded | DbError::IsBootstrapping | DbError::RateLimitReached { .. } => {
            Failure::NotSent(msg)
        }
        // WriteTimeout { write_type: Cas } is the classic uncertain LWT outcome; Unavailable,
        // read timeouts and failures are settled the same way: a serial read costs little and
        // is right whatever phase of Paxos failed.
        _ => Failure::MaybeRan(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scylla::errors::WriteType;
    use scylla::statement::Consistency;

    fn db(error: DbError) -> ExecutionError {
        ExecutionError::LastAttemptError(RequestAttemptError::DbError(error, "x".into()))
    }

    #[test]
    fn cas_write_timeout_is_uncertain() {
        let timeout = db(DbError::WriteTimeout {
            consistency: Consistency::Serial,
            received: 0,
            required: 1,
            write_type: WriteType::Cas,
        });
        assert!(matches!(classify(&timeout), Failure::MaybeRan(_)));
        assert!(matches!(
            classify(&ExecutionError::RequestTimeout(
                std::time::Duration::from_secs(1)
            )),
            Failure::MaybeRan(_)
        ));
    }

    #[test]
    fn refusals_and_unsent_requests_are_certain() {
        assert!(matches!(
            classify(&db(DbError::Invalid)),
            Failure::Refused(_)
        ));
        assert!(matches!(
            classify(&db(DbError::Overloaded)),
            Failure::NotSent(_)
        ));
        assert!(matches!(
            classify(&ExecutionError::EmptyPlan),
            Failure::NotSent(_)
        ));
        assert!(matches!(
            Failure::NotSent("x".into()).into_store_error(),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            Failure::Refused("x".into()).into_store_error(),
            StoreError::Internal(_)
        ));
    }
}
