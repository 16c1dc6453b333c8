//! Why a saga did not finish: [`SagaError`], the failure that made it roll back ([`Cause`]), and
//! the wrapper that makes a step's failure settle its child operation for good unless the
//! caller's error calls itself retryable.

use crate::error::Error;
use crate::once::{Failure, OnceError};
use crate::types::{Disposition, Record, StoredError, StoredResult};
use std::fmt;

/// The failure of a step or of a compensation: the caller's error when it happened in this run,
/// or the error stored in the ledger when an earlier run recorded it (replayed on resume).
#[derive(Debug)]
pub enum Cause<E> {
    /// The closure failed in this run.
    Failed(E),
    /// An earlier run recorded this failure; this run replayed it.
    Stored(StoredError),
}

impl<E: fmt::Display> fmt::Display for Cause<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Failed(e) => e.fmt(f),
            Cause::Stored(stored) => f.write_str(&stored.message),
        }
    }
}

impl<E: Failure> Cause<E> {
    /// The error code: the caller's [`Failure::code`] or the stored one.
    pub fn code(&self) -> i32 {
        match self {
            Cause::Failed(e) => e.code(),
            Cause::Stored(stored) => stored.code,
        }
    }
}

/// Why a saga step, [`crate::Saga::finish`] or [`crate::SagaBuilder::start`] did not go on.
///
/// After any error the saga has ended in this process: start it again with the same key to
/// resume it (completed steps and compensations replay from the ledger).
#[derive(Debug, thiserror::Error)]
pub enum SagaError<E> {
    /// A step failed for good (now, or in an earlier run: `cause` then is the stored error). The
    /// completed steps' compensations ran, each once, in reverse order, and the saga failed for
    /// good (code 409, "rolled back: step STEP failed: CAUSE"): every later start answers this.
    #[error("rolled back: step {step} failed: {cause}")]
    RolledBack {
        /// The step that failed.
        step: String,
        /// Why it failed.
        cause: Cause<E>,
    },
    /// The compensation of `step` failed for good while rolling back after `failed_step` failed.
    /// The saga's lease is left to lapse, so the saga becomes UNKNOWN and is listed for operators
    /// (the console's Needs attention, `list_records` with status `Unknown`). A person must undo
    /// `step` by hand (or purge its compensation's record so that a re-run tries it again).
    #[error("the compensation of step {step} failed ({cause}) while rolling back after step {failed_step} failed: the saga needs reconciliation")]
    NeedsReconciliation {
        /// The step whose compensation failed (its child `compensate-STEP`).
        step: String,
        /// The step whose failure started the rollback.
        failed_step: String,
        /// Why the compensation failed.
        cause: Cause<E>,
    },
    /// A step or compensation failed with an error whose [`Failure::disposition`] is
    /// [`Disposition::Retryable`]: it and the saga were released, and the next start runs it
    /// again (`step` is `compensate-STEP` for a compensation).
    #[error("step {step} failed and may be retried: {error}")]
    Retryable {
        /// The step (or `compensate-STEP`).
        step: String,
        /// The step's error.
        error: E,
    },
    /// A step or compensation did not reach a recorded outcome: another holder still had it when
    /// the wait ran out, its lease was lost, its outcome could not be recorded, its stored output
    /// cannot be decoded, or the ledger could not be reached. The saga was released (or, if the
    /// ledger could not be reached, left to lapse): start it again to resume.
    #[error("step {step} was interrupted: {error}")]
    Step {
        /// The step (or `compensate-STEP`).
        step: String,
        /// What the step's run answered.
        error: OnceError<E>,
    },
    /// Another process runs this saga now, and it did not end within the wait timeout.
    #[error("the saga is in progress elsewhere")]
    InProgress {
        /// The saga's record at the last Claim.
        record: Box<Record>,
    },
    /// The saga's lease was lost (another process reconciled it, or it was purged): this run
    /// must stop; nothing more was recorded for it.
    #[error("the saga's lease was lost")]
    LeaseLost,
    /// The step name is empty, too long for the key, used twice in the saga, or starts with
    /// `compensate-` (the compensations' names).
    #[error("invalid step name {step:?}: {reason}")]
    InvalidStep {
        /// The name given.
        step: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A step or finish after the saga ended in this process (it finished, rolled back or
    /// failed): start it again instead.
    #[error("the saga has ended; start it again with the same key")]
    Ended,
    /// The saga had finished earlier, but its stored output is not JSON of the expected type.
    #[error("the saga's stored output cannot be decoded: {error}")]
    Decode {
        /// Why decoding failed.
        error: serde_json::Error,
        /// The stored output.
        result: Box<StoredResult>,
    },
    /// The output given to [`crate::Saga::finish`], or a step's output, cannot be serialized.
    #[error("cannot serialize: {0}")]
    Encode(serde_json::Error),
    /// The intent guard refused the saga: its arguments were claimed under the other keys in
    /// `matches` within the namespace's window (another saga for the same intent?). Nothing ran.
    #[error("the saga's arguments were claimed under another key")]
    DuplicateIntent {
        /// The other keys, most recent first.
        matches: Vec<crate::IntentMatch>,
    },
    /// A Claim, Complete or Fail of the saga itself failed (e.g. KEY_REUSED, or the server stayed
    /// unreachable).
    #[error(transparent)]
    Rpc(Error),
}

/// A step's or compensation's error as the ledger settles it: for good ([`Disposition::Final`],
/// also for `Abandon`: a step's failure must stay on record so that a resumed saga compensates
/// instead of running it again), unless the caller's error calls itself retryable.
pub(crate) struct Settled<E>(pub(crate) E);

impl<E: fmt::Display> fmt::Display for Settled<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: Failure> Failure for Settled<E> {
    fn disposition(&self) -> Disposition {
        match self.0.disposition() {
            Disposition::Retryable => Disposition::Retryable,
            Disposition::Final | Disposition::Abandon => Disposition::Final,
        }
    }

    fn code(&self) -> i32 {
        self.0.code()
    }

    fn details(&self) -> Vec<u8> {
        self.0.details()
    }
}

/// The caller's error back out of a child run's [`OnceError`].
pub(crate) fn unwrap_once<E>(error: OnceError<Settled<E>>) -> OnceError<E> {
    match error {
        OnceError::Operation(Settled(e)) => OnceError::Operation(e),
        OnceError::Failed(stored) => OnceError::Failed(stored),
        OnceError::InProgress { record } => OnceError::InProgress { record },
        OnceError::NeedsReconciliation { record } => OnceError::NeedsReconciliation { record },
        OnceError::AwaitingApproval { record } => OnceError::AwaitingApproval { record },
        OnceError::LeaseLost { token, operation } => OnceError::LeaseLost {
            token,
            operation: operation.map(|Settled(e)| e),
        },
        OnceError::Decode { error, result } => OnceError::Decode { error, result },
        OnceError::DuplicateIntent { matches } => OnceError::DuplicateIntent { matches },
        OnceError::Encode(e) => OnceError::Encode(e),
        OnceError::Rpc(e) => OnceError::Rpc(e),
        OnceError::Unsettled { error, operation } => OnceError::Unsettled {
            error,
            operation: operation.map(|Settled(e)| e),
        },
    }
}

/// What the saga's FAILED record keeps besides its message, so that a later start can say which
/// step failed and why.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct RollbackDetails {
    pub(crate) step: String,
    pub(crate) code: i32,
    pub(crate) message: String,
}

impl<E> SagaError<E> {
    /// The answer of a start that finds the saga FAILED: rolled back by an earlier run.
    pub(crate) fn replayed_rollback(stored: StoredError) -> Self {
        match serde_json::from_slice::<RollbackDetails>(&stored.details) {
            Ok(details) => SagaError::RolledBack {
                step: details.step,
                cause: Cause::Stored(StoredError {
                    code: details.code,
                    message: details.message,
                    details: Vec::new(),
                }),
            },
            // Failed by something else than a rollback of this client (e.g. by hand).
            Err(_) => SagaError::RolledBack {
                step: String::new(),
                cause: Cause::Stored(stored),
            },
        }
    }
}
