//! The Rust client for Oncekey, the shared idempotency ledger.
//!
//! `Client::connect` opens one HTTP/2 channel (cheap to clone) that sends the caller's bearer token
//! (or, against a dev-mode server, its tenant header) with every call; `Client::ledger` gives the
//! generated `oncekey.v1.Ledger` client for full control over each RPC.

pub use oncekey_api as api;
pub use oncekey_api::fingerprint;

use oncekey_api::v1::ledger_client::LedgerClient;
use std::time::Duration;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

/// Why a client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The endpoint address is malformed.
    #[error("invalid endpoint {0:?}: {1}")]
    Endpoint(String, String),
    /// A credential cannot be sent as a header.
    #[error("invalid {0}: not a valid header value")]
    Header(&'static str),
    /// The server could not be reached.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
}

/// How to reach and authenticate to a server.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// The bearer token (servers with a tokens file).
    pub token: Option<String>,
    /// The tenant header (dev-mode servers without tokens).
    pub tenant: Option<String>,
    /// Per-call timeout.
    pub timeout: Option<Duration>,
    /// Connection timeout.
    pub connect_timeout: Option<Duration>,
}

/// Adds the credentials to every call.
#[derive(Clone)]
pub struct Credentials {
    authorization: Option<AsciiMetadataValue>,
    tenant: Option<AsciiMetadataValue>,
}

impl tonic::service::Interceptor for Credentials {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.authorization {
            req.metadata_mut().insert("authorization", value.clone());
        }
        if let Some(value) = &self.tenant {
            req.metadata_mut()
                .insert(oncekey_api::TENANT_HEADER, value.clone());
        }
        Ok(req)
    }
}

/// The generated Ledger client with credentials attached.
pub type LedgerRpc = LedgerClient<InterceptedService<Channel, Credentials>>;

/// A connection to an Oncekey server; cheap to clone (all clones share one HTTP/2 channel).
#[derive(Clone)]
pub struct Client {
    ledger: LedgerRpc,
}

impl Client {
    /// Connects to `endpoint` (e.g. `http://127.0.0.1:50051`).
    pub async fn connect(endpoint: &str, options: ConnectOptions) -> Result<Self, ClientError> {
        let mut ep = Endpoint::from_shared(endpoint.to_owned())
            .map_err(|e| ClientError::Endpoint(endpoint.to_owned(), e.to_string()))?
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_while_idle(true);
        if let Some(t) = options.timeout {
            ep = ep.timeout(t);
        }
        ep = ep.connect_timeout(options.connect_timeout.unwrap_or(Duration::from_secs(5)));
        let channel = ep
            .connect()
            .await
            .map_err(|e| ClientError::Connect(endpoint.to_owned(), error_chain(&e)))?;
        let credentials = Credentials {
            authorization: options
                .token
                .map(|t| {
                    MetadataValue::try_from(format!("Bearer {t}"))
                        .map_err(|_| ClientError::Header("token"))
                })
                .transpose()?,
            tenant: options
                .tenant
                .map(|t| MetadataValue::try_from(t).map_err(|_| ClientError::Header("tenant")))
                .transpose()?,
        };
        Ok(Self {
            ledger: LedgerClient::with_interceptor(channel, credentials),
        })
    }

    /// The generated client, for calling each RPC directly.
    pub fn ledger(&self) -> LedgerRpc {
        self.ledger.clone()
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
