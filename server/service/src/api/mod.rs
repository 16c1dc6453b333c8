//! The gRPC face of the ledger: `oncekey.v1.Ledger` over the engine. Each RPC runs in a span
//! (tenant, namespace, hashed key, outcome, gRPC code; continuing the caller's W3C trace),
//! validates its request (`convert`, `operations`), runs one engine call for the caller's tenant,
//! and maps errors once (`error`). Before it runs, the caller is authenticated (`auth`), its
//! token's scopes checked (`scopes`) and the request admitted (`admission`).

pub mod admission;
pub mod auth;
pub mod convert;
mod duplicates;
pub mod error;
pub mod guard;
mod keepalive;
pub mod limits;
pub mod listing;
pub mod operations;
pub mod page_token;
pub mod pattern;
pub mod privacy;
mod protect;
pub mod safety;
pub mod scopes;

use crate::engine::{Engine, Guarded};
use crate::ledger::Millis;
use crate::store::Store;
use crate::telemetry::{metrics::code_name, otel};
use auth::{Auth, Principal, Tenant};
use error::ApiError;
use limits::Limits;
use oncekey_api::v1;
use page_token::PageTokens;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};
use tracing::field::Empty;
use tracing::{Instrument, Span};

/// The Ledger service for one store.
pub struct LedgerService<S> {
    engine: Arc<Engine<S>>,
    limits: Arc<Limits>,
    keepalives: Arc<keepalive::Registry>,
    admission: admission::Admission,
    page_tokens: PageTokens,
    privacy: privacy::KeyPrivacy,
    /// Whether a Rekey covers every tenant: set by `into_server` when requests are not
    /// authenticated by tokens (dev mode, where every caller may name any tenant anyway).
    rekey_every_tenant: bool,
}

impl<S: Store> LedgerService<S> {
    /// A service over `engine` enforcing `limits`.
    pub fn new(engine: Arc<Engine<S>>, limits: Limits) -> Self {
        Self {
            page_tokens: PageTokens::new(engine.store().page_token_key()),
            engine,
            limits: Arc::new(limits),
            keepalives: Arc::default(),
            admission: admission::Admission::off(),
            privacy: privacy::KeyPrivacy::off(),
            rekey_every_tenant: false,
        }
    }

    /// The same service with per-tenant admission limits (none by default).
    pub fn with_admission(mut self, admission: admission::Admission) -> Self {
        self.admission = admission;
        self
    }

    /// The tonic server for this service, behind admission, behind the scope check, behind
    /// the authenticating interceptor (both need the caller). Without a tokens file (dev mode)
    /// a Rekey covers every tenant.
    pub fn into_server(
        mut self,
        auth: Arc<Auth>,
    ) -> tonic::service::interceptor::InterceptedService<
        guard::Guarded<
            admission::AdmissionService<v1::ledger_server::LedgerServer<Self>>,
            scopes::ScopeGuard,
        >,
        impl tonic::service::Interceptor + Clone,
    > {
        self.rekey_every_tenant = !auth.has_tokens();
        let max = self.limits.max_message_bytes();
        let admission = self.admission.layer();
        // Logs hash keys as stored (`privacy::logged_key_hash`): only needed with key privacy.
        let privacy = self.privacy.any().then(|| self.privacy.clone());
        let server = v1::ledger_server::LedgerServer::new(self)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        let server = tower::Layer::layer(&admission, server);
        let server = tower::Layer::layer(&guard::GuardLayer(scopes::ScopeGuard), server);
        tonic::service::interceptor::InterceptedService::new(server, move |mut req: Request<()>| {
            let (tenant, principal) = auth
                .authenticate_principal(req.metadata())
                .map_err(Status::from)?;
            req.extensions_mut().insert(tenant);
            req.extensions_mut().insert(principal);
            if let Some(privacy) = &privacy {
                req.extensions_mut().insert(privacy.clone());
            }
            Ok(req)
        })
    }
}

