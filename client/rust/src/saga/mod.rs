//! Sagas: a parent operation whose steps are child operations, each with a compensation, run
//! once each through the ledger (docs/api.md, "Client sagas").
//!
//! The saga is an at-most-once operation claimed at [`SagaBuilder::start`] and kept alive by the
//! server's KeepAlive stream while this process runs it. Each [`Saga::step`] is the child
//! `key.child(step)` run once ([`crate::Client::once`]); its output is stored, so a re-run
//! replays it. When a step fails for good, the completed steps' compensations run in reverse
//! order, each the child `compensate-STEP` run once with the step's output as its arguments, and
//! the saga fails for good (code 409). A process that dies mid-saga leaves the saga's lease to
//! lapse; starting the saga again with the same key reconciles it and resumes: the caller runs the
//! same steps again, completed steps and compensations replay, and only what had not happened
//! runs. A compensation that fails for good leaves the saga UNKNOWN, for an operator.

mod error;
mod rollback;
mod start;

pub use error::{Cause, SagaError};
pub use start::{SagaBuilder, SagaStart, DEFAULT_SAGA_RETENTION};

use crate::key::OperationKey;
use crate::lease::{KeepAliveGuard, Lease};
use crate::once::{Failure, Once, OnceError};
use crate::types::{Disposition, StoredError, StoredResult};
use error::{unwrap_once, Settled};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

/// The prefix of a compensation's step name: the compensation of step `s` is `compensate-s`.
const COMPENSATE: &str = "compensate-";

/// A compensation waiting for its rollback: the step's stored output, already bound.
type Compensation<'a, E> =
    Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = Result<(), E>> + Send + 'a>> + Send + 'a>;

/// A completed step: its name, its output as stored (the compensation's arguments) and its
/// compensation.
struct Completed<'a, E> {
    step: String,
    output: serde_json::Value,
    compensate: Compensation<'a, E>,
}

/// A running saga, holding its lease (kept alive until it ends or is dropped) and the
/// compensations of its completed steps. Dropping it without [`Saga::finish`] lets its lease
/// lapse; a later start resumes it.
pub struct Saga<'a, E> {
    builder: SagaBuilder,
    owner: String,
    resumed: bool,
    lease: Lease,
    /// `None` once the saga has ended in this process.
    keep_alive: Option<KeepAliveGuard>,
    completed: Vec<Completed<'a, E>>,
    names: HashSet<String>,
}

impl<E> fmt::Debug for Saga<'_, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let steps: Vec<&str> = self.completed.iter().map(|c| c.step.as_str()).collect();
        f.debug_struct("Saga")
            .field("key", &self.builder.key)
            .field("token", &self.lease.fencing_token())
            .field("resumed", &self.resumed)
            .field("completed", &steps)
            .field("ended", &self.keep_alive.is_none())
            .finish()
    }
}

impl<'a, E: Failure> Saga<'a, E> {
    /// The saga's key.
    pub fn key(&self) -> &OperationKey {
        &self.builder.key
    }

    /// The saga's lease (its fencing token, whether it was lost).
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// True when an earlier run of this saga had acquired it (it died, or was released after a
    /// retryable failure): its completed steps will replay.
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    /// The names of the steps completed so far in this run (replayed ones included), in order.
    pub fn completed_steps(&self) -> Vec<&str> {
        self.completed.iter().map(|c| c.step.as_str()).collect()
    }

