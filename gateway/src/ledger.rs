//! The gateway's side of the ledger, through the Rust client (its retries, circuit breaker and
//! lease keep-alive): Claim a caller-scoped key with the request's fingerprint, keep the lease
//! alive while the upstream works, Complete with the response or Fail with a disposition.
//!
//! Errors are sorted into what the HTTP side needs to know: the key was reused, or the ledger
//! cannot answer (then nothing may be forwarded). Keys never appear in logs, only their hash.

use oncekey_api::fingerprint::Fingerprint;
use oncekey_client::{
    Arguments, Claim, Claimed, Client, Disposition, Error, KeepAliveGuard, LeaseGrant,
    OperationKey, Reason, RecordStatus, Semantics, StoredError, StoredResult,
};
use std::time::{Duration, Instant};

/// The ledger as the gateway uses it.
#[derive(Clone)]
pub struct Ledger {
    client: Client,
    namespace: String,
    lease: Duration,
    retention: Duration,
    semantics: Semantics,
    wait: Duration,
    owner: String,
}

/// A lease kept alive while it lives; dropping it stops the renewals (the lease then runs out
/// unless settled).
#[derive(Debug)]
pub struct Hold(tokio::task::JoinHandle<()>);

impl Drop for Hold {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The lease an uncertain at-most-once request is left with: the shortest the ledger grants, so
/// that the record turns UNKNOWN within a second instead of at the end of `--lease`.
pub const SHORTEST_LEASE: Duration = Duration::from_secs(1);

/// The key the readiness probe claims (dry run: nothing is written). No request's key looks like
/// it: theirs have `:` or `#` after a 16-digit scope.
const PROBE_KEY: &str = "oncekey-gateway:readyz";

/// What a Claim answered, as the proxy acts on it.
#[derive(Debug)]
pub enum Answer {
    /// Forward the request; settle with this lease. `at_most_once` is the record's semantics
    /// (fixed by the key's first request).
    Acquired {
        /// The lease.
        grant: LeaseGrant,
        /// The record is AT_MOST_ONCE.
        at_most_once: bool,
    },
    /// Replay this response.
    Completed(StoredResult),
    /// The key failed for good with this error.
    Failed(StoredError),
    /// Another request with the key is in flight; come back after this long.
    InProgress(Duration),
    /// An at-most-once request's holder vanished: the outcome is unknown.
    NeedsReconciliation,
    /// The ledger's intent guard refused the key: the same request was made under another key
    /// within the namespace's window. Nothing is forwarded.
    DuplicateIntent,
}

/// Why a Claim did not answer.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The key was first claimed with another request.
    #[error("key reused with another request")]
    KeyReused,
    /// The ledger cannot be reached or refused the gateway (credentials, limits); nothing may be
    /// forwarded. `retry_after` is the ledger's own hint, when it gave one; [`cause`] says why in
    /// words fit for the client.
    #[error("ledger unavailable: {error}")]
    Unavailable {
        /// What went wrong.
        error: Error,
        /// When to come back, if the ledger said.
        retry_after: Option<Duration>,
    },
}

/// Settings of [`Ledger::new`].
#[derive(Debug, Clone)]
pub struct Settings {
    /// Namespace of every key.
    pub namespace: String,
    /// Lease of a forwarded request.
    pub lease: Duration,
    /// Retention of a settled key.
    pub retention: Duration,
    /// Semantics of new keys.
    pub semantics: Semantics,
    /// How long the ledger may hold a Claim of a key in flight.
    pub wait: Duration,
}

impl Ledger {
    /// The ledger behind `client`.
    pub fn new(client: Client, settings: Settings) -> Self {
        let host = std::env::var("HOSTNAME").unwrap_or_default();
        let owner = if host.is_empty() {
            format!("oncekey-gateway/{}", std::process::id())
        } else {
            format!("oncekey-gateway/{host}")
        };
        Ledger {
            client,
            namespace: settings.namespace,
            lease: settings.lease,
            retention: settings.retention,
            semantics: settings.semantics,
            wait: settings.wait,
            owner,
        }
    }

