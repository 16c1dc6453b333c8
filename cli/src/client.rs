//! `oncekey claim|complete|fail|lookup`: one RPC each, for operators and scripts. Output is one
//! JSON document on stdout; a gRPC error prints `error: CODE REASON: message` on stderr, exit 1.

use clap::{Args, ValueEnum};
use oncekey_api::v1;
use oncekey_client::{Client, ConnectOptions};
use oncekey_server::settings::parse_duration;
use serde_json::{json, Value};
use std::path::PathBuf;
use tonic_types::StatusExt;

pub use crate::render::{describe_status, record_json};
use crate::render::{lease_json, text};

/// Where the server is and who we are.
#[derive(Debug, Clone, Args)]
pub struct ConnArgs {
    /// Server address.
    #[arg(long, env = "ONCEKEY_SERVER", default_value = "http://127.0.0.1:50051")]
    pub server: String,
    /// Bearer token (servers with a tokens file).
    #[arg(long, env = "ONCEKEY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Tenant header (dev-mode servers).
    #[arg(long, env = "ONCEKEY_TENANT")]
    pub tenant: Option<String>,
    /// TLS to the server.
    #[command(flatten)]
    pub tls: TlsArgs,
}

/// TLS settings of the client commands (use an `https://` server address).
#[derive(Debug, Clone, Default, Args)]
pub struct TlsArgs {
    /// PEM CA certificate(s) that signed the server's certificate.
    #[arg(long, env = "ONCEKEY_CLIENT_TLS_CA")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// PEM client certificate, for servers started with --tls-client-ca (mutual TLS).
    #[arg(long, env = "ONCEKEY_CLIENT_TLS_CERT", requires = "tls_client_key")]
    pub tls_client_cert: Option<std::path::PathBuf>,
    /// PEM private key of --tls-client-cert.
    #[arg(long, env = "ONCEKEY_CLIENT_TLS_KEY", requires = "tls_client_cert")]
    pub tls_client_key: Option<std::path::PathBuf>,
    /// Name to verify the server certificate against (default: the address's host).
    #[arg(long, env = "ONCEKEY_CLIENT_TLS_DOMAIN")]
    pub tls_domain: Option<String>,
}

impl TlsArgs {
    /// The client's TLS options, reading the files; `None` without --tls-ca.
    pub fn options(&self) -> anyhow::Result<Option<oncekey_client::TlsOptions>> {
        let Some(ca) = &self.tls_ca else {
            return Ok(None);
        };
        let read = |flag: &str, path: &std::path::Path| {
            std::fs::read(path).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))
        };
        Ok(Some(oncekey_client::TlsOptions {
            ca_cert_pem: Some(read("--tls-ca", ca)?),
            client_cert_pem: self
                .tls_client_cert
                .as_deref()
                .map(|p| read("--tls-client-cert", p))
                .transpose()?,
            client_key_pem: self
                .tls_client_key
                .as_deref()
                .map(|p| read("--tls-client-key", p))
                .transpose()?,
            domain: self.tls_domain.clone(),
        }))
    }
}