    /// Runs step `name` once: the child `key.child(name)` with `args` as its fingerprinted
    /// arguments. `effect` runs (with the step's lease) unless an earlier run completed the step,
    /// whose stored output is then returned. `compensate` is kept to undo the step with its
    /// output if a later step fails for good.
    ///
    /// When `effect` fails for good (any [`Failure::disposition`] but `Retryable`), or had failed
    /// in an earlier run, the saga rolls back and this returns [`SagaError::RolledBack`]; a
    /// retryable failure releases the step and the saga ([`SagaError::Retryable`]).
    ///
    /// Steps run at least once each in the ledger's sense: a process killed in the middle of
    /// `effect` runs it again on resume (once the step's lease lapses). Pass the lease's fencing
    /// token or the step's key downstream to make that harmless.
    pub async fn step<A, T, F, Fut, C, CFut>(
        &mut self,
        name: &str,
        args: &A,
        effect: F,
        compensate: C,
    ) -> Result<T, SagaError<E>>
    where
        A: Serialize + ?Sized,
        T: Serialize + DeserializeOwned + Send + 'a,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: FnOnce(T) -> CFut + Send + 'a,
        CFut: Future<Output = Result<(), E>> + Send + 'a,
    {
        self.check_running()?;
        let child = self.step_key(name)?;
        let outcome = self
            .child_once(&child, args)
            .run(|lease| async move { effect(lease).await.map_err(Settled) })
            .await;
        match outcome {
            Ok(value) => {
                // The compensation gets the output as stored, as a resumed run would.
                let output = serde_json::to_value(&value).map_err(SagaError::Encode)?;
                let stored: T =
                    serde_json::from_value(output.clone()).map_err(|error| SagaError::Step {
                        step: name.into(),
                        error: OnceError::Decode {
                            error,
                            result: Box::new(StoredResult::json(&output).unwrap_or_default()),
                        },
                    })?;
                self.names.insert(name.into());
                self.completed.push(Completed {
                    step: name.into(),
                    output,
                    compensate: Box::new(move || Box::pin(compensate(stored))),
                });
                Ok(value)
            }
            Err(error) => {
                self.names.insert(name.into());
                match unwrap_once(error) {
                    OnceError::Operation(e) if e.disposition() == Disposition::Retryable => {
                        self.release(name, &e.to_string()).await;
                        Err(SagaError::Retryable {
                            step: name.into(),
                            error: e,
                        })
                    }
                    OnceError::Operation(e) => self.roll_back(name, Cause::Failed(e)).await,
                    OnceError::Failed(stored) => self.roll_back(name, Cause::Stored(stored)).await,
                    // Recorded as a final failure of the step.
                    OnceError::Encode(e) => {
                        let stored = StoredError {
                            message: format!("the output cannot be serialized: {e}"),
                            ..StoredError::default()
                        };
                        self.roll_back(name, Cause::Stored(stored)).await
                    }
                    other => Err(self.interrupted(name, other).await),
                }
            }
        }
    }

    /// Completes the saga with `output` (stored, and returned by every later start as
    /// [`SagaStart::Finished`]).
    pub async fn finish<T: Serialize + ?Sized>(mut self, output: &T) -> Result<(), SagaError<E>> {
        self.check_running()?;
        let result = StoredResult::json(output).map_err(SagaError::Encode)?;
        // Stop renewing before settling, so the keep-alive never sees our own settle.
        self.keep_alive = None;
        let token = self.lease.fencing_token();
        match self
            .builder
            .client
            .complete(self.key(), token, result)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_lease_lost() => Err(SagaError::LeaseLost),
            Err(e) => Err(SagaError::Rpc(e)),
        }
    }

    fn check_running(&self) -> Result<(), SagaError<E>> {
        if self.keep_alive.is_none() {
            return Err(SagaError::Ended);
        }
        if self.lease.is_lost() {
            return Err(SagaError::LeaseLost);
        }
        Ok(())
    }

    fn step_key(&self, name: &str) -> Result<OperationKey, SagaError<E>> {
        let invalid = |reason: &str| SagaError::InvalidStep {
            step: name.into(),
            reason: reason.into(),
        };
        if name.starts_with(COMPENSATE) {
            return Err(invalid(
                "names starting with `compensate-` are the compensations'",
            ));
        }
        if self.names.contains(name) {
            return Err(invalid("already a step of this saga"));
        }
        // The compensation's key must fit too, or the step could never be undone.
        self.key()
            .child(&format!("{COMPENSATE}{name}"))
            .map_err(|e| invalid(&e.to_string()))?;
        self.key().child(name).map_err(|e| invalid(&e.to_string()))
    }

    /// A step's (or compensation's) run: once each, kept as long as the saga.
    fn child_once<A: Serialize + ?Sized>(&self, key: &OperationKey, args: &A) -> Once {
        let mut once = self
            .builder
            .client
            .once(key, args)
            .owner(self.owner.clone())
            .retention(self.builder.retention)
            .wait_timeout(self.builder.wait_timeout);
        if let Some(ttl) = self.builder.lease_ttl {
            once = once.lease_ttl(ttl);
        }
        once
    }
}
