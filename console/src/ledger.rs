//! The console's calls to the ledger: one channel for every operator, each call carrying the
//! operator's own credentials, so the ledger decides what they may see and do. Errors keep the
//! ledger's code, reason and message for the page to show.

use crate::session::{Credential, Scopes, Session};
use oncekey_api::v1;
use oncekey_api::v1::ledger_client::LedgerClient;
use std::time::Duration;
use tonic::metadata::MetadataValue;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};
use tonic_health::pb::health_client::HealthClient;
use tonic_types::StatusExt as _;

/// Each call's deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A ledger call that failed, as the page shows it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code:?} {reason}: {message}")]
pub(crate) struct CallError {
    pub(crate) code: tonic::Code,
    /// The ErrorInfo reason (`MISSING_SCOPE`, `NOT_AWAITING_APPROVAL`, …), or empty.
    pub(crate) reason: String,
    pub(crate) message: String,
    /// The console's own refusal: the ledger was not asked.
    pub(crate) local: bool,
}

impl From<tonic::Status> for CallError {
    fn from(status: tonic::Status) -> Self {
        let reason = status
            .get_error_details()
            .error_info()
            .map(|i| i.reason.clone())
            .unwrap_or_default();
        Self {
            code: status.code(),
            reason,
            message: status.message().to_owned(),
            local: false,
        }
    }
}

impl CallError {
    /// A failure of the console's own, before or instead of a call.
    pub(crate) fn local(code: tonic::Code, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: String::new(),
            message: message.into(),
            local: true,
        }
    }

    /// The HTTP status a page showing this error answers with.
    pub(crate) fn http_status(&self) -> http::StatusCode {
        use http::StatusCode as S;
        use tonic::Code as C;
        match self.code {
            C::InvalidArgument | C::OutOfRange => S::BAD_REQUEST,
            C::Unauthenticated => S::UNAUTHORIZED,
            C::PermissionDenied => S::FORBIDDEN,
            C::NotFound => S::NOT_FOUND,
            C::FailedPrecondition | C::AlreadyExists | C::Aborted => S::CONFLICT,
            C::ResourceExhausted => S::TOO_MANY_REQUESTS,
            C::Unavailable | C::DeadlineExceeded => S::SERVICE_UNAVAILABLE,
            _ => S::BAD_GATEWAY,
        }
    }
}

/// The ledger as the console reaches it.
#[derive(Clone)]
pub(crate) struct Ledger {
    channel: Channel,
}

/// `request` with the operator's credentials and the call deadline.
fn with<T>(credential: &Credential, message: T) -> Result<tonic::Request<T>, CallError> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(CALL_TIMEOUT);
    let bad = |what: &str| {
        CallError::local(
            tonic::Code::InvalidArgument,
            format!("the {what} holds characters a request header cannot carry"),
        )
    };
    match credential {
        Credential::Token(t) => {
            let value = MetadataValue::try_from(format!("Bearer {t}")).map_err(|_| bad("token"))?;
            request.metadata_mut().insert("authorization", value);
        }
        Credential::Tenant(t) => {
            let value = MetadataValue::try_from(t.as_str()).map_err(|_| bad("tenant"))?;
            request
                .metadata_mut()
                .insert(oncekey_api::TENANT_HEADER, value);
        }
    }
    Ok(request)
}

