//! One typed method per RPC, for callers who need full control: Rust types in and out, the typed
//! [`Error`], and the client's retry and breaker layers around every unary call.
//!
//! KeepAlive is a stream and is never retried here: [`crate::Lease`] reopens it when that is safe.

use crate::connect::Client;
use crate::error::Error;
use crate::key::OperationKey;
use crate::stack::{Call, Counters, Reply};
use crate::types::{
    duration_to_wire, Claimed, Disposition, LeaseGrant, Record, Semantics, StoredError,
    StoredResult,
};
use oncekey_api::fingerprint::Fingerprint;
use oncekey_api::v1;
use std::time::Duration;
use tokio::sync::mpsc;
use tower::ServiceExt;

/// The longest `wait` the server honors.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// The arguments of a Claim: what identifies the operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arguments {
    /// The SHA-256 of the RFC 8785 canonical JSON of the arguments.
    Fingerprint(Fingerprint),
    /// The arguments as JSON; the server fingerprints them.
    PayloadJson(String),
}

/// A Claim to send: the operation, its arguments and how to hold it.
#[derive(Debug, Clone)]
pub struct Claim {
    key: OperationKey,
    arguments: Arguments,
    lease_ttl: Option<Duration>,
    retention: Option<Duration>,
    semantics: Semantics,
    owner: Option<String>,
    reconcile: bool,
    wait: Option<Duration>,
    require_approval: bool,
    dry_run: bool,
    max_attempts: u32,
    intent_guard: crate::IntentGuard,
    intent_window: Option<Duration>,
    repeat_intent: bool,
    budget: Option<crate::RunBudget>,
}

impl Claim {
    /// A Claim of `key` whose arguments are fingerprinted here (RFC 8785 + SHA-256).
    pub fn new<A: serde::Serialize + ?Sized>(key: &OperationKey, args: &A) -> Result<Self, Error> {
        Ok(Self::with_arguments(
            key,
            Arguments::Fingerprint(Client::fingerprint(args)?),
        ))
    }

    /// A Claim of `key` with arguments given as a fingerprint or as JSON.
    pub fn with_arguments(key: &OperationKey, arguments: Arguments) -> Self {
        Claim {
            key: key.clone(),
            arguments,
            lease_ttl: None,
            retention: None,
            semantics: Semantics::AtLeastOnce,
            owner: None,
            reconcile: false,
            wait: None,
            require_approval: false,
            dry_run: false,
            max_attempts: 0,
            intent_guard: crate::IntentGuard::Default,
            intent_window: None,
            repeat_intent: false,
            budget: None,
        }
    }