/// `oncekey claim`
#[derive(Debug, Clone, Args)]
pub struct ClaimCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Operation kind, e.g. payments.charge.
    namespace: String,
    /// Idempotency key.
    key: String,
    /// The operation's arguments as JSON (the server fingerprints them).
    #[arg(
        long,
        conflicts_with = "fingerprint",
        required_unless_present = "fingerprint"
    )]
    payload: Option<String>,
    /// The arguments' fingerprint as 64 hex digits.
    #[arg(long)]
    fingerprint: Option<String>,
    /// Lease length, e.g. 30s.
    #[arg(long, value_parser = parse_duration)]
    lease: Option<i64>,
    /// Retention, e.g. 24h.
    #[arg(long, value_parser = parse_duration)]
    retention: Option<i64>,
    /// At-most-once semantics (default at-least-once).
    #[arg(long)]
    at_most_once: bool,
    /// Who is claiming.
    #[arg(long, default_value = "oncekey-cli")]
    owner: String,
    /// Parent operation as NAMESPACE/KEY.
    #[arg(long)]
    parent: Option<String>,
    /// Acquire an UNKNOWN operation to reconcile it.
    #[arg(long)]
    reconcile: bool,
    /// Wait up to this long for an in-flight operation to settle (or one awaiting approval to
    /// be decided), e.g. 10s.
    #[arg(long, value_parser = parse_duration)]
    wait: Option<i64>,
    /// Show what this Claim would get now, writing nothing (no record, lease or receipt).
    #[arg(long)]
    dry_run: bool,
    /// Create the operation awaiting approval: nobody acquires it before `oncekey approve`.
    #[arg(long)]
    require_approval: bool,
    /// Cap the acquisitions (reconciliations not counted; 0 = no cap): past it the operation
    /// fails with code 429 instead of being retried.
    #[arg(long, default_value_t = 0)]
    max_attempts: u32,
    /// The intent guard for this Claim (off, warn, refuse): stricter than the namespace's
    /// setting, never looser.
    #[arg(long, value_parser = ["off", "warn", "refuse"])]
    intent_guard: Option<String>,
    /// The intent window this Claim asks for (1s ..= 24h), e.g. 30m.
    #[arg(long, value_parser = parse_duration)]
    intent_window: Option<i64>,
    /// The repeat of another key's arguments is deliberate: a refusing guard lets it through.
    #[arg(long)]
    repeat_intent: bool,
    /// Run budget (this operation is a parent): at most this many child operations.
    #[arg(long)]
    max_children: Option<u32>,
    /// Run budget: at most N children in namespace NS, as NS=N (repeatable).
    #[arg(long, value_name = "NS=N")]
    max_per_namespace: Vec<String>,
}

/// `oncekey complete`
#[derive(Debug, Clone, Args)]
pub struct CompleteCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Operation kind.
    namespace: String,
    /// Idempotency key.
    key: String,
    /// The fencing token from the Claim.
    #[arg(long)]
    lease_token: u64,
    /// Result code.
    #[arg(long, default_value_t = 0)]
    code: i32,
    /// Result body (text).
    #[arg(long, conflicts_with = "body_file")]
    body: Option<String>,
    /// Result body read from a file.
    #[arg(long)]
    body_file: Option<PathBuf>,
    /// Media type of the body.
    #[arg(long, default_value = "")]
    content_type: String,
    /// Metadata entries NAME=VALUE (repeatable).
    #[arg(long = "meta", value_parser = parse_pair)]
    metadata: Vec<(String, String)>,
}

/// How a Fail settles the operation.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DispositionArg {
    /// The next Claim acquires again.
    Retryable,
    /// Replayed to later Claims.
    Final,
    /// Deleted; the key may be claimed again.
    Abandon,
}

/// `oncekey fail`
#[derive(Debug, Clone, Args)]
pub struct FailCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Operation kind.
    namespace: String,
    /// Idempotency key.
    key: String,
    /// The fencing token from the Claim.
    #[arg(long)]
    lease_token: u64,
    /// What the failure means.
    #[arg(long, value_enum)]
    disposition: DispositionArg,
    /// Error code.
    #[arg(long, default_value_t = 0)]
    code: i32,
    /// Error message.
    #[arg(long, default_value = "")]
    message: String,
    /// Nothing ran under this lease (it ran out before the Claim's answer arrived): the
    /// acquisition does not count against the operation's --max-attempts.
    #[arg(long)]
    nothing_ran: bool,
}

/// `oncekey lookup`
#[derive(Debug, Clone, Args)]
pub struct LookupCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Operation kind.
    namespace: String,
    /// Idempotency key.
    key: String,
    /// Print the record's receipt history as a timeline instead of the record as JSON.
    #[arg(long)]
    pub history: bool,
}

/// `oncekey health`
#[derive(Debug, Clone, Args)]
pub struct HealthCmd {
    /// Server address.
    #[arg(long, env = "ONCEKEY_SERVER", default_value = "http://127.0.0.1:50051")]
    server: String,
    /// The service to ask about; empty means the whole server.
    #[arg(long, default_value = "")]
    service: String,
    /// TLS to the server.
    #[command(flatten)]
    tls: TlsArgs,
}

fn parse_pair(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))
}

