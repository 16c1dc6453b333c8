//! The upstream side: one pooled HTTP/1.1 client (hyper) to `--upstream`, and how a client's
//! request becomes the upstream's (its path under the upstream's base path, proxy headers).
//!
//! This module sends requests and returns what came back, including whether a request that got
//! no answer may have reached the upstream (the client had a connection for it: its first byte may
//! have been written); what that means for the key is the proxy's business.

use crate::headers::{self, Origin};
use axum::body::Body;
use http::header::HeaderValue;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::{capture_connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::time::Duration;

/// Why no upstream response came.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be opened (refused, unreachable, connect timeout): nothing was sent.
    #[error("upstream unreachable: {0}")]
    Unreachable(String),
    /// The connection broke before a whole answer arrived (reset, closed, malformed): the request
    /// may have reached the upstream.
    #[error("upstream connection broken: {0}")]
    Broken(String),
    /// No answer within `--upstream-timeout`; `sent` when the request may have reached the
    /// upstream (a connection was open for it).
    #[error("upstream timeout")]
    Timeout {
        /// The request may have reached the upstream.
        sent: bool,
    },
}

impl UpstreamError {
    /// True when the request may have reached the upstream (so it may have acted on it).
    pub fn sent(&self) -> bool {
        match self {
            UpstreamError::Unreachable(_) => false,
            UpstreamError::Broken(_) => true,
            UpstreamError::Timeout { sent } => *sent,
        }
    }
}

/// The upstream service.
#[derive(Clone)]
pub struct Upstream {
    client: Client<HttpConnector, Body>,
    authority: http::uri::Authority,
    host: HeaderValue,
    prefix: String,
}

impl Upstream {
    /// A client for the upstream at `authority` whose paths start with `prefix` (no trailing `/`).
    pub fn new(authority: http::uri::Authority, prefix: String) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        let host = HeaderValue::from_str(authority.as_str())
            .unwrap_or_else(|_| HeaderValue::from_static("localhost"));
        Upstream {
            client,
            authority,
            host,
            prefix,
        }
    }

    /// The upstream URI of a request for `uri` (its path and query under the base path).
    pub fn uri(&self, uri: &Uri) -> Result<Uri, http::Error> {
        let path_and_query = uri.path_and_query().map_or("/", |pq| pq.as_str());
        let path_and_query = if path_and_query.starts_with('/') {
            format!("{}{path_and_query}", self.prefix)
        } else {
            // Only `*` (OPTIONS) lacks a leading slash.
            format!("{}/{path_and_query}", self.prefix)
        };
        Uri::builder()
            .scheme("http")
            .authority(self.authority.clone())
            .path_and_query(path_and_query)
            .build()
    }

    /// Sends `parts` with `body` upstream and waits (at most `timeout`) for the response head.
    pub async fn send(
        &self,
        mut parts: http::request::Parts,
        body: Body,
        origin: &Origin,
        timeout: Duration,
    ) -> Result<Response<Incoming>, UpstreamError> {
        parts.uri = self
            .uri(&parts.uri)
            .map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
        headers::for_upstream(&mut parts.headers, origin, &self.host);
        // The upstream connection is HTTP/1.1 whatever the client spoke.
        parts.version = http::Version::HTTP_11;
        let mut request = Request::from_parts(parts, body);
        // Set once the client has a connection for the request, just before writing it.
        let connection = capture_connection(&mut request);
        let had_connection = || connection.connection_metadata().is_some();
        match tokio::time::timeout(timeout, self.client.request(request)).await {
            Err(_) => Err(UpstreamError::Timeout {
                sent: had_connection(),
            }),
            Ok(Err(e)) if e.is_connect() || !had_connection() => {
                Err(UpstreamError::Unreachable(error_chain(&e)))
            }
            Ok(Err(e)) => Err(UpstreamError::Broken(error_chain(&e))),
            Ok(Ok(response)) => Ok(response),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_go_under_the_base_path() {
        let u = Upstream::new("127.0.0.1:9000".parse().unwrap(), "/api".into());
        let uri = u.uri(&"/v1/charges?x=1".parse().unwrap()).unwrap();
        assert_eq!(uri.to_string(), "http://127.0.0.1:9000/api/v1/charges?x=1");
        let root = Upstream::new("127.0.0.1:9000".parse().unwrap(), String::new());
        let uri = root.uri(&"http://gw.example/a/b".parse().unwrap()).unwrap();
        assert_eq!(uri.to_string(), "http://127.0.0.1:9000/a/b");
    }
}