/// The tenant the interceptor put in `extensions`, taken out of them.
fn take_tenant(extensions: &mut tonic::Extensions) -> Result<String, ApiError> {
    extensions
        .remove::<Tenant>()
        .map(|t| t.0)
        .ok_or(ApiError::Unauthenticated("no credentials"))
}

/// The principal the interceptor put in `extensions`, taken out of them.
fn take_principal(extensions: &mut tonic::Extensions) -> Result<Principal, ApiError> {
    extensions
        .remove::<Principal>()
        .ok_or(ApiError::Unauthenticated("no credentials"))
}

/// The span of one RPC (named `telemetry::RPC_SPAN`); `outcome` is recorded by Claim,
/// `grpc.code` by `finish`. Only spans exported over OTLP show it (log lines do not): without an
/// exporter it is not made, which spares every RPC a span and a hash of its key.
fn rpc_span<T>(name: &'static str, req: &Request<T>, namespace: &str, key: &str) -> Span {
    if !otel::exporting() {
        return Span::none();
    }
    let tenant = req
        .extensions()
        .get::<Tenant>()
        .map_or("", |t| t.0.as_str());
    let privacy = req.extensions().get::<privacy::KeyPrivacy>();
    let span = tracing::info_span!(
        "rpc",
        otel.name = name,
        otel.kind = "server",
        rpc.system = "grpc",
        tenant = %tenant,
        namespace = %namespace,
        key_hash = %privacy::logged_key_hash(privacy, tenant, namespace, key),
        outcome = Empty,
        grpc.code = Empty,
        otel.status_code = Empty,
    );
    otel::continue_trace(&span, req.metadata());
    span
}

/// What the log lines about a failed RPC say about it: the `rpc` span is not logged (formatting
/// its fields for every RPC cost ~5 % of the CPU), so a failure gets this span, with the same
/// fields, while its error is turned into a status (which logs store failures). It borrows from
/// the request, which the handler only borrowed: nothing is copied for the RPCs that succeed.
struct LogContext<'a> {
    name: &'static str,
    tenant: &'a str,
    namespace: &'a str,
    key: &'a str,
    privacy: Option<&'a privacy::KeyPrivacy>,
}

impl LogContext<'_> {
    fn span(&self) -> Span {
        tracing::error_span!(
            "rpc_failed",
            rpc = self.name,
            tenant = %self.tenant,
            namespace = %self.namespace,
            key_hash = %privacy::logged_key_hash(self.privacy, self.tenant, self.namespace, self.key),
        )
    }
}

/// Records the answer's code in `span` and turns it into a gRPC response; an error is converted
/// inside `context`'s span, so that what it logs says which RPC failed.
fn finish<T>(
    span: &Span,
    context: LogContext<'_>,
    result: Result<T, ApiError>,
) -> Result<Response<T>, Status> {
    let result = {
        let _entered = span.enter();
        result.map(Response::new).map_err(|e| {
            let _context = context.span().entered();
            Status::from(e)
        })
    };
    record_code(span, &result);
    result
}

fn record_code<T>(span: &Span, result: &Result<T, Status>) {
    let code = result
        .as_ref()
        .map_or_else(Status::code, |_| tonic::Code::Ok);
    span.record("grpc.code", code_name(code));
    if matches!(
        code,
        tonic::Code::Internal | tonic::Code::Unavailable | tonic::Code::Unknown
    ) {
        span.record("otel.status_code", "ERROR");
    }
}

impl<S: Store> LedgerService<S> {
    /// Now, on the engine's clock.
    fn now(&self) -> Millis {
        self.engine.clock().now()
    }

