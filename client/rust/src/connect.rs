//! Connecting: the endpoint, credentials (bearer token or dev-mode tenant header), TLS, timeouts,
//! and the tower stack (retries, circuit breaker) that every clone of a [`Client`] shares over one
//! HTTP/2 channel.

use crate::credentials::{Credentials, LedgerRpc};
use crate::stack::{self, BreakerPolicy, CircuitBreakerLayer, Counters, RetryPolicy, Stack, Stats};
use oncekey_api::v1::ledger_client::LedgerClient;
use std::fmt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tonic::metadata::MetadataValue;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// The per-call timeout when [`ConnectOptions::timeout`] is unset.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The connection timeout when [`ConnectOptions::connect_timeout`] is unset.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The endpoint address is malformed.
    #[error("invalid endpoint {0:?}: {1}")]
    Endpoint(String, String),
    /// A credential cannot be sent as a header.
    #[error("invalid {0}: not a valid header value")]
    Header(&'static str),
    /// The TLS settings are unusable.
    #[error("invalid TLS settings: {0}")]
    Tls(String),
    /// The server could not be reached.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
}

/// How to reach and authenticate to a server. Every field has a sensible default.
#[derive(Clone, Default)]
pub struct ConnectOptions {
    /// The bearer token (servers with a tokens file).
    pub token: Option<String>,
    /// The tenant header (dev-mode servers without tokens).
    pub tenant: Option<String>,
    /// Per-attempt timeout of unary calls (default 10 s; a Claim that asks the server to `wait`
    /// gets that much longer). Streams have none.
    pub timeout: Option<Duration>,
    /// Connection timeout (default 5 s).
    pub connect_timeout: Option<Duration>,
    /// TLS settings; `https://` endpoints need at least the CA certificate that signed the
    /// server's certificate.
    pub tls: Option<TlsOptions>,
    /// How transient failures are retried (default 5 attempts, 500 ms initial, 15 s max backoff).
    pub retry: RetryPolicy,
    /// When the circuit breaker opens (default after 10 consecutive failures, for 5 s).
    pub breaker: BreakerPolicy,
    /// Names this process in `Claim.owner` (default `rust-client/<pid>`).
    pub owner: Option<String>,
    /// Connect on first use instead of in `connect` (which then never fails for an unreachable
    /// server).
    pub lazy: bool,
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tenant", &self.tenant)
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("tls", &self.tls)
            .field("retry", &self.retry)
            .field("breaker", &self.breaker)
            .field("owner", &self.owner)
            .field("lazy", &self.lazy)
            .finish()
    }
}

/// TLS settings, as PEM.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// The CA certificate(s) that signed the server's certificate.
    pub ca_cert_pem: Option<Vec<u8>>,
    /// The client certificate, for servers that require client certificates (mTLS).
    pub client_cert_pem: Option<Vec<u8>>,
    /// The client certificate's private key.
    pub client_key_pem: Option<Vec<u8>>,
    /// The name to verify the server's certificate against (default: the endpoint's host).
    pub domain: Option<String>,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("ca_cert_pem", &self.ca_cert_pem.is_some())
            .field("client_cert_pem", &self.client_cert_pem.is_some())
            .field(
                "client_key_pem",
                &self.client_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .field("domain", &self.domain)
            .finish()
    }
}

impl TlsOptions {
    /// Reads the CA certificate and, optionally, a client certificate and key from PEM files.
    pub fn from_files(
        ca_cert: impl AsRef<Path>,
        client_identity: Option<(&Path, &Path)>,
    ) -> std::io::Result<Self> {
        let mut tls = TlsOptions {
            ca_cert_pem: Some(std::fs::read(ca_cert)?),
            ..Default::default()
        };
        if let Some((cert, key)) = client_identity {
            tls.client_cert_pem = Some(std::fs::read(cert)?);
            tls.client_key_pem = Some(std::fs::read(key)?);
        }
        Ok(tls)
    }

    /// The tonic TLS configuration these options describe (for callers that build their own
    /// channels, like `oncekey bench`).
    pub fn config(&self) -> Result<ClientTlsConfig, ClientError> {
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &self.ca_cert_pem {
            config = config.ca_certificate(Certificate::from_pem(ca));
        }
        match (&self.client_cert_pem, &self.client_key_pem) {
            (Some(cert), Some(key)) => config = config.identity(Identity::from_pem(cert, key)),
            (None, None) => {}
            _ => {
                return Err(ClientError::Tls(
                    "a client certificate needs its key, and a key its certificate".into(),
                ))
            }
        }
        if let Some(domain) = &self.domain {
            config = config.domain_name(domain.clone());
        }
        Ok(config)
    }
}

/// A connection to an Oncekey server; cheap to clone (all clones share one HTTP/2 channel, one
/// retry policy and one circuit breaker).
///
/// - [`Client::once`]: claim, run, keep alive and settle an operation in one call.
/// - [`Client::claim`], [`Client::complete`], [`Client::fail`], [`Client::renew`],
///   [`Client::lookup`], [`Client::keep_alive`]: one typed RPC each, with retries.
/// - [`Client::ledger`]: the generated client, for full control.
#[derive(Clone)]
pub struct Client {
    pub(crate) rpc: LedgerRpc,
    pub(crate) stack: Stack,
    breaker: CircuitBreakerLayer,
    counters: Arc<Counters>,
    pub(crate) owner: Arc<str>,
    pub(crate) timeout: Duration,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("owner", &self.owner)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to `endpoint` (e.g. `http://127.0.0.1:50051`, or `https://…` with TLS).
    pub async fn connect(endpoint: &str, options: ConnectOptions) -> Result<Self, ClientError> {
        let mut ep = Endpoint::from_shared(endpoint.to_owned())
            .map_err(|e| ClientError::Endpoint(endpoint.to_owned(), e.to_string()))?
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true)
            .connect_timeout(options.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT));
        let tls = match (&options.tls, endpoint.starts_with("https://")) {
            (Some(tls), _) => Some(tls.config()?),
            (None, true) => Some(ClientTlsConfig::new()),
            (None, false) => None,
        };
        if let Some(tls) = tls {
            ep = ep
                .tls_config(tls)
                .map_err(|e| ClientError::Tls(error_chain(&e)))?;
        }
        let connector = crate::transport::Connector::new();
        let channel = if options.lazy {
            ep.connect_with_connector_lazy(connector)
        } else {
            ep.connect_with_connector(connector)
                .await
                .map_err(|e| ClientError::Connect(endpoint.to_owned(), error_chain(&e)))?
        };
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
        let rpc = LedgerClient::with_interceptor(channel, credentials);
        let counters = Arc::new(Counters::default());
        let breaker = CircuitBreakerLayer::new(options.breaker, counters.clone());
        let timeout = options.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let stack = stack::build(
            rpc.clone(),
            timeout,
            options.retry,
            &breaker,
            counters.clone(),
        );
        let owner = options
            .owner
            .unwrap_or_else(|| format!("rust-client/{}", std::process::id()));
        Ok(Self {
            rpc,
            stack,
            breaker,
            counters,
            owner: owner.into(),
            timeout,
        })
    }

    /// The generated client, for calling each RPC directly (no timeout, no retries, no breaker).
    pub fn ledger(&self) -> LedgerRpc {
        self.rpc.clone()
    }

    /// What the retry and breaker layers did so far, over every clone of this client.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        Stats {
            calls: c.calls.load(Ordering::Relaxed),
            attempts: c.attempts.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            circuit: self.breaker.state(),
        }
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
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