fn duration(ms: i64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    }
}

/// The generated client, connected with `conn`.
pub(crate) async fn connect(conn: &ConnArgs) -> anyhow::Result<oncekey_client::LedgerRpc> {
    let options = ConnectOptions {
        token: conn.token.clone(),
        tenant: conn.tenant.clone(),
        tls: conn.tls.options()?,
        ..Default::default()
    };
    Ok(Client::connect(&conn.server, options).await?.ledger())
}

/// A gRPC error as one line: `CODE REASON: message`.
pub fn describe(status: &tonic::Status) -> String {
    let reason = status
        .get_details_error_info()
        .map(|i| i.reason)
        .unwrap_or_default();
    format!(
        "{:?} {}: {}",
        status.code(),
        text(&reason),
        text(status.message())
    )
}

/// Runs `oncekey claim`.
pub async fn claim(cmd: ClaimCmd) -> anyhow::Result<Value> {
    let arguments = match (&cmd.payload, &cmd.fingerprint) {
        (Some(json), _) => v1::claim_request::Arguments::PayloadJson(json.clone()),
        (None, Some(hex_fp)) => v1::claim_request::Arguments::Fingerprint(
            hex::decode(hex_fp)
                .map_err(|_| anyhow::anyhow!("--fingerprint must be 64 hex digits"))?,
        ),
        (None, None) => anyhow::bail!("one of --payload or --fingerprint is required"),
    };
    let parent = match &cmd.parent {
        Some(p) => {
            let (namespace, key) = p
                .split_once('/')
                .ok_or_else(|| anyhow::anyhow!("--parent must be NAMESPACE/KEY"))?;
            Some(v1::OperationRef {
                namespace: namespace.into(),
                key: key.into(),
            })
        }
        None => None,
    };
    let request = v1::ClaimRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        arguments: Some(arguments),
        lease_ttl: cmd.lease.map(duration),
        retention: cmd.retention.map(duration),
        semantics: if cmd.at_most_once {
            v1::Semantics::AtMostOnce
        } else {
            v1::Semantics::AtLeastOnce
        } as i32,
        owner: cmd.owner.clone(),
        parent,
        reconcile: cmd.reconcile,
        wait: cmd.wait.map(duration),
        require_approval: cmd.require_approval,
        dry_run: cmd.dry_run,
        max_attempts: cmd.max_attempts,
        intent_guard: match cmd.intent_guard.as_deref() {
            Some("off") => v1::IntentGuard::Off,
            Some("warn") => v1::IntentGuard::Warn,
            Some("refuse") => v1::IntentGuard::Refuse,
            _ => v1::IntentGuard::Unspecified,
        } as i32,
        intent_window: cmd.intent_window.map(duration),
        repeat_intent: cmd.repeat_intent,
        budget: run_budget(cmd.max_children, &cmd.max_per_namespace)?,
    };
    let reply = connect(&cmd.conn).await?.claim(request).await?.into_inner();
    let outcome = v1::ClaimOutcome::try_from(reply.outcome).unwrap_or_default();
    Ok(json!({
        "dry_run": cmd.dry_run,
        "outcome": outcome.as_str_name().trim_start_matches("CLAIM_OUTCOME_"),
        "lease": reply.lease.as_ref().map(lease_json),
        "retry_after_ms": reply.retry_after.map(|d| d.seconds * 1000 + i64::from(d.nanos / 1_000_000)),
        "record": reply.record.as_ref().map(record_json),
        "intent_matches": reply.intent_matches.iter().map(crate::render::intent_match_json).collect::<Vec<_>>(),
    }))
}

/// The run budget of `--max-children` and `--max-per-namespace NS=N`, if any.
fn run_budget(
    max_children: Option<u32>,
    per_namespace: &[String],
) -> anyhow::Result<Option<v1::RunBudget>> {
    if max_children.is_none() && per_namespace.is_empty() {
        return Ok(None);
    }
    let mut max_per_namespace = std::collections::HashMap::new();
    for item in per_namespace {
        let (ns, n) = item
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--max-per-namespace must be NS=N, found {item:?}"))?;
        let n: u32 = n.parse().map_err(|_| {
            anyhow::anyhow!("--max-per-namespace {item:?}: N must be a whole number")
        })?;
        max_per_namespace.insert(ns.to_owned(), n);
    }
    Ok(Some(v1::RunBudget {
        max_children: max_children.unwrap_or(0),
        max_per_namespace,
    }))
}

