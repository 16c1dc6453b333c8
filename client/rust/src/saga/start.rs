//! Starting a saga: the builder ([`SagaBuilder`]) and its Claim of the saga, at most once, which
//! answers a saga to run (kept alive), its stored output, its stored rollback, or, when an
//! earlier run died, the saga reconciled for this run to resume.

use super::{Saga, SagaError};
use crate::connect::Client;
use crate::key::OperationKey;
use crate::lease;
use crate::once::{Failure, DEFAULT_WAIT_TIMEOUT};
use crate::rpc::{Arguments, Claim};
use crate::types::{Claimed, LeaseGrant, RecordStatus, Semantics, StoredError};
use crate::RunBudget;
use oncekey_api::fingerprint::Fingerprint;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, Instant, SystemTime};

/// How long a saga's records (its own and its steps') are kept after they settle, by default.
pub const DEFAULT_SAGA_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A saga to start: built by [`Client::saga`], started by [`SagaBuilder::start`].
#[derive(Debug, Clone)]
#[must_use = "nothing happens until `start` is awaited"]
pub struct SagaBuilder {
    pub(super) client: Client,
    pub(super) key: OperationKey,
    pub(super) fingerprint: Result<Fingerprint, String>,
    pub(super) owner: Option<String>,
    pub(super) retention: Duration,
    pub(super) lease_ttl: Option<Duration>,
    pub(super) wait_timeout: Duration,
    pub(super) budget: Option<RunBudget>,
}

impl Client {
    /// Prepares the saga `key`: its steps are the children `key.child(step)`. The saga's own
    /// arguments are `{"saga": KEY}` unless [`SagaBuilder::arguments`] says otherwise.
    pub fn saga(&self, key: &OperationKey) -> SagaBuilder {
        let arguments = serde_json::json!({ "saga": key.key() });
        SagaBuilder {
            client: self.clone(),
            key: key.clone(),
            fingerprint: Client::fingerprint(&arguments).map_err(|e| e.to_string()),
            owner: None,
            retention: DEFAULT_SAGA_RETENTION,
            lease_ttl: None,
            wait_timeout: DEFAULT_WAIT_TIMEOUT,
            budget: None,
        }
    }
}

impl SagaBuilder {
    /// The saga's significant arguments (fingerprinted now; default `{"saga": KEY}`): a start of
    /// the same key with other arguments is refused (KEY_REUSED), and the namespace's intent
    /// guard compares them with other sagas'.
    pub fn arguments<A: Serialize + ?Sized>(mut self, args: &A) -> Self {
        self.fingerprint = Client::fingerprint(args).map_err(|e| e.to_string());
        self
    }

