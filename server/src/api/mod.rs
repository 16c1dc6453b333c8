//! The gRPC face of the ledger: `oncekey.v1.Ledger` over the engine. Each RPC validates its request
//! (`convert`), runs one engine call for the caller's tenant, and maps errors once (`error`).

pub mod auth;
pub mod convert;
pub mod error;
mod keepalive;
pub mod limits;

use crate::engine::Engine;
use crate::store::Store;
use auth::{Auth, Tenant};
use error::ApiError;
use limits::Limits;
use oncekey_api::v1;
use std::sync::Arc;
use tonic::{Request, Response, Status, Streaming};

/// The Ledger service for one store.
pub struct LedgerService<S> {
    engine: Arc<Engine<S>>,
    limits: Arc<Limits>,
}

impl<S: Store> LedgerService<S> {
    /// A service over `engine` enforcing `limits`.
    pub fn new(engine: Arc<Engine<S>>, limits: Limits) -> Self {
        Self {
            engine,
            limits: Arc::new(limits),
        }
    }

    /// The tonic server for this service, behind the authenticating interceptor.
    pub fn into_server(
        self,
        auth: Arc<Auth>,
    ) -> tonic::service::interceptor::InterceptedService<
        v1::ledger_server::LedgerServer<Self>,
        impl tonic::service::Interceptor + Clone,
    > {
        let max = self.limits.max_message_bytes();
        let server = v1::ledger_server::LedgerServer::new(self)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max);
        tonic::service::interceptor::InterceptedService::new(server, move |mut req: Request<()>| {
            let tenant = auth.authenticate(req.metadata()).map_err(Status::from)?;
            req.extensions_mut().insert(tenant);
            Ok(req)
        })
    }
}

fn tenant<T>(req: &Request<T>) -> Result<String, Status> {
    req.extensions()
        .get::<Tenant>()
        .map(|t| t.0.clone())
        .ok_or_else(|| ApiError::Unauthenticated("no credentials").into())
}

#[tonic::async_trait]
impl<S: Store> v1::ledger_server::Ledger for LedgerService<S> {
    async fn claim(
        &self,
        req: Request<v1::ClaimRequest>,
    ) -> Result<Response<v1::ClaimResponse>, Status> {
        let tenant = tenant(&req)?;
        let req = req.into_inner();
        let id = convert::record_id(&tenant, &req.namespace, &req.key)?;
        let (args, wait) = convert::claim_args(&req, &self.limits)?;
        let reply = self
            .engine
            .claim(&id, &args, wait)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(v1::ClaimResponse {
            outcome: convert::outcome(reply.outcome) as i32,
            record: Some(convert::record(&reply.record)),
            lease: reply.lease.as_ref().map(convert::lease),
            retry_after: reply.retry_after.map(convert::duration),
        }))
    }

    async fn complete(
        &self,
        req: Request<v1::CompleteRequest>,
    ) -> Result<Response<v1::CompleteResponse>, Status> {
        let tenant = tenant(&req)?;
        let req = req.into_inner();
        let id = convert::record_id(&tenant, &req.namespace, &req.key)?;
        let token = convert::lease_token(req.lease_token)?;
        let result = convert::op_result(req.result, &self.limits)?;
        let record = self
            .engine
            .complete(&id, token, &result)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(v1::CompleteResponse {
            record: Some(convert::record(&record)),
        }))
    }

    async fn fail(
        &self,
        req: Request<v1::FailRequest>,
    ) -> Result<Response<v1::FailResponse>, Status> {
        let tenant = tenant(&req)?;
        let req = req.into_inner();
        let id = convert::record_id(&tenant, &req.namespace, &req.key)?;
        let token = convert::lease_token(req.lease_token)?;
        let error = convert::op_error(req.error, &self.limits)?;
        let disposition = convert::disposition(req.disposition)?;
        let record = self
            .engine
            .fail(&id, token, &error, disposition)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(v1::FailResponse {
            record: record.as_ref().map(convert::record),
        }))
    }

    async fn renew(
        &self,
        req: Request<v1::RenewRequest>,
    ) -> Result<Response<v1::RenewResponse>, Status> {
        let tenant = tenant(&req)?;
        let req = req.into_inner();
        let id = convert::record_id(&tenant, &req.namespace, &req.key)?;
        let token = convert::lease_token(req.lease_token)?;
        let ttl = convert::lease_ttl(req.lease_ttl.as_ref(), &self.limits)?;
        let lease = self
            .engine
            .renew(&id, token, ttl)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(v1::RenewResponse {
            lease: Some(convert::lease(&lease)),
        }))
    }

    type KeepAliveStream = keepalive::LeaseStream;

    async fn keep_alive(
        &self,
        req: Request<Streaming<v1::KeepAliveRequest>>,
    ) -> Result<Response<Self::KeepAliveStream>, Status> {
        let tenant = tenant(&req)?;
        let stream =
            keepalive::start(self.engine.clone(), &self.limits, tenant, req.into_inner()).await?;
        Ok(Response::new(stream))
    }

    async fn lookup(
        &self,
        req: Request<v1::LookupRequest>,
    ) -> Result<Response<v1::LookupResponse>, Status> {
        let tenant = tenant(&req)?;
        let req = req.into_inner();
        let id = convert::record_id(&tenant, &req.namespace, &req.key)?;
        let record = self.engine.lookup(&id).await.map_err(ApiError::from)?;
        Ok(Response::new(v1::LookupResponse {
            record: Some(convert::record(&record)),
        }))
    }
}