    async fn claim_rpc(
        &self,
        tenant: &str,
        req: &mut v1::ClaimRequest,
    ) -> Result<v1::ClaimResponse, ApiError> {
        if req.dry_run {
            return self.dry_run(tenant, req).await;
        }
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        let (args, wait) = self.claim_args(tenant, req)?;
        // Fingerprinted: the arguments (up to a MiB of payload_json) are not needed any more,
        // and a Claim may be held for a minute.
        req.arguments = None;
        let max_held = match wait {
            Some(w) if w > 0 => self.admission.policy().limits(tenant).held_claims,
            _ => 0,
        };
        let rule = self.intent_rule(tenant, req)?;
        // Boxed: the engine's future is kilobytes, and every layer above this one (tonic, the
        // guard, the router) moves its own future around; a pointer is cheaper to move.
        let (reply, matches) =
            match Box::pin(self.engine.claim_guarded(&id, &args, wait, max_held, rule))
                .await
                .map_err(|e| privacy::parent_as_asked(e, req))?
            {
                Guarded::Claimed { reply, matches } => (reply, matches),
                Guarded::Refused { matches } => {
                    Span::current().record("outcome", "DUPLICATE_INTENT");
                    return Ok(safety::duplicate_intent(matches));
                }
            };
        let outcome = convert::outcome(reply.outcome);
        let lease = reply.lease.as_ref().map(convert::lease);
        Span::current().record(
            "outcome",
            outcome.as_str_name().trim_start_matches("CLAIM_OUTCOME_"),
        );
        Ok(v1::ClaimResponse {
            outcome: outcome as i32,
            record: Some(self.answer(reply.record, &id, &req.key)),
            lease,
            retry_after: reply.retry_after.map(convert::duration),
            intent_matches: matches.into_iter().map(safety::intent_match).collect(),
        })
    }

    async fn complete_rpc(
        &self,
        tenant: &str,
        req: &mut v1::CompleteRequest,
    ) -> Result<v1::CompleteResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        let token = convert::lease_token(req.lease_token)?;
        let result = convert::op_result(req.result.take(), &self.limits)?;
        let record = Box::pin(self.engine.complete(&id, token, &result)).await?;
        Ok(v1::CompleteResponse {
            record: Some(self.answer(record, &id, &req.key)),
        })
    }

    async fn fail_rpc(
        &self,
        tenant: &str,
        req: &mut v1::FailRequest,
    ) -> Result<v1::FailResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        let token = convert::lease_token(req.lease_token)?;
        let error = convert::op_error(req.error.take(), &self.limits)?;
        let disposition = convert::disposition(req.disposition)?;
        let record = self
            .engine
            .fail_as(&id, token, &error, disposition, req.nothing_ran)
            .await?;
        Ok(v1::FailResponse {
            record: record.map(|r| self.answer(r, &id, &req.key)),
        })
    }

    async fn renew_rpc(
        &self,
        tenant: &str,
        req: &mut v1::RenewRequest,
    ) -> Result<v1::RenewResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        let token = convert::lease_token(req.lease_token)?;
        let ttl = convert::lease_ttl(req.lease_ttl.as_ref(), &self.limits)?;
        let lease = self.engine.renew(&id, token, ttl).await?;
        Ok(v1::RenewResponse {
            lease: Some(convert::lease(&lease)),
        })
    }

    async fn lookup_rpc(
        &self,
        tenant: &str,
        req: &mut v1::LookupRequest,
    ) -> Result<v1::LookupResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        let record = self.engine.lookup(&id).await?;
        let history = if req.include_history {
            convert::history(&record)
        } else {
            Vec::new()
        };
        Ok(v1::LookupResponse {
            history,
            record: Some(self.answer(record, &id, &req.key)),
        })
    }
}

/// A request naming one record: what an RPC's span and log line say it was about.
trait Keyed {
    fn namespace(&self) -> &str;
    fn key(&self) -> &str;
}

macro_rules! keyed {
    ($($message:ty),*) => {$(
        impl Keyed for $message {
            fn namespace(&self) -> &str {
                &self.namespace
            }
            fn key(&self) -> &str {
                &self.key
            }
        }
    )*};
}
keyed!(
    v1::ClaimRequest,
    v1::CompleteRequest,
    v1::FailRequest,
    v1::RenewRequest,
    v1::LookupRequest,
    v1::ApproveRequest,
    v1::RejectRequest,
    v1::PurgeRequest
);