/// Runs `oncekey complete`.
pub async fn complete(cmd: CompleteCmd) -> anyhow::Result<Value> {
    let body = match (&cmd.body, &cmd.body_file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) => std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("--body-file {}: {e}", path.display()))?,
        (None, None) => Vec::new(),
    };
    let request = v1::CompleteRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        lease_token: cmd.lease_token,
        result: Some(v1::OperationResult {
            code: cmd.code,
            body,
            content_type: cmd.content_type.clone(),
            metadata: cmd.metadata.iter().cloned().collect(),
        }),
    };
    let reply = connect(&cmd.conn)
        .await?
        .complete(request)
        .await?
        .into_inner();
    Ok(json!({ "record": reply.record.as_ref().map(record_json) }))
}

/// Runs `oncekey fail`.
pub async fn fail(cmd: FailCmd) -> anyhow::Result<Value> {
    let disposition = match cmd.disposition {
        DispositionArg::Retryable => v1::Disposition::Retryable,
        DispositionArg::Final => v1::Disposition::Final,
        DispositionArg::Abandon => v1::Disposition::Abandon,
    };
    let request = v1::FailRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        lease_token: cmd.lease_token,
        error: Some(v1::OperationError {
            code: cmd.code,
            message: cmd.message.clone(),
            details: vec![],
        }),
        disposition: disposition as i32,
        nothing_ran: cmd.nothing_ran,
    };
    let reply = connect(&cmd.conn).await?.fail(request).await?.into_inner();
    Ok(json!({ "record": reply.record.as_ref().map(record_json) }))
}

/// Runs `oncekey health`: fails unless the service is SERVING.
pub async fn health(cmd: HealthCmd) -> anyhow::Result<Value> {
    use tonic_health::pb::{
        health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    };
    let mut endpoint = tonic::transport::Endpoint::from_shared(cmd.server.clone())?
        .connect_timeout(std::time::Duration::from_secs(5))
        .timeout(std::time::Duration::from_secs(5));
    if let Some(tls) = cmd.tls.options()? {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = tls.ca_cert_pem {
            config = config.ca_certificate(Certificate::from_pem(ca));
        }
        if let (Some(cert), Some(key)) = (tls.client_cert_pem, tls.client_key_pem) {
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(domain) = tls.domain {
            config = config.domain_name(domain);
        }
        endpoint = endpoint.tls_config(config)?;
    }
    let channel = endpoint
        .connect()
        .await
        .map_err(|e| anyhow::anyhow!("cannot connect to {}: {e}", cmd.server))?;
    let reply = HealthClient::new(channel)
        .check(HealthCheckRequest {
            service: cmd.service.clone(),
        })
        .await?
        .into_inner();
    let status = ServingStatus::try_from(reply.status).unwrap_or(ServingStatus::Unknown);
    anyhow::ensure!(
        status == ServingStatus::Serving,
        "{:?} is {}",
        cmd.service,
        status.as_str_name()
    );
    Ok(json!({ "service": cmd.service, "status": status.as_str_name() }))
}

/// Runs `oncekey lookup`.
pub async fn lookup(cmd: LookupCmd) -> anyhow::Result<Value> {
    let request = v1::LookupRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        include_history: cmd.history,
    };
    let reply = connect(&cmd.conn)
        .await?
        .lookup(request)
        .await?
        .into_inner();
    Ok(json!({ "record": reply.record.as_ref().map(record_json) }))
}

/// Runs `oncekey lookup --history`: the record's receipts as a readable timeline.
pub async fn timeline(cmd: LookupCmd) -> anyhow::Result<String> {
    let request = v1::LookupRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        include_history: true,
    };
    let reply = connect(&cmd.conn)
        .await?
        .lookup(request)
        .await?
        .into_inner();
    Ok(crate::render::timeline_text(
        &reply.record.unwrap_or_default(),
        &reply.history,
    ))
}
