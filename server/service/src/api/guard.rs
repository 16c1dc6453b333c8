//! The checks in front of the Ledger service, as one tower layer shape: a [`Guard`] looks at a
//! request before it is decoded (the authenticating interceptor has put the caller in its
//! extensions) and either refuses it, answering with the error's status at once, or lets it
//! through with a permit that may follow the response (admission keeps an RPC counted in
//! progress until its answer is sent). The scope check and per-tenant admission are guards.

use super::error::ApiError;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A check in front of the Ledger service.
pub trait Guard: Clone + Send + 'static {
    /// What a request let through carries to its response.
    type Permit: Send + 'static;

    /// Lets `request` through, or refuses it with an error for the caller.
    fn check<B>(&self, request: &http::Request<B>) -> Result<Self::Permit, ApiError>;

    /// The response of a request let through with `permit` (the permit may ride on its body).
    fn respond(
        permit: Self::Permit,
        response: http::Response<tonic::body::Body>,
    ) -> http::Response<tonic::body::Body>;
}

/// The tower layer of a [`Guard`].
#[derive(Clone, Debug, Default)]
pub struct GuardLayer<G>(pub G);

impl<S, G: Clone> tower::Layer<S> for GuardLayer<G> {
    type Service = Guarded<S, G>;
    fn layer(&self, inner: S) -> Self::Service {
        Guarded {
            inner,
            guard: self.0.clone(),
        }
    }
}

/// A service behind a [`Guard`].
#[derive(Clone, Debug)]
pub struct Guarded<S, G> {
    inner: S,
    guard: G,
}

impl<S: tonic::server::NamedService, G> tonic::server::NamedService for Guarded<S, G> {
    const NAME: &'static str = S::NAME;
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, G, B> tower::Service<http::Request<B>> for Guarded<S, G>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    G: Guard,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        match self.guard.check(&request) {
            Err(e) => {
                let response = tonic::Status::from(e).into_http();
                Box::pin(std::future::ready(Ok(response)))
            }
            Ok(permit) => {
                let response = self.inner.call(request);
                Box::pin(async move { Ok(G::respond(permit, response.await?)) })
            }
        }
    }
}