    /// How long the lease lasts when acquired (1 s ..= 1 h; server default 30 s).
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = Some(ttl);
        self
    }

    /// How long the record is kept after it settles (server default 24 h). It must outlast the
    /// longest time anyone may retry this operation.
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = Some(retention);
        self
    }

    /// At-least-once (default) or at-most-once; only the first Claim of a key sets it.
    pub fn semantics(mut self, semantics: Semantics) -> Self {
        self.semantics = semantics;
        self
    }

    /// Names the caller in `lease_owner` (default: the client's owner).
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Acquires an UNKNOWN at-most-once operation to reconcile it.
    pub fn reconcile(mut self, reconcile: bool) -> Self {
        self.reconcile = reconcile;
        self
    }

    /// Lets the server hold an IN_PROGRESS answer until the record settles (at most 60 s).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait.min(MAX_WAIT));
        self
    }

    /// Creates the record awaiting approval: nobody acquires it before someone Approves it
    /// ([`Client::approve`]); until then Claims answer [`Claimed::AwaitingApproval`]. Only the
    /// first Claim of a key sets it.
    pub fn require_approval(mut self) -> Self {
        self.require_approval = true;
        self
    }

    /// Asks what this Claim would get now without writing anything (no record, lease, dedup hit
    /// or receipt): the answer is [`Claimed::DryRun`]. `wait` is ignored.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }

    /// Caps the acquisitions of the operation (reconciliations not counted; 0, the default, is
    /// no cap). Past the cap a RETRY record fails for good with code 429 ("attempts exhausted"),
    /// and a lapsed at-least-once lease needs reconciliation instead of being taken over. Only
    /// the first Claim of a key sets it.
    pub fn max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// The intent guard for this Claim: it can make the namespace's setting stricter, never
    /// looser (docs/api.md, "Intent guard").
    pub fn intent_guard(mut self, guard: crate::IntentGuard) -> Self {
        self.intent_guard = guard;
        self
    }

    /// The intent window this Claim asks for (1 s ..= 24 h): the longer of it and the
    /// namespace's applies.
    pub fn intent_window(mut self, window: Duration) -> Self {
        self.intent_window = Some(window);
        self
    }

    /// The repeat of another key's arguments is deliberate: a refusing guard lets it through.
    pub fn repeat_intent(mut self, deliberate: bool) -> Self {
        self.repeat_intent = deliberate;
        self
    }

    /// Makes the operation a parent whose new children (Claims naming it as parent) are limited
    /// to `budget`; only the first Claim of a key sets it.
    pub fn budget(mut self, budget: crate::RunBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The operation claimed.
    pub fn key(&self) -> &OperationKey {
        &self.key
    }

    fn to_wire(&self, default_owner: &str) -> v1::ClaimRequest {
        v1::ClaimRequest {
            namespace: self.key.namespace().into(),
            key: self.key.key().into(),
            arguments: Some(match &self.arguments {
                Arguments::Fingerprint(fp) => {
                    v1::claim_request::Arguments::Fingerprint(fp.to_vec())
                }
                Arguments::PayloadJson(json) => {
                    v1::claim_request::Arguments::PayloadJson(json.clone())
                }
            }),
            lease_ttl: self.lease_ttl.map(duration_to_wire),
            retention: self.retention.map(duration_to_wire),
            semantics: match self.semantics {
                Semantics::AtLeastOnce => v1::Semantics::AtLeastOnce,
                Semantics::AtMostOnce => v1::Semantics::AtMostOnce,
            } as i32,
            owner: self.owner.as_deref().unwrap_or(default_owner).into(),
            parent: self.key.parent().map(|p| v1::OperationRef {
                namespace: p.namespace().into(),
                key: p.key().into(),
            }),
            reconcile: self.reconcile,
            wait: self.wait.filter(|w| !w.is_zero()).map(duration_to_wire),
            require_approval: self.require_approval,
            dry_run: self.dry_run,
            max_attempts: self.max_attempts,
            intent_guard: self.intent_guard.to_wire(),
            intent_window: self.intent_window.map(duration_to_wire),
            repeat_intent: self.repeat_intent,
            budget: self.budget.as_ref().map(crate::RunBudget::to_wire),
        }
    }
}

impl Client {
    /// The fingerprint of `args`: SHA-256 of the RFC 8785 canonical JSON of their serde form (the
    /// one implementation in `oncekey_api::fingerprint`, shared with the server).
    pub fn fingerprint<A: serde::Serialize + ?Sized>(args: &A) -> Result<Fingerprint, Error> {
        oncekey_api::fingerprint::fingerprint_of(args)
            .map_err(|e| Error::Fingerprint(e.to_string()))
    }

    pub(crate) async fn call(&self, call: Call) -> Result<Reply, Error> {
        Counters::bump(&self.counters().calls);
        self.stack.clone().oneshot(call).await
    }

    /// `Claim`: may the caller perform the operation now? (A dry run answers
    /// [`Claimed::DryRun`].)
    pub async fn claim(&self, claim: &Claim) -> Result<Claimed, Error> {
        match self.call(Call::Claim(claim.to_wire(&self.owner))).await? {
            Reply::Claim(r) => Claimed::from_wire(r, claim.dry_run),
            _ => Err(Error::Protocol("mismatched reply")),
        }
    }