    /// The operation of ledger key `key`.
    pub fn operation(&self, key: &str) -> Result<OperationKey, Error> {
        OperationKey::from_raw(self.namespace.clone(), key.to_owned())
            .map_err(|e| Error::Fingerprint(e.to_string()))
    }

    /// Claims `key` for a request with `fingerprint`.
    pub async fn claim(
        &self,
        key: &OperationKey,
        fingerprint: Fingerprint,
    ) -> Result<Answer, ClaimError> {
        // A per-request owner: if the answer of a Claim that acquired is lost and the retry layer
        // claims again, the record names us and the lease is ours.
        let owner = format!("{}#{:016x}", self.owner, rand::random::<u64>());
        let claim = Claim::with_arguments(key, Arguments::Fingerprint(fingerprint))
            .lease_ttl(self.lease)
            .retention(self.retention)
            .semantics(self.semantics)
            .owner(owner.clone());
        let deadline = Instant::now() + self.wait;
        loop {
            // The ledger holds an IN_PROGRESS answer up to `wait`; but a duplicate that arrives
            // before the first request's Claim has created the record is answered at once, so
            // claim again while the wait lasts.
            let remaining = deadline.saturating_duration_since(Instant::now());
            let claimed = match self.client.claim(&claim.clone().wait(remaining)).await {
                Ok(c) => c,
                Err(e) if e.reason() == Some(Reason::KeyReused) => {
                    return Err(ClaimError::KeyReused)
                }
                Err(error) => {
                    let retry_after = error.pushback().flatten();
                    return Err(ClaimError::Unavailable { error, retry_after });
                }
            };
            match Self::answer(claimed, &owner) {
                Answer::InProgress(after)
                    if !deadline.saturating_duration_since(Instant::now()).is_zero() =>
                {
                    let nap = after.min(deadline.saturating_duration_since(Instant::now()));
                    tokio::time::sleep(nap.min(Duration::from_millis(100))).await;
                }
                answer => return Ok(answer),
            }
        }
    }

    /// What a Claim's answer means for the proxy; `owner` is this request's.
    fn answer(claimed: Claimed, owner: &str) -> Answer {
        match claimed {
            Claimed::Acquired { lease, record, .. } => Answer::Acquired {
                grant: lease,
                at_most_once: record.semantics == Semantics::AtMostOnce,
            },
            Claimed::Completed { result, .. } => Answer::Completed(result),
            // The namespace's intent guard refused it: the same request went upstream under
            // another key within the window.
            Claimed::DuplicateIntent { .. } => Answer::DuplicateIntent,
            Claimed::Failed { error, .. } => Answer::Failed(error),
            Claimed::NeedsReconciliation { .. } => Answer::NeedsReconciliation,
            Claimed::InProgress { record, .. }
                if record.lease_owner == owner && record.status == RecordStatus::Processing =>
            {
                Answer::Acquired {
                    grant: LeaseGrant {
                        token: record.fencing_token,
                        expires_at: record
                            .lease_expires_at
                            .unwrap_or_else(std::time::SystemTime::now),
                        attempt: record.attempt,
                    },
                    at_most_once: record.semantics == Semantics::AtMostOnce,
                }
            }
            Claimed::InProgress { retry_after, .. } => Answer::InProgress(retry_after),
            // A key some other client created awaiting approval: not to be forwarded until
            // someone approves it, so answered like one in flight (409, Retry-After). The
            // gateway sends no dry runs, so never gets their answer; were it to, it forwards
            // nothing either.
            Claimed::AwaitingApproval { .. } | Claimed::DryRun { .. } => {
                Answer::InProgress(Duration::from_secs(1))
            }
        }
    }

    /// Keeps `grant` alive until the returned [`Hold`] is dropped. The keep-alive stream opens
    /// only after a third of the lease: a request the upstream answers sooner needs no renewal,
    /// and costs no stream.
    pub fn hold(&self, key: &OperationKey, grant: LeaseGrant) -> Hold {
        let (client, key, lease) = (self.client.clone(), key.clone(), self.lease);
        Hold(tokio::spawn(async move {
            tokio::time::sleep(lease / 3).await;
            let _guard: KeepAliveGuard = client.hold_lease(&key, grant, Some(lease)).1;
            std::future::pending::<()>().await;
        }))
    }