/// Who an RPC's handler serves, taken from the request's extensions (set by the auth
/// interceptor): the tenant, and for the RPCs that record a decision, also the principal.
trait Caller: Sized {
    fn take(extensions: &mut tonic::Extensions) -> Result<Self, ApiError>;
    fn tenant(&self) -> &str;
}

/// The caller of most RPCs: its tenant.
struct TenantOf(String);

impl Caller for TenantOf {
    fn take(extensions: &mut tonic::Extensions) -> Result<Self, ApiError> {
        take_tenant(extensions).map(TenantOf)
    }
    fn tenant(&self) -> &str {
        &self.0
    }
}

/// The caller of Approve and Reject: its tenant and the principal the decision is recorded under.
struct Approver {
    tenant: String,
    principal: Principal,
}

impl Caller for Approver {
    fn take(extensions: &mut tonic::Extensions) -> Result<Self, ApiError> {
        let tenant = take_tenant(extensions)?;
        let principal = take_principal(extensions)?;
        Ok(Approver { tenant, principal })
    }
    fn tenant(&self) -> &str {
        &self.tenant
    }
}

/// Runs one keyed RPC: its span, its caller, the handler inside the span (borrowing the request,
/// so that a failure's log context can still name it), the code recorded.
async fn traced<M: Keyed, C: Caller, R>(
    name: &'static str,
    req: Request<M>,
    handler: impl AsyncFnOnce(&C, &mut M) -> Result<R, ApiError>,
) -> Result<Response<R>, Status> {
    let span = rpc_span(name, &req, req.get_ref().namespace(), req.get_ref().key());
    let (_, mut extensions, mut message) = req.into_parts();
    let (caller, result) = match C::take(&mut extensions) {
        Ok(caller) => {
            let result = handler(&caller, &mut message)
                .instrument(span.clone())
                .await;
            (Some(caller), result)
        }
        Err(e) => (None, Err(e)),
    };
    let context = LogContext {
        name,
        tenant: caller.as_ref().map_or("", Caller::tenant),
        namespace: message.namespace(),
        key: message.key(),
        privacy: extensions.get(),
    };
    finish(&span, context, result)
}

#[tonic::async_trait]
impl<S: Store> v1::ledger_server::Ledger for LedgerService<S> {
    async fn claim(
        &self,
        req: Request<v1::ClaimRequest>,
    ) -> Result<Response<v1::ClaimResponse>, Status> {
        traced("oncekey.v1.Ledger/Claim", req, async |c: &TenantOf, m| {
            self.claim_rpc(c.tenant(), m).await
        })
        .await
    }

    async fn complete(
        &self,
        req: Request<v1::CompleteRequest>,
    ) -> Result<Response<v1::CompleteResponse>, Status> {
        traced(
            "oncekey.v1.Ledger/Complete",
            req,
            async |c: &TenantOf, m| self.complete_rpc(c.tenant(), m).await,
        )
        .await
    }

    async fn fail(
        &self,
        req: Request<v1::FailRequest>,
    ) -> Result<Response<v1::FailResponse>, Status> {
        traced("oncekey.v1.Ledger/Fail", req, async |c: &TenantOf, m| {
            self.fail_rpc(c.tenant(), m).await
        })
        .await
    }

    async fn renew(
        &self,
        req: Request<v1::RenewRequest>,
    ) -> Result<Response<v1::RenewResponse>, Status> {
        traced("oncekey.v1.Ledger/Renew", req, async |c: &TenantOf, m| {
            self.renew_rpc(c.tenant(), m).await
        })
        .await
    }

    type KeepAliveStream = keepalive::LeaseStream;