impl Ledger {
    /// A lazily connecting channel to `server` (`http://…`, or `https://…` with `tls`).
    pub(crate) fn new(
        server: &str,
        tls: Option<&oncekey_client::TlsOptions>,
    ) -> Result<Self, String> {
        let mut endpoint = Endpoint::from_shared(server.to_owned())
            .map_err(|e| format!("--server {server}: {e}"))?
            .connect_timeout(Duration::from_secs(5))
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_while_idle(true);
        let config = match (tls, server.starts_with("https://")) {
            (Some(tls), _) => Some(tls.config().map_err(|e| format!("--tls-ca: {e}"))?),
            (None, true) => Some(ClientTlsConfig::new()),
            (None, false) => None,
        };
        if let Some(config) = config {
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| format!("--server {server}: TLS: {e}"))?;
        }
        Ok(Self {
            channel: endpoint.connect_lazy(),
        })
    }

    fn rpc(&self) -> LedgerClient<Channel> {
        LedgerClient::new(self.channel.clone())
    }

    /// Whether the ledger's health service answers SERVING (for `/readyz`).
    pub(crate) async fn ready(&self) -> Result<(), String> {
        use tonic_health::pb::{health_check_response::ServingStatus, HealthCheckRequest};
        let mut request = tonic::Request::new(HealthCheckRequest::default());
        request.set_timeout(Duration::from_secs(2));
        let reply = HealthClient::new(self.channel.clone())
            .check(request)
            .await
            .map_err(|e| format!("the ledger's health check failed: {}", e.message()))?;
        match reply.into_inner().status() {
            ServingStatus::Serving => Ok(()),
            other => Err(format!("the ledger answers {}", other.as_str_name())),
        }
    }

    /// Checks a credential (one ListRecords) and finds its scopes by asking each guarded RPC
    /// with an empty request: `MISSING_SCOPE` means the scope is not there, any other answer
    /// (the empty request's `INVALID_FIELD`) that it is. Nothing is changed by these.
    pub(crate) async fn sign_in(&self, credential: &Credential) -> Result<Scopes, CallError> {
        let list = v1::ListRecordsRequest {
            page_size: 1,
            ..Default::default()
        };
        self.rpc().list_records(with(credential, list)?).await?;
        let has = |result: Result<(), tonic::Status>| match result {
            Err(s) => CallError::from(s).reason != "MISSING_SCOPE",
            Ok(()) => true,
        };
        let mut rpc = self.rpc();
        let claim = rpc
            .claim(with(credential, v1::ClaimRequest::default())?)
            .await
            .map(drop);
        let approve = rpc
            .approve(with(credential, v1::ApproveRequest::default())?)
            .await
            .map(drop);
        let purge = rpc
            .purge(with(credential, v1::PurgeRequest::default())?)
            .await
            .map(drop);
        Ok(Scopes {
            ledger: has(claim),
            approve: has(approve),
            admin: has(purge),
        })
    }

    /// One page of records.
    pub(crate) async fn list(
        &self,
        session: &Session,
        request: v1::ListRecordsRequest,
    ) -> Result<v1::ListRecordsResponse, CallError> {
        let request = with(&session.credential, request)?;
        Ok(self.rpc().list_records(request).await?.into_inner())
    }

    /// Every record matching `request`, following pages up to `limit` records; the flag says
    /// whether more were left.
    pub(crate) async fn list_up_to(
        &self,
        session: &Session,
        mut request: v1::ListRecordsRequest,
        limit: usize,
    ) -> Result<(Vec<v1::Record>, bool), CallError> {
        let mut records = Vec::new();
        request.page_size = 1000;
        loop {
            let page = self.list(session, request.clone()).await?;
            records.extend(page.records);
            if page.next_page_token.is_empty() {
                return Ok((records, false));
            }
            if records.len() >= limit {
                return Ok((records, true));
            }
            request.page_token = page.next_page_token;
        }
    }

    /// One page of the operator's suspected duplicate intents (every namespace).
    pub(crate) async fn duplicate_intents(
        &self,
        session: &Session,
        page_size: u32,
    ) -> Result<v1::ListDuplicateIntentsResponse, CallError> {
        let m = v1::ListDuplicateIntentsRequest {
            page_size,
            ..Default::default()
        };
        let request = with(&session.credential, m)?;
        Ok(self
            .rpc()
            .list_duplicate_intents(request)
            .await?
            .into_inner())
    }

    /// A record and its receipts.
    pub(crate) async fn lookup(
        &self,
        session: &Session,
        namespace: &str,
        key: &str,
    ) -> Result<v1::LookupResponse, CallError> {
        let request = v1::LookupRequest {
            namespace: namespace.into(),
            key: key.into(),
            include_history: true,
        };
        let request = with(&session.credential, request)?;
        Ok(self.rpc().lookup(request).await?.into_inner())
    }

    /// Approves (`approve`) or rejects a record, pinned to `fingerprint`.
    pub(crate) async fn decide(
        &self,
        session: &Session,
        approve: bool,
        target: (&str, &str),
        fingerprint: Vec<u8>,
        note: &str,
    ) -> Result<(), CallError> {
        let (namespace, key) = (target.0.to_owned(), target.1.to_owned());
        let note = note.to_owned();
        let mut rpc = self.rpc();
        if approve {
            let m = v1::ApproveRequest {
                namespace,
                key,
                fingerprint,
                note,
            };
            rpc.approve(with(&session.credential, m)?).await?;
        } else {
            let m = v1::RejectRequest {
                namespace,
                key,
                fingerprint,
                note,
            };
            rpc.reject(with(&session.credential, m)?).await?;
        }
        Ok(())
    }

    /// Purges a record.
    pub(crate) async fn purge(
        &self,
        session: &Session,
        namespace: &str,
        key: &str,
        force: bool,
    ) -> Result<(), CallError> {
        let m = v1::PurgeRequest {
            namespace: namespace.into(),
            key: key.into(),
            force,
        };
        self.rpc().purge(with(&session.credential, m)?).await?;
        Ok(())
    }

    /// Settles an UNKNOWN operation as the operator found it: a Claim with `reconcile` and the
    /// stored fingerprint, then Complete with `result` or Fail FINAL with `error`.
    pub(crate) async fn reconcile(
        &self,
        session: &Session,
        record: &v1::Record,
        owner: String,
        settle: Settle,
    ) -> Result<(), CallError> {
        let mut rpc = self.rpc();
        let claim = v1::ClaimRequest {
            namespace: record.namespace.clone(),
            key: record.key.clone(),
            arguments: Some(v1::claim_request::Arguments::Fingerprint(
                record.fingerprint.clone(),
            )),
            semantics: record.semantics,
            owner,
            reconcile: true,
            ..Default::default()
        };
        let answer = rpc
            .claim(with(&session.credential, claim)?)
            .await?
            .into_inner();
        let lease = match (answer.outcome(), answer.lease) {
            (v1::ClaimOutcome::Acquired, Some(lease)) => lease,
            (outcome, _) => {
                return Err(CallError::local(
                    tonic::Code::FailedPrecondition,
                    format!(
                        "the ledger answered {} instead of acquiring the operation for \
                         reconciliation: it has moved on; reload the record",
                        outcome.as_str_name().trim_start_matches("CLAIM_OUTCOME_")
                    ),
                ))
            }
        };
        let (namespace, key) = (record.namespace.clone(), record.key.clone());
        // Acquired but not settled: say what becomes of it.
        let unsettled = |s: tonic::Status| {
            let mut e = CallError::from(s);
            e.message = format!(
                "{} (the console holds the operation's lease but could not settle it: it reads \
                 UNKNOWN again once that lease lapses, within 30 s; reconcile it again then)",
                e.message
            );
            e
        };
        match settle {
            Settle::Succeeded(result) => {
                let m = v1::CompleteRequest {
                    namespace,
                    key,
                    lease_token: lease.token,
                    result: Some(result),
                };
                rpc.complete(with(&session.credential, m)?)
                    .await
                    .map_err(unsettled)?;
            }
            Settle::Failed(error) => {
                let m = v1::FailRequest {
                    namespace,
                    key,
                    lease_token: lease.token,
                    error: Some(error),
                    disposition: v1::Disposition::Final as i32,
                    nothing_ran: false,
                };
                rpc.fail(with(&session.credential, m)?)
                    .await
                    .map_err(unsettled)?;
            }
        }
        Ok(())
    }
}

/// How the operator says the outside world settled an operation.
#[derive(Debug, Clone)]
pub(crate) enum Settle {
    /// It happened, with this result.
    Succeeded(v1::OperationResult),
    /// It failed for good, with this error.
    Failed(v1::OperationError),
}