    /// Completes `key` with `result`.
    pub async fn complete(
        &self,
        key: &OperationKey,
        token: u64,
        result: StoredResult,
    ) -> Result<(), Error> {
        self.client.complete(key, token, result).await.map(|_| ())
    }

    /// Fails `key` with `code` and `message`.
    pub async fn fail(
        &self,
        key: &OperationKey,
        token: u64,
        code: u16,
        message: &str,
        disposition: Disposition,
    ) -> Result<(), Error> {
        let error = StoredError {
            code: i32::from(code),
            message: message.to_owned(),
            details: Vec::new(),
        };
        self.client
            .fail(key, token, error, disposition)
            .await
            .map(|_| ())
    }

    /// Ends the lease of an at-most-once request whose outcome is uncertain as soon as the ledger
    /// allows: renewed to [`SHORTEST_LEASE`], after which the record is UNKNOWN. (Failing it would
    /// release or settle the key; the contract keeps it for reconciliation instead.)
    pub async fn shorten(&self, key: &OperationKey, token: u64) -> Result<(), Error> {
        self.client
            .renew(key, token, Some(SHORTEST_LEASE))
            .await
            .map(|_| ())
    }

    /// Asks the ledger what it must answer before a keyed request can be forwarded: a dry-run
    /// Claim (nothing is written) of a key no request uses, which needs the ledger to be reachable
    /// and the gateway's token to be valid with the `ledger` scope. The error says which failed.
    pub async fn probe(&self, timeout: Duration) -> Result<(), String> {
        let request = oncekey_api::v1::ClaimRequest {
            namespace: self.namespace.clone(),
            key: PROBE_KEY.into(),
            arguments: Some(oncekey_api::v1::claim_request::Arguments::Fingerprint(
                vec![0; 32],
            )),
            dry_run: true,
            ..Default::default()
        };
        let mut rpc = self.client.ledger();
        match tokio::time::timeout(timeout, rpc.claim(request)).await {
            Err(_) => Err(format!("the ledger did not answer within {timeout:?}")),
            Ok(Ok(_)) => Ok(()),
            // Another request's fingerprint under the probe key: the Claim was still authorized.
            Ok(Err(status)) if status.code() == tonic::Code::FailedPrecondition => Ok(()),
            Ok(Err(status)) => Err(cause(&Error::from(status)).to_owned()),
        }
    }
}

/// Why the ledger could not serve the gateway, in words fit for a client (no token, no key).
pub fn cause(error: &Error) -> &'static str {
    match (error.code(), error.reason()) {
        (_, Some(Reason::MissingScope)) => {
            "the idempotency ledger refused the gateway: its token lacks the `ledger` scope"
        }
        (tonic::Code::PermissionDenied, _) => {
            "the idempotency ledger refused the gateway's credentials"
        }
        (tonic::Code::Unauthenticated, _) => {
            "the idempotency ledger does not accept the gateway's token"
        }
        (tonic::Code::ResourceExhausted, _) => {
            "the idempotency ledger is rate-limiting the gateway"
        }
        (_, Some(Reason::StoreUnavailable)) => "the idempotency ledger's store cannot answer",
        (_, Some(Reason::UnreadableRecord)) => {
            "the idempotency ledger cannot open this operation's stored outcome (a key of its key \
             ring is missing, or the record was altered); nothing was sent upstream"
        }
        _ => "the idempotency ledger cannot be reached",
    }
}

/// True when a Complete was refused because the result is too large to store: TOO_LARGE, or the
/// server's message-size limit (OUT_OF_RANGE without an Oncekey reason).
pub fn too_large(e: &Error) -> bool {
    e.reason() == Some(Reason::TooLarge)
        || (e.reason().is_none() && e.code() == tonic::Code::OutOfRange)
}