    async fn keep_alive(
        &self,
        req: Request<Streaming<v1::KeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let span = rpc_span("oncekey.v1.Ledger/KeepAlive", &req, "", "");
        let (_, mut extensions, inbound) = req.into_parts();
        let result = match take_tenant(&mut extensions) {
            Ok(tenant) => keepalive::start(
                self.engine.clone(),
                &self.keepalives,
                &self.limits,
                &self.privacy,
                tenant,
                inbound,
            )
            .instrument(span.clone())
            .await
            .map(Response::new),
            Err(e) => Err(e.into()),
        };
        record_code(&span, &result);
        result
    }

    async fn lookup(
        &self,
        req: Request<v1::LookupRequest>,
    ) -> Result<Response<v1::LookupResponse>, Status> {
        traced("oncekey.v1.Ledger/Lookup", req, async |c: &TenantOf, m| {
            self.lookup_rpc(c.tenant(), m).await
        })
        .await
    }

    async fn approve(
        &self,
        req: Request<v1::ApproveRequest>,
    ) -> Result<Response<v1::ApproveResponse>, Status> {
        traced("oncekey.v1.Ledger/Approve", req, async |c: &Approver, m| {
            self.approve_rpc(&c.tenant, &c.principal, m).await
        })
        .await
    }

    async fn reject(
        &self,
        req: Request<v1::RejectRequest>,
    ) -> Result<Response<v1::RejectResponse>, Status> {
        traced("oncekey.v1.Ledger/Reject", req, async |c: &Approver, m| {
            self.reject_rpc(&c.tenant, &c.principal, m).await
        })
        .await
    }

    async fn purge(
        &self,
        req: Request<v1::PurgeRequest>,
    ) -> Result<Response<v1::PurgeResponse>, Status> {
        traced("oncekey.v1.Ledger/Purge", req, async |c: &TenantOf, m| {
            self.purge_rpc(c.tenant(), m).await
        })
        .await
    }

    async fn rekey(
        &self,
        req: Request<v1::RekeyRequest>,
    ) -> Result<Response<v1::RekeyResponse>, Status> {
        self.rekey_traced(req).await
    }

    async fn erase_tenant(
        &self,
        req: Request<v1::EraseTenantRequest>,
    ) -> Result<Response<v1::EraseTenantResponse>, Status> {
        self.erase_tenant_traced(req).await
    }

    async fn list_duplicate_intents(
        &self,
        req: Request<v1::ListDuplicateIntentsRequest>,
    ) -> Result<Response<v1::ListDuplicateIntentsResponse>, Status> {
        let name = "oncekey.v1.Ledger/ListDuplicateIntents";
        listing(
            name,
            req,
            |m| &m.namespace,
            async |tenant, m| self.list_duplicate_intents_rpc(tenant, m).await,
        )
        .await
    }

    async fn list_records(
        &self,
        req: Request<v1::ListRecordsRequest>,
    ) -> Result<Response<v1::ListRecordsResponse>, Status> {
        let name = "oncekey.v1.Ledger/ListRecords";
        listing(
            name,
            req,
            |m| &m.namespace,
            async |tenant, m| self.list_records_rpc(tenant, m).await,
        )
        .await
    }
}

/// A listing RPC (ListRecords, ListDuplicateIntents), traced as `name`: it names no key, so its
/// span and log context carry the namespace asked for (`namespace_of`) and the caller's tenant.
async fn listing<Req, Resp>(
    name: &'static str,
    req: Request<Req>,
    namespace_of: fn(&Req) -> &str,
    run: impl AsyncFnOnce(&str, &Req) -> Result<Resp, ApiError>,
) -> Result<Response<Resp>, Status> {
    let span = rpc_span(name, &req, namespace_of(req.get_ref()), "");
    let (_, mut extensions, message) = req.into_parts();
    let (tenant, result) = match take_tenant(&mut extensions) {
        Ok(tenant) => {
            let result = run(&tenant, &message).instrument(span.clone()).await;
            (tenant, result)
        }
        Err(e) => (String::new(), Err(e)),
    };
    let context = LogContext {
        name,
        tenant: &tenant,
        namespace: namespace_of(&message),
        key: "",
        privacy: None,
    };
    finish(&span, context, result)
}

#[cfg(test)]
mod tests;