    /// `Complete`: settles an acquired operation as succeeded; returns the SUCCEEDED record.
    pub async fn complete(
        &self,
        key: &OperationKey,
        lease_token: u64,
        result: StoredResult,
    ) -> Result<Record, Error> {
        let request = v1::CompleteRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            lease_token,
            result: Some(result.into()),
        };
        match self.call(Call::Complete(request)).await? {
            Reply::Complete(r) => Record::from_wire(r.record.ok_or(Error::Protocol("no record"))?),
            _ => Err(Error::Protocol("mismatched reply")),
        }
    }

    /// `Fail`: settles an acquired operation as failed; returns the record, or `None` after
    /// [`Disposition::Abandon`] (the record is deleted).
    pub async fn fail(
        &self,
        key: &OperationKey,
        lease_token: u64,
        error: StoredError,
        disposition: Disposition,
    ) -> Result<Option<Record>, Error> {
        self.send_fail(key, lease_token, error, disposition, false)
            .await
    }

    /// `Fail` RETRYABLE with `nothing_ran`: releases a lease under which nothing ran (one that
    /// had run out before its Claim's answer arrived, so the caller never started), so that the
    /// next Claim acquires it again and the acquisition does not count against the operation's
    /// attempt cap. Say it only when nothing ran: for an effect that may have run, use
    /// [`Client::fail`].
    pub async fn release_unused(
        &self,
        key: &OperationKey,
        lease_token: u64,
        error: StoredError,
    ) -> Result<Option<Record>, Error> {
        self.send_fail(key, lease_token, error, Disposition::Retryable, true)
            .await
    }

    async fn send_fail(
        &self,
        key: &OperationKey,
        lease_token: u64,
        error: StoredError,
        disposition: Disposition,
        nothing_ran: bool,
    ) -> Result<Option<Record>, Error> {
        let request = v1::FailRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            lease_token,
            error: Some(error.into()),
            disposition: disposition.wire() as i32,
            nothing_ran,
        };
        match self.call(Call::Fail(request)).await? {
            Reply::Fail(r) => r.record.map(Record::from_wire).transpose(),
            _ => Err(Error::Protocol("mismatched reply")),
        }
    }

    /// `Renew`: extends the caller's lease to `lease_ttl` from now (server default 30 s).
    pub async fn renew(
        &self,
        key: &OperationKey,
        lease_token: u64,
        lease_ttl: Option<Duration>,
    ) -> Result<LeaseGrant, Error> {
        let request = v1::RenewRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            lease_token,
            lease_ttl: lease_ttl.map(duration_to_wire),
        };
        match self.call(Call::Renew(request)).await? {
            Reply::Renew(r) => Ok(LeaseGrant::from_wire(
                r.lease.ok_or(Error::Protocol("no lease"))?,
            )),
            _ => Err(Error::Protocol("mismatched reply")),
        }
    }

    /// `Lookup`: the record of `key`, or `None` when absent or expired.
    pub async fn lookup(&self, key: &OperationKey) -> Result<Option<Record>, Error> {
        let request = v1::LookupRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            ..Default::default()
        };
        match self.call(Call::Lookup(request)).await {
            Ok(Reply::Lookup(r)) => r.record.map(Record::from_wire).transpose(),
            Ok(_) => Err(Error::Protocol("mismatched reply")),
            Err(e) if e.code() == tonic::Code::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `KeepAlive`: opens a stream on which the server renews the lease every `lease_ttl/3` until
    /// the stream is dropped, the record settles or the lease is lost. Not retried: a LEASE_LOST
    /// (or any other) error opening it is returned as is.
    pub async fn keep_alive(
        &self,
        key: &OperationKey,
        lease_token: u64,
        lease_ttl: Option<Duration>,
    ) -> Result<KeepAlive, Error> {
        let template = v1::KeepAliveRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            lease_token,
            lease_ttl: lease_ttl.map(duration_to_wire),
        };
        let (requests, rx) = mpsc::channel(2);
        requests
            .try_send(template.clone())
            .map_err(|_| Error::Protocol("keep-alive channel closed"))?;
        let mut rpc = self.rpc.clone();
        let open = rpc.keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx));
        let leases = tokio::time::timeout(self.timeout, open)
            .await
            .map_err(|_| Error::Timeout(self.timeout))??
            .into_inner();
        Ok(KeepAlive {
            leases,
            requests,
            template,
        })
    }
}

/// An open KeepAlive stream; dropping it stops the renewals (the lease then runs out normally).
#[derive(Debug)]
pub struct KeepAlive {
    leases: tonic::Streaming<v1::Lease>,
    requests: mpsc::Sender<v1::KeepAliveRequest>,
    template: v1::KeepAliveRequest,
}

impl KeepAlive {
    /// The next renewed lease; `None` when the server ended the stream normally (the record
    /// settled, or the server is shutting down); an error such as LEASE_LOST ends it too.
    pub async fn next(&mut self) -> Option<Result<LeaseGrant, Error>> {
        match self.leases.message().await {
            Ok(Some(lease)) => Some(Ok(LeaseGrant::from_wire(lease))),
            Ok(None) => None,
            Err(status) => Some(Err(status.into())),
        }
    }

    /// Changes the lease length the server renews to.
    pub async fn set_lease_ttl(&mut self, lease_ttl: Duration) -> Result<(), Error> {
        self.template.lease_ttl = Some(duration_to_wire(lease_ttl));
        self.requests
            .send(self.template.clone())
            .await
            .map_err(|_| Error::Protocol("keep-alive stream closed"))
    }
}
