//! The one-call API: Claim an operation, run the side effect only when acquired while its lease is
//! kept alive, then Complete it with the serialized output or Fail it with the disposition the
//! caller's error chooses. Every other outcome comes back without running the side effect.
//!
//! This module decides nothing about transport retries (the client's layers do that) and never
//! changes the key or the arguments between attempts.

use crate::connect::Client;
use crate::error::{Error, Reason};
use crate::key::OperationKey;
use crate::lease::{self, Lease};
use crate::rpc::{Arguments, Claim};
use crate::types::{
    Claimed, Disposition, LeaseGrant, RecordStatus, Semantics, StoredError, StoredResult,
};
use oncekey_api::fingerprint::Fingerprint;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use std::time::{Duration, Instant};

mod outcome;
pub use outcome::{Done, Failure, OnceError};

/// The longest error message the server stores; longer ones are cut.
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// How long [`Once`] waits for an operation another holder is performing, by default.
pub const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(60);

/// One operation to perform at most once per key: built by [`Client::once`], finished by
/// [`Once::run`].
#[derive(Debug, Clone)]
#[must_use = "nothing happens until `run` is awaited"]
pub struct Once {
    client: Client,
    key: OperationKey,
    fingerprint: Result<Fingerprint, String>,
    lease_ttl: Option<Duration>,
    retention: Option<Duration>,
    semantics: Semantics,
    wait_timeout: Duration,
    owner: Option<String>,
    require_approval: bool,
    max_attempts: u32,
    intent_guard: crate::IntentGuard,
    repeat_intent: bool,
    budget: Option<crate::RunBudget>,
}

impl Client {
    /// Prepares `key` with arguments `args` (fingerprinted now, RFC 8785 + SHA-256) to be run once.
    ///
    /// `args` are the operation's significant arguments: the same intent must always give the same
    /// arguments, so keep attempt numbers, timestamps and trace ids out of them.
    pub fn once<A: Serialize + ?Sized>(&self, key: &OperationKey, args: &A) -> Once {
        Once {
            client: self.clone(),
            key: key.clone(),
            fingerprint: Client::fingerprint(args).map_err(|e| e.to_string()),
            lease_ttl: None,
            retention: None,
            semantics: Semantics::AtLeastOnce,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            owner: None,
            require_approval: false,
            max_attempts: 0,
            intent_guard: crate::IntentGuard::Default,
            repeat_intent: false,
            budget: None,
        }
    }
}

