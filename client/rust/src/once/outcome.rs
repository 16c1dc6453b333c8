//! What a run of [`super::Once`] comes to: the output and where it came from ([`Done`]), why it
//! did not return one ([`OnceError`]), and how the closure's own error settles the operation
//! ([`Failure`]).

use crate::error::Error;
use crate::types::{Disposition, Record, StoredError, StoredResult};
use std::fmt;

/// What a failed run means for the operation: implemented by the error type of the closure given to
/// [`Once::run`](super::Once::run).
///
/// ```
/// use oncekey_client::{Disposition, Failure};
///
/// #[derive(Debug, thiserror::Error)]
/// enum ChargeError {
///     #[error("card declined")]
///     Declined,
///     #[error("provider unreachable")]
///     Unreachable,
///     #[error("invalid amount")]
///     InvalidAmount,
/// }
///
/// impl Failure for ChargeError {
///     fn disposition(&self) -> Disposition {
///         match self {
///             ChargeError::Declined => Disposition::Final, // replayed to every retry
///             ChargeError::Unreachable => Disposition::Retryable, // the next run tries again
///             ChargeError::InvalidAmount => Disposition::Abandon, // nothing happened: forget it
///         }
///     }
/// }
/// ```
pub trait Failure: fmt::Display {
    /// How the failure settles the operation.
    fn disposition(&self) -> Disposition;

    /// The error code stored with the failure (default 0).
    fn code(&self) -> i32 {
        0
    }

    /// Opaque details stored with the failure (at most 64 KiB; default none).
    fn details(&self) -> Vec<u8> {
        Vec::new()
    }
}

/// Why [`Once::run`](super::Once::run) did not return the operation's output.
#[derive(Debug, thiserror::Error)]
pub enum OnceError<E> {
    /// The closure ran and failed; the failure was recorded with its disposition.
    #[error("the operation failed: {0}")]
    Operation(E),
    /// The operation had failed for good earlier; this is its stored error (nothing ran).
    #[error("the operation failed earlier: {0}")]
    Failed(StoredError),
    /// Another holder was still performing the operation when the wait timeout ran out.
    #[error("the operation is still in progress elsewhere")]
    InProgress {
        /// The record at the last Claim.
        record: Box<Record>,
    },
    /// An at-most-once operation's holder vanished and its outcome is unknown. Check the outside
    /// world by the key, then call [`Once::reconcile`](super::Once::reconcile).
    #[error("the operation's outcome is unknown and needs reconciliation")]
    NeedsReconciliation {
        /// The record (status `Unknown`).
        record: Box<Record>,
    },
    /// The operation waits for an approval that did not come within the wait timeout (nothing
    /// ran). Run it again once someone Approved it; a Reject makes it [`OnceError::Failed`].
    #[error("the operation awaits approval")]
    AwaitingApproval {
        /// The record (status `AwaitingApproval`).
        record: Box<Record>,
    },
    /// The lease was lost while the closure ran (another holder took the operation over, or
    /// settled it with this lease's token), so its outcome was not recorded: the Complete or Fail
    /// was refused with LEASE_LOST (or ALREADY_SETTLED). The side effect may have happened; the fencing token is how
    /// downstream systems tell the holders apart.
    ///
    /// Also when every lease acquired within the wait timeout had run out (on this machine's
    /// clock) before the Claim's answer arrived: the closure then never ran (`operation` is
    /// `None`), and each such lease was released as RETRY.
    #[error("the lease (token {token}) was lost before the outcome was recorded")]
    LeaseLost {
        /// The fencing token of the lost lease.
        token: u64,
        /// The closure's error, if it failed.
        operation: Option<E>,
    },
    /// The operation had succeeded earlier, but its stored result is not JSON of the expected type.
    #[error("the stored result cannot be decoded: {error}")]
    Decode {
        /// Why decoding failed.
        error: serde_json::Error,
        /// The stored result.
        result: Box<StoredResult>,
    },
    /// The intent guard refused the operation: the same arguments were claimed under the keys
    /// in `matches` within the namespace's window (a made-up key?). Nothing ran. Use the other
    /// key, or [`Once::repeat_intent`](super::Once::repeat_intent) if the repeat is deliberate.
    #[error("the same arguments were claimed under another key ({})", matches.first().map_or("", |m| m.key.as_str()))]
    DuplicateIntent {
        /// The other keys, most recent first.
        matches: Vec<crate::IntentMatch>,
    },
    /// The closure succeeded but its output cannot be serialized; the operation was recorded as a
    /// final failure.
    #[error("the output cannot be serialized: {0}")]
    Encode(serde_json::Error),
    /// The Claim failed (e.g. KEY_REUSED, UNAUTHENTICATED, or the server stayed unreachable).
    #[error(transparent)]
    Rpc(Error),
    /// The closure finished but its outcome could not be recorded; the lease will run out and the
    /// operation will be acquired again (at-least-once) or need reconciliation (at-most-once).
    #[error("the outcome could not be recorded: {error}")]
    Unsettled {
        /// Why the Complete or Fail failed.
        error: Error,
        /// The closure's error, if it failed.
        operation: Option<E>,
    },
}

/// The output of an operation and where it came from.
#[derive(Debug, Clone)]
pub struct Done<T> {
    /// The output.
    pub value: T,
    /// True when the output is a stored result replayed from an earlier run (the closure did not
    /// run this time).
    pub replayed: bool,
    /// The SUCCEEDED record.
    pub record: Record,
    /// Other live keys of the namespace claimed with the same arguments within the intent
    /// window, when the intent guard warned (or let a deliberate repeat through) as this run
    /// acquired the operation; empty otherwise.
    pub intent_matches: Vec<crate::IntentMatch>,
}