    /// Names this process in the records' `lease_owner` (default: the client's owner).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// How long the saga's and its steps' records are kept after they settle (default 7 days):
    /// it must outlast the longest time anyone may re-run the saga.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// The lease length of the saga and of its steps (server default 30 s). After a crash, a
    /// re-run resumes the saga once its lease has lapsed, and takes over a step that was running
    /// once the step's lease has lapsed.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = Some(ttl);
        self
    }

    /// How long a start waits for another process running this saga, and a step for another
    /// holder of the step (default 60 s), before [`SagaError::InProgress`] or
    /// [`SagaError::Step`].
    pub fn wait_timeout(mut self, timeout: Duration) -> Self {
        self.wait_timeout = timeout;
        self
    }

    /// Caps the saga's child operations: its steps *and* its compensations count (a rollback
    /// needs room for one compensation per completed step). A step beyond it is refused with
    /// BUDGET_EXHAUSTED ([`SagaError::Step`], the saga released). Only the saga's first start
    /// sets it.
    pub fn budget(mut self, budget: RunBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Claims the saga (at most once) and returns it to run its steps, or its stored output if it
    /// finished earlier ([`SagaStart::Finished`]), or [`SagaError::RolledBack`] if it was rolled
    /// back. A saga whose earlier run died is reconciled and resumed: run the same steps again.
    pub async fn start<'a, T, E>(self) -> Result<SagaStart<'a, T, E>, SagaError<E>>
    where
        T: DeserializeOwned,
        E: Failure,
    {
        let fingerprint = self
            .fingerprint
            .clone()
            .map_err(|e| SagaError::Rpc(crate::Error::Fingerprint(e)))?;
        let base = self
            .owner
            .clone()
            .unwrap_or_else(|| self.client.owner.to_string());
        let owner = format!("{base}#{:016x}", rand::random::<u64>());
        let mut claim = Claim::with_arguments(&self.key, Arguments::Fingerprint(fingerprint))
            .semantics(Semantics::AtMostOnce)
            .owner(owner.clone())
            .retention(self.retention);
        if let Some(ttl) = self.lease_ttl {
            claim = claim.lease_ttl(ttl);
        }
        if let Some(budget) = &self.budget {
            claim = claim.budget(budget.clone());
        }
        let deadline = Instant::now() + self.wait_timeout;
        let mut resumed = false;
        loop {
            claim = claim.wait(deadline.saturating_duration_since(Instant::now()));
            let answer = self.client.claim(&claim).await.map_err(SagaError::Rpc)?;
            let grant = match answer {
                Claimed::Acquired { lease, .. } => lease,
                Claimed::Completed { result, .. } => {
                    return match result.decode_json() {
                        Ok(value) => Ok(SagaStart::Finished(value)),
                        Err(error) => Err(SagaError::Decode {
                            error,
                            result: Box::new(result),
                        }),
                    };
                }
                Claimed::Failed { error, .. } => return Err(SagaError::replayed_rollback(error)),
                Claimed::NeedsReconciliation { .. } => {
                    // An earlier run died (or gave up on a compensation): the ledger holds what it
                    // did, so resuming is the reconciliation.
                    resumed = true;
                    claim = claim.reconcile(true);
                    continue;
                }
                Claimed::InProgress { record, .. }
                    if record.lease_owner == owner && record.status == RecordStatus::Processing =>
                {
                    // Our own Claim acquired it, but its answer was lost and the retry layer
                    // claimed again: the lease is ours.
                    LeaseGrant {
                        token: record.fencing_token,
                        expires_at: record.lease_expires_at.unwrap_or_else(SystemTime::now),
                        attempt: record.attempt,
                    }
                }
                Claimed::InProgress {
                    retry_after,
                    record,
                } => {
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    if remaining.is_zero() {
                        return Err(SagaError::InProgress {
                            record: Box::new(record),
                        });
                    }
                    tokio::time::sleep(retry_after.min(remaining)).await;
                    continue;
                }
                Claimed::DuplicateIntent { matches } => {
                    return Err(SagaError::DuplicateIntent { matches })
                }
                Claimed::AwaitingApproval { .. } | Claimed::DryRun { .. } => {
                    return Err(SagaError::Rpc(crate::Error::Protocol(
                        "a saga's Claim answered neither with its outcome nor with a lease",
                    )))
                }
            };
            if grant.expires_at <= SystemTime::now() {
                // The answer came after the lease had run out: run nothing under it.
                let error = StoredError {
                    message: "the lease ran out before the Claim's answer arrived".into(),
                    ..StoredError::default()
                };
                let _ = self
                    .client
                    .release_unused(&self.key, grant.token, error)
                    .await;
                if Instant::now() >= deadline {
                    return Err(SagaError::LeaseLost);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            let (lease, guard) = lease::keep_alive(&self.client, &self.key, grant, self.lease_ttl);
            return Ok(SagaStart::Run(Box::new(Saga {
                resumed: resumed || grant.attempt > 1,
                builder: self,
                owner: base,
                lease,
                keep_alive: Some(guard),
                completed: Vec::new(),
                names: HashSet::new(),
            })));
        }
    }
}

/// What [`SagaBuilder::start`] found.
pub enum SagaStart<'a, T, E> {
    /// The saga is acquired: run its steps, then [`Saga::finish`].
    Run(Box<Saga<'a, E>>),
    /// The saga finished earlier: its stored output (no step runs).
    Finished(T),
}

impl<T: fmt::Debug, E> fmt::Debug for SagaStart<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SagaStart::Run(saga) => f.debug_tuple("Run").field(saga).finish(),
            SagaStart::Finished(value) => f.debug_tuple("Finished").field(value).finish(),
        }
    }
}