impl Once {
    /// The lease length (server default 30 s); the keep-alive renews it every third of that.
    /// A shorter lease lets another caller take over sooner after this process dies.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = Some(ttl);
        self
    }

    /// How long the outcome is kept after it settles (server default 24 h). It must outlast the
    /// longest time anyone may retry this operation.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Never run the side effect twice: if a holder vanishes mid-run, later runs get
    /// [`OnceError::NeedsReconciliation`] instead of running it again. The first Claim of a key
    /// fixes this.
    pub fn at_most_once(mut self) -> Self {
        self.semantics = Semantics::AtMostOnce;
        self
    }

    /// Nobody runs the operation before someone Approves it ([`Client::approve`]): `run` waits
    /// for the decision up to the wait timeout, then returns [`OnceError::AwaitingApproval`]. The
    /// first Claim of a key fixes this.
    pub fn require_approval(mut self) -> Self {
        self.require_approval = true;
        self
    }

    /// Caps the runs of the operation (reconciliations not counted; 0 is no cap): past it, a
    /// retryable failure is not retried again but fails for good with code 429 ("attempts
    /// exhausted", [`OnceError::Failed`]). The first Claim of a key fixes this.
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The intent guard for this operation ([`crate::Claim::intent_guard`]): stricter than the
    /// namespace's setting, never looser.
    pub fn intent_guard(mut self, guard: crate::IntentGuard) -> Self {
        self.intent_guard = guard;
        self
    }

    /// The repeat of another key's arguments is deliberate: a refusing intent guard lets it run.
    pub fn repeat_intent(mut self) -> Self {
        self.repeat_intent = true;
        self
    }

    /// Limits the operation's children (Claims naming its key as parent) to `budget`; the first
    /// Claim of the key fixes it.
    pub fn budget(mut self, budget: crate::RunBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// How long to wait for an operation another holder is performing, or for an approval
    /// (default 60 s), before returning [`OnceError::InProgress`] (or
    /// [`OnceError::AwaitingApproval`]); zero returns at once.
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// Names the holder in the record's `lease_owner` (default: the client's owner). A per-run
    /// suffix is added so that a Claim whose answer was lost can recognize its own lease.
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Runs `operation` unless the ledger already knows its outcome, and returns its output.
    ///
    /// - ACQUIRED: runs `operation` with the [`Lease`] while a background task keeps the lease
    ///   alive, then Completes with the output as JSON, or Fails with the error's
    ///   [`Failure::disposition`] and returns [`OnceError::Operation`].
    /// - COMPLETED: returns the stored output without running `operation`.
    /// - FAILED: returns [`OnceError::Failed`] with the stored error.
    /// - IN_PROGRESS: waits for the other holder (Claim with `wait`) up to the wait timeout; then
    ///   [`OnceError::InProgress`].
    /// - NEEDS_RECONCILIATION: returns [`OnceError::NeedsReconciliation`].
    /// - AWAITING_APPROVAL: waits for the decision (Claim with `wait`) up to the wait timeout;
    ///   then [`OnceError::AwaitingApproval`].
    pub async fn run<T, E, F, Fut>(self, operation: F) -> Result<T, OnceError<E>>
    where
        T: Serialize + DeserializeOwned,
        E: Failure,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.run_detailed(operation).await.map(|done| done.value)
    }

    /// Like [`Once::run`], also telling whether the output was replayed and giving the record.
    pub async fn run_detailed<T, E, F, Fut>(self, operation: F) -> Result<Done<T>, OnceError<E>>
    where
        T: Serialize + DeserializeOwned,
        E: Failure,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.execute(false, operation).await
    }

    /// Reconciles an at-most-once operation whose outcome is unknown: Claims it with `reconcile`
    /// and runs `reconciler`, which must find out from the outside world (by the key) what
    /// happened, and return the output (recorded as the result), or an error whose disposition
    /// settles it: [`Disposition::Retryable`] when the effect did not happen and may run again,
    /// [`Disposition::Final`] when it failed, [`Disposition::Abandon`] to forget the key.
    ///
    /// If the operation was settled meanwhile, its outcome is returned as [`Once::run`] would.
    pub async fn reconcile<T, E, F, Fut>(self, reconciler: F) -> Result<Done<T>, OnceError<E>>
    where
        T: Serialize + DeserializeOwned,
        E: Failure,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.execute(true, reconciler).await
    }

    async fn execute<T, E, F, Fut>(
        self,
        reconcile: bool,
        operation: F,
    ) -> Result<Done<T>, OnceError<E>>
    where
        T: Serialize + DeserializeOwned,
        E: Failure,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let fingerprint = self
            .fingerprint
            .clone()
            .map_err(|e| OnceError::Rpc(Error::Fingerprint(e)))?;
        let base = self.owner.as_deref().unwrap_or(&self.client.owner);
        let owner = format!("{base}#{:016x}", rand::random::<u64>());
        let mut claim = Claim::with_arguments(&self.key, Arguments::Fingerprint(fingerprint))
            .semantics(self.semantics)
            .owner(owner.clone())
            .reconcile(reconcile)
            .max_attempts(self.max_attempts)
            .intent_guard(self.intent_guard)
            .repeat_intent(self.repeat_intent);
        if let Some(budget) = &self.budget {
            claim = claim.budget(budget.clone());
        }
        if self.require_approval {
            claim = claim.require_approval();
        }
        if let Some(ttl) = self.lease_ttl {
            claim = claim.lease_ttl(ttl);
        }
        if let Some(retention) = self.retention {
            claim = claim.retention(retention);
        }
        let deadline = Instant::now() + self.wait_timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            claim = claim.wait(remaining);
            let answer = self.client.claim(&claim).await.map_err(OnceError::Rpc)?;
            match answer {
                Claimed::Acquired {
                    lease,
                    intent_matches,
                    ..
                } => {
                    if lapsed(&lease) {
                        self.release_lapsed(&lease, deadline).await?;
                        continue;
                    }
                    let mut done = self.acquired(lease, operation).await?;
                    done.intent_matches = intent_matches;
                    return Ok(done);
                }
                Claimed::Completed { result, record } => {
                    return match result.decode_json() {
                        Ok(value) => Ok(Done {
                            value,
                            replayed: true,
                            record,
                            intent_matches: Vec::new(),
                        }),
                        Err(error) => Err(OnceError::Decode {
                            error,
                            result: Box::new(result),
                        }),
                    }
                }
                Claimed::Failed { error, .. } => return Err(OnceError::Failed(error)),
                Claimed::NeedsReconciliation { record } => {
                    return Err(OnceError::NeedsReconciliation {
                        record: Box::new(record),
                    })
                }
                Claimed::AwaitingApproval { record } => {
                    // The server held the Claim until the wait ran out or the server drained.
                    if deadline.saturating_duration_since(Instant::now()).is_zero() {
                        return Err(OnceError::AwaitingApproval {
                            record: Box::new(record),
                        });
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Claimed::DuplicateIntent { matches } => {
                    return Err(OnceError::DuplicateIntent { matches })
                }
                Claimed::DryRun { .. } => {
                    return Err(OnceError::Rpc(Error::Protocol(
                        "a dry-run answer to a Claim that was not one",
                    )))
                }
                Claimed::InProgress {
                    retry_after,
                    record,
                } => {
                    // Our own earlier Claim acquired it, but its answer was lost and the retry
                    // layer claimed again: the lease is ours.
                    if record.lease_owner == owner && record.status == RecordStatus::Processing {
                        let grant = LeaseGrant {
                            token: record.fencing_token,
                            expires_at: record
                                .lease_expires_at
                                .unwrap_or_else(std::time::SystemTime::now),
                            attempt: record.attempt,
                        };
                        if lapsed(&grant) {
                            self.release_lapsed(&grant, deadline).await?;
                            continue;
                        }
                        return self.acquired(grant, operation).await;
                    }
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    if remaining.is_zero() {
                        return Err(OnceError::InProgress {
                            record: Box::new(record),
                        });
                    }
                    tokio::time::sleep(retry_after.min(remaining)).await;
                }
            }
        }
    }

    /// Releases a lease that had run out before its Claim's answer arrived (see [`lapsed`]):
    /// Fail RETRYABLE saying that nothing ran under it (`nothing_ran`, so the release does not
    /// use up one of the operation's `max_attempts`), unless it is already gone (taken over or
    /// settled). The caller then claims again while the wait lasts; past it, LeaseLost.
    async fn release_lapsed<E>(
        &self,
        grant: &LeaseGrant,
        deadline: Instant,
    ) -> Result<(), OnceError<E>> {
        let error = StoredError {
            code: 0,
            message:
                "the lease ran out before the Claim's answer arrived: the operation did not run"
                    .into(),
            details: Vec::new(),
        };
        let released = self
            .client
            .release_unused(&self.key, grant.token, error)
            .await;
        match released {
            Ok(_) => {}
            Err(e) if lease_gone(&e) => {}
            Err(e) => return Err(OnceError::Rpc(e)),
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(OnceError::LeaseLost {
                token: grant.token,
                operation: None,
            });
        }
        // Whatever made the answer late may still be going on: do not claim again at once.
        tokio::time::sleep(remaining.min(Duration::from_millis(100))).await;
        Ok(())
    }

    async fn acquired<T, E, F, Fut>(
        &self,
        grant: LeaseGrant,
        operation: F,
    ) -> Result<Done<T>, OnceError<E>>
    where
        T: Serialize + DeserializeOwned,
        E: Failure,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let token = grant.token;
        let (lease, keep_alive) = lease::keep_alive(&self.client, &self.key, grant, self.lease_ttl);
        let outcome = operation(lease).await;
        // Stop renewing before settling, so the keep-alive never sees our own settle.
        drop(keep_alive);
        match outcome {
            Ok(value) => {
                let result = match StoredResult::json(&value) {
                    Ok(result) => result,
                    Err(e) => {
                        let error = StoredError {
                            code: 0,
                            message: format!("the output cannot be serialized: {e}"),
                            details: Vec::new(),
                        };
                        let _ = self
                            .client
                            .fail(&self.key, token, error, Disposition::Final)
                            .await;
                        return Err(OnceError::Encode(e));
                    }
                };
                match self.client.complete(&self.key, token, result).await {
                    Ok(record) => Ok(Done {
                        value,
                        replayed: false,
                        record,
                        intent_matches: Vec::new(),
                    }),
                    Err(e) if lease_gone(&e) => Err(OnceError::LeaseLost {
                        token,
                        operation: None,
                    }),
                    Err(error) => Err(OnceError::Unsettled {
                        error,
                        operation: None,
                    }),
                }
            }
            Err(failure) => {
                let error = StoredError {
                    code: failure.code(),
                    message: truncate(failure.to_string(), MAX_MESSAGE_BYTES),
                    details: failure.details(),
                };
                let disposition = failure.disposition();
                match self.client.fail(&self.key, token, error, disposition).await {
                    Ok(_) => Err(OnceError::Operation(failure)),
                    Err(e) if lease_gone(&e) => Err(OnceError::LeaseLost {
                        token,
                        operation: Some(failure),
                    }),
                    Err(error) => Err(OnceError::Unsettled {
                        error,
                        operation: Some(failure),
                    }),
                }
            }
        }
    }
}

/// True when `grant`'s lease had already run out on this machine's clock when its answer
/// arrived (an answer slower than the lease: an overloaded server, a store failing over). Another
/// holder may be taking the operation over right now, so nothing may run under it: a holder
/// stops acting when its lease ends on its own clock (docs/reliability.md, "Clocks").
fn lapsed(grant: &LeaseGrant) -> bool {
    grant.expires_at <= std::time::SystemTime::now()
}

/// The settle was refused because the lease no longer holds the record: LEASE_LOST (another
/// holder has it), or ALREADY_SETTLED (someone else settled it with this lease's token; this run
/// settles only once, and an identical settle would have been accepted).
fn lease_gone(e: &Error) -> bool {
    matches!(
        e.reason(),
        Some(Reason::LeaseLost) | Some(Reason::AlreadySettled)
    )
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncates_on_a_char_boundary() {
        assert_eq!(truncate("héllo".into(), 2), "h");
        assert_eq!(truncate("héllo".into(), 3), "hé");
        assert_eq!(truncate("abc".into(), 10), "abc");
    }
}
