//! The TCP connector of every channel: hyper's, set up as tonic sets up its own (any scheme,
//! `TCP_NODELAY`), with the connection's writes coalesced (`oncekey_coalesce`), so that
//! requests many callers send at once on one channel leave in one `writev` instead of one each.
//! TLS, when configured, is tonic's, on top of it; the connect timeout is tonic's too.
//!
//! [`Client::connect`](crate::Client::connect) uses it; a program that builds its own tonic
//! channel gets the same with `Endpoint::connect_with_connector(Connector::new())`.

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use oncekey_coalesce::Coalesce;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::net::TcpStream;
use tonic::transport::Uri;

/// The connector (see the module docs).
#[derive(Debug, Clone)]
pub struct Connector {
    http: HttpConnector,
}

impl Default for Connector {
    fn default() -> Self {
        Self::new()
    }
}

impl Connector {
    /// A connector dialing TCP with `TCP_NODELAY`.
    pub fn new() -> Self {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        Self { http }
    }
}

/// Why a connection could not be made.
pub type ConnectError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<Uri> for Connector {
    type Response = TokioIo<Coalesce<TcpStream>>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.http.call(uri);
        Box::pin(async move {
            let io = connecting.await?;
            Ok(TokioIo::new(Coalesce::new(io.into_inner())))
        })
    }
}
