//! The bench's gRPC side: M channels (one HTTP/2 connection each) and, per worker, the generated
//! Ledger and Health clients with every request part that does not change precomputed — the
//! fingerprint bytes, the result body, the identity header.

use super::args::BenchArgs;
use super::claimed::Claimed;
use anyhow::Context as _;
use oncekey_api::v1::{self, ledger_client::LedgerClient};
use tonic::metadata::{AsciiMetadataValue, MetadataKey};
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};

/// The arguments every bench Claim carries; only their fingerprint travels (`--cql-raw` stores
/// the same fingerprint).
pub(super) const ARGUMENTS: &str = r#"{"bench":"oncekey","amount":1250,"currency":"EUR"}"#;

/// Connections to one server.
pub struct Target {
    channels: Vec<Channel>,
    identity: (MetadataKey<tonic::metadata::Ascii>, AsciiMetadataValue),
    fingerprint: Vec<u8>,
    body: Vec<u8>,
    namespace: String,
}

impl Target {
    /// Opens `--connections` HTTP/2 connections to `--server` (over TLS with `args.tls`).
    pub async fn connect(args: &BenchArgs) -> anyhow::Result<Self> {
        let mut endpoint = Endpoint::from_shared(args.server.clone())
            .with_context(|| format!("bad --server {}", args.server))?
            .tcp_nodelay(true)
            .connect_timeout(std::time::Duration::from_secs(5));
        if let Some(tls) = &args.tls {
            endpoint = endpoint.tls_config(tls.config()?)?;
        }
        let mut channels = Vec::with_capacity(args.connections);
        for _ in 0..args.connections {
            // A separate `connect` per channel: its own TCP connection, not a shared one; the Rust
            // client's connector (writes coalesced), as a Rust service would connect.
            let channel = endpoint
                .connect_with_connector(oncekey_client::transport::Connector::new())
                .await
                .with_context(|| format!("cannot connect to {}", args.server))?;
            channels.push(channel);
        }
        let identity = match &args.token {
            Some(token) => (
                MetadataKey::from_static("authorization"),
                format!("Bearer {token}")
                    .parse()
                    .context("the token is not a valid header value")?,
            ),
            None => (
                MetadataKey::from_static("x-oncekey-tenant"),
                args.tenant
                    .parse()
                    .context("the tenant is not a valid header value")?,
            ),
        };
        let fingerprint = oncekey_api::fingerprint::fingerprint_json(ARGUMENTS)
            .expect("valid JSON")
            .to_vec();
        Ok(Self {
            channels,
            identity,
            fingerprint,
            body: vec![b'x'; args.body_bytes],
            namespace: args.namespace.clone(),
        })
    }

    /// Worker `i`'s clients, on connection `i % M`.
    pub fn worker(&self, i: usize) -> GrpcConn {
        let channel = self.channels[i % self.channels.len()].clone();
        GrpcConn {
            ledger: LedgerClient::new(channel.clone()),
            health: HealthClient::new(channel),
            identity: self.identity.clone(),
            fingerprint: self.fingerprint.clone(),
            body: self.body.clone(),
            namespace: self.namespace.clone(),
        }
    }
}

/// One worker's clients (clones share the connection).
#[derive(Clone)]
pub struct GrpcConn {
    ledger: LedgerClient<Channel>,
    health: HealthClient<Channel>,
    identity: (MetadataKey<tonic::metadata::Ascii>, AsciiMetadataValue),
    fingerprint: Vec<u8>,
    body: Vec<u8>,
    namespace: String,
}

impl GrpcConn {
    fn request<T>(&self, message: T) -> Request<T> {
        let mut request = Request::new(message);
        request
            .metadata_mut()
            .insert(self.identity.0.clone(), self.identity.1.clone());
        request
    }

    /// One grpc.health.v1 Check.
    pub async fn noop(&mut self) -> Result<(), Status> {
        let request = self.request(HealthCheckRequest {
            service: String::new(),
        });
        self.health.check(request).await.map(|_| ())
    }

    /// One Claim of `key` with the precomputed fingerprint.
    pub async fn claim(&mut self, key: String) -> Result<Claimed, Status> {
        let request = self.request(v1::ClaimRequest {
            namespace: self.namespace.clone(),
            key,
            arguments: Some(v1::claim_request::Arguments::Fingerprint(
                self.fingerprint.clone(),
            )),
            owner: "bench".into(),
            ..Default::default()
        });
        let reply = self.ledger.claim(request).await?.into_inner();
        Ok(Claimed {
            outcome: reply.outcome,
            token: reply.lease.map_or(0, |l| l.token),
        })
    }

    /// One Complete of `key` storing the precomputed body.
    pub async fn complete(&mut self, key: String, token: u64) -> Result<(), Status> {
        let request = self.request(v1::CompleteRequest {
            namespace: self.namespace.clone(),
            key,
            lease_token: token,
            result: Some(v1::OperationResult {
                code: 200,
                body: self.body.clone(),
                content_type: "application/json".into(),
                ..Default::default()
            }),
        });
        self.ledger.complete(request).await.map(|_| ())
    }
}
