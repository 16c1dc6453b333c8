//! The `oncekey` command line (CONTRACT §8): every flag also as `ONCEKEY_<FLAG>`.

use crate::api::limits::Limits;
use crate::ledger::Millis;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Oncekey: a shared idempotency ledger served over gRPC.
#[derive(Debug, Parser)]
#[command(name = "oncekey", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server.
    Serve(Box<ServeArgs>),
    /// Create the CQL keyspace and apply the migrations built into this binary (idempotent).
    Migrate(MigrateArgs),
    /// Manage bearer tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Claim a key (client side).
    Claim(crate::cli::client::ClaimCmd),
    /// Complete an acquired key (client side).
    Complete(crate::cli::client::CompleteCmd),
    /// Fail an acquired key (client side).
    Fail(crate::cli::client::FailCmd),
    /// Show a key's record (client side).
    Lookup(crate::cli::client::LookupCmd),
    /// Ask a server's grpc.health.v1 service; exit 0 only when SERVING (for probes and helm test).
    Health(crate::cli::client::HealthCmd),
    /// Approve an operation that awaits approval (client side; needs the approve scope).
    Approve(crate::cli::operations::DecideCmd),
    /// Reject an operation that awaits approval: it fails with code 403 (needs the approve scope).
    Reject(crate::cli::operations::DecideCmd),
    /// Remove a record and its history in any state (client side; needs the admin scope).
    Purge(crate::cli::operations::PurgeCmd),
    /// Load-test a running server (and optionally the PostgreSQL design) over real gRPC.
    Bench(Box<crate::bench::BenchArgs>),
    /// Run an HTTP reverse proxy giving an upstream service Idempotency-Key semantics.
    Gateway(Box<crate::cli::gateway::GatewayCmd>),
}

/// `oncekey token …`
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Print a new random token and its tokens-file line (which holds only the token's hash).
    New {
        /// The tenant the token authenticates as.
        #[arg(long, env = "ONCEKEY_TENANT")]
        tenant: String,
        /// A name for the token's holder, recorded as `decided_by` of its approvals.
        #[arg(long)]
        label: Option<String>,
        /// What the token may do (repeatable): ledger (the default), approve, admin.
        #[arg(long = "scope", value_delimiter = ',')]
        scopes: Vec<String>,
    },
}

/// Which store holds the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// One redb file under --data-dir (single machine).
    Embedded,
    /// A ScyllaDB / Apache Cassandra cluster.
    Cql,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Connection settings for the CQL store.
#[derive(Debug, Clone, Args)]
pub struct CqlArgs {
    /// Contact points, comma-separated host:port.
    #[arg(
        long,
        env = "ONCEKEY_CQL_NODES",
        value_delimiter = ',',
        default_value = "127.0.0.1:9042"
    )]
    pub cql_nodes: Vec<String>,
    /// Keyspace holding the ledger.
    #[arg(long, env = "ONCEKEY_CQL_KEYSPACE", default_value = "oncekey")]
    pub cql_keyspace: String,
    /// Local datacenter: DC-aware routing (requests stay in it) and LOCAL_QUORUM reads and
    /// commits. Lightweight transactions stay SERIAL (cluster-wide) unless
    /// --cql-serial-consistency says otherwise.
    #[arg(long, env = "ONCEKEY_CQL_LOCAL_DC")]
    pub cql_local_dc: Option<String>,
    /// CQL user name.
    #[arg(long, env = "ONCEKEY_CQL_USERNAME")]
    pub cql_username: Option<String>,
    /// CQL password.
    #[arg(long, env = "ONCEKEY_CQL_PASSWORD", hide_env_values = true)]
    pub cql_password: Option<String>,
    /// Consistency of the Paxos phase of every conditional write and of linearizable reads.
    /// `serial`: one Paxos across every datacenter, so two DCs can never both acquire a key.
    /// `local-serial`: Paxos within --cql-local-dc only, which is safe only when each key is only
    /// ever written from one datacenter (needs --cql-local-dc and --cql-keys-dc-pinned).
    #[arg(
        long,
        env = "ONCEKEY_CQL_SERIAL_CONSISTENCY",
        value_enum,
        default_value = "serial"
    )]
    pub cql_serial_consistency: SerialLevel,
    /// The operator's statement that every tenant's keys are written from one datacenter only
    /// (e.g. tenants are pinned to a DC by routing), which --cql-serial-consistency local-serial
    /// needs.
    #[arg(long, env = "ONCEKEY_CQL_KEYS_DC_PINNED")]
    pub cql_keys_dc_pinned: bool,
    /// TLS to the cluster.
    #[command(flatten)]
    pub cql_tls: CqlTlsArgs,
}

/// The serial consistency of lightweight transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum SerialLevel {
    /// SERIAL: Paxos over every datacenter's replicas.
    #[default]
    Serial,
    /// LOCAL_SERIAL: Paxos over the local datacenter's replicas only.
    LocalSerial,
}

/// Client TLS to the CQL cluster (ScyllaDB / Cassandra `client_encryption_options`).
#[derive(Debug, Clone, Default, Args)]
pub struct CqlTlsArgs {
    /// Connect to the cluster over TLS, trusting the system's CA certificates unless --cql-tls-ca
    /// is given (any other --cql-tls-* flag implies it).
    #[arg(long, env = "ONCEKEY_CQL_TLS")]
    pub cql_tls: bool,
    /// PEM CA bundle the nodes' certificates must chain to (instead of the system's CAs).
    #[arg(long, env = "ONCEKEY_CQL_TLS_CA")]
    pub cql_tls_ca: Option<PathBuf>,
    /// PEM client certificate chain, for clusters that require client certificates.
    #[arg(long, env = "ONCEKEY_CQL_TLS_CERT", requires = "cql_tls_key")]
    pub cql_tls_cert: Option<PathBuf>,
    /// PEM private key of --cql-tls-cert.
    #[arg(long, env = "ONCEKEY_CQL_TLS_KEY", requires = "cql_tls_cert")]
    pub cql_tls_key: Option<PathBuf>,
    /// The DNS name every node's certificate must carry. Without it a node's certificate must
    /// name the IP address the driver connects to (nodes are addressed by the IPs the cluster
    /// advertises, so certificates with DNS names only need this).
    #[arg(long, env = "ONCEKEY_CQL_TLS_SERVER_NAME")]
    pub cql_tls_server_name: Option<String>,
}

impl CqlTlsArgs {
    /// Whether TLS to the cluster is on.
    pub fn enabled(&self) -> bool {
        self.cql_tls
            || self.cql_tls_ca.is_some()
            || self.cql_tls_cert.is_some()
            || self.cql_tls_server_name.is_some()
    }
}

impl CqlArgs {
    /// Checks the CQL flags against each other; the message names the flag to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cql_serial_consistency == SerialLevel::LocalSerial {
            if self.cql_local_dc.is_none() {
                return Err(ConfigError(
                    "--cql-serial-consistency local-serial needs --cql-local-dc: LOCAL_SERIAL \
                     means the Paxos of whichever datacenter a request lands in"
                        .into(),
                ));
            }
            if !self.cql_keys_dc_pinned {
                return Err(ConfigError(
                    "--cql-serial-consistency local-serial lets two datacenters each acquire the \
                     same key: use it only when every key is written from one datacenter, and say \
                     so with --cql-keys-dc-pinned (otherwise keep the default, serial)"
                        .into(),
                ));
            }
        }
        if let Some(name) = &self.cql_tls.cql_tls_server_name {
            if name.is_empty() || name.parse::<std::net::IpAddr>().is_ok() {
                return Err(ConfigError(format!(
                    "--cql-tls-server-name {name:?}: give the DNS name the nodes' certificates \
                     carry (IP addresses are checked without this flag)"
                )));
            }
        }
        Ok(())
    }
}

/// `oncekey migrate`
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// CQL connection.
    #[command(flatten)]
    pub cql: CqlArgs,
    /// Replication of the keyspace when migrate creates it (ignored once it exists):
    /// `NetworkTopologyStrategy:dc1=3[,dc2=3…]` for production, `SimpleStrategy:1` for a local
    /// single node only. The migrations themselves are built into the binary.
    #[arg(long, env = "ONCEKEY_CQL_REPLICATION", value_parser = crate::store::cql::migrate::parse_replication)]
    pub cql_replication: Option<crate::store::cql::migrate::Replication>,
}

/// `oncekey serve`
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// gRPC address (Ledger, health, reflection).
    #[arg(long, env = "ONCEKEY_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,
    /// Admin HTTP address: /metrics, /healthz, /readyz.
    #[arg(long, env = "ONCEKEY_ADMIN_LISTEN", default_value = "127.0.0.1:9090")]
    pub admin_listen: SocketAddr,
    /// Where the ledger lives.
    #[arg(long, env = "ONCEKEY_STORE", value_enum, default_value = "embedded")]
    pub store: StoreKind,
    /// The embedded store's directory.
    #[arg(long, env = "ONCEKEY_DATA_DIR", default_value = "./oncekey-data")]
    pub data_dir: PathBuf,
    /// CQL connection (with --store cql).
    #[command(flatten)]
    pub cql: CqlArgs,
    /// Tokens file: `tenant:sha256-hex-of-token` lines; reloaded when it changes, and on SIGHUP.
    #[arg(long, env = "ONCEKEY_TOKENS_FILE")]
    pub tokens_file: Option<PathBuf>,
    /// Allow listening on a non-loopback address without a tokens file.
    #[arg(long, env = "ONCEKEY_ALLOW_UNAUTHENTICATED")]
    pub allow_unauthenticated: bool,
    /// Lease when a request does not say (1s ..= 1h).
    #[arg(long, env = "ONCEKEY_DEFAULT_LEASE", default_value = "30s", value_parser = parse_duration)]
    pub default_lease: Millis,
    /// Retention when a Claim does not say (1m ..= --max-retention).
    #[arg(long, env = "ONCEKEY_DEFAULT_RETENTION", default_value = "24h", value_parser = parse_duration)]
    pub default_retention: Millis,
    /// Longest retention a Claim may ask for.
    #[arg(long, env = "ONCEKEY_MAX_RETENTION", default_value = "30d", value_parser = parse_duration)]
    pub max_retention: Millis,
    /// Largest result body a Complete may store, in bytes.
    #[arg(long, env = "ONCEKEY_MAX_RESULT_BYTES", default_value_t = 1024 * 1024)]
    pub max_result_bytes: usize,
    /// PEM certificate chain: serve gRPC over TLS.
    #[arg(long, env = "ONCEKEY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, env = "ONCEKEY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// PEM CA bundle: require client certificates signed by it (mutual TLS).
    #[arg(long, env = "ONCEKEY_TLS_CLIENT_CA", requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
    /// OTLP/gRPC endpoint for traces.
    #[arg(long, env = "ONCEKEY_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Log format.
    #[arg(long, env = "ONCEKEY_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// How long SIGTERM waits for in-flight RPCs before exiting anyway.
    #[arg(long, env = "ONCEKEY_DRAIN_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub drain_timeout: Millis,
    /// How often the embedded store sweeps expired records.
    #[arg(long, env = "ONCEKEY_SWEEP_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub sweep_interval: Millis,
    /// Memory the embedded store caches its file's pages in, in MiB. The server's resident
    /// memory is about this much plus ~150 MiB under load once the file is larger than the cache.
    #[arg(long, env = "ONCEKEY_EMBEDDED_CACHE_MIB", default_value_t = 1024)]
    pub embedded_cache_mib: usize,
    /// Most connections the gRPC port holds at once; beyond it, new connections are closed at once
    /// and open ones keep being served. Default: the lower of 10000 and 80 % of the open-files
    /// soft limit (`ulimit -n`).
    #[arg(long, env = "ONCEKEY_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Most streams (concurrent RPCs) one HTTP/2 connection may have open; HTTP/2 refuses more.
    #[arg(long, env = "ONCEKEY_MAX_CONCURRENT_STREAMS", default_value_t = 1024)]
    pub max_concurrent_streams: u32,
    /// Test only: shift this server's clock by this many milliseconds (may be negative), to test
    /// replicas whose clocks disagree.
    #[arg(
        long,
        env = "ONCEKEY_CLOCK_SKEW_MS",
        default_value_t = 0,
        allow_negative_numbers = true,
        hide = true
    )]
    pub clock_skew_ms: Millis,
    /// Start the embedded store even when opening it finds acknowledged writes lost (a missing,
    /// emptied or replaced oncekey.redb, a write-ahead log damaged before intact frames), which
    /// otherwise stops the server with exit code 65: drops what is damaged, keeps damaged files
    /// aside and logs at ERROR what was lost. For one start, after reading the message
    /// (docs/operations.md, "Recovering the embedded store").
    #[arg(long, env = "ONCEKEY_ACCEPT_DATA_LOSS")]
    pub accept_data_loss: bool,
    /// How often the tokens file and the TLS files are checked for changes, which are then
    /// loaded (a mounted Secret that cert-manager renewed, a rotated tokens Secret); `0s` turns
    /// the checks off (SIGHUP still reloads).
    #[arg(long, env = "ONCEKEY_RELOAD_CHECK_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub reload_check_interval: Millis,
    /// Test only: the embedded store's longest time between checkpoints (its write-ahead log then
    /// keeps every write since the last one, e.g. to build a damaged log).
    #[arg(
        long,
        env = "ONCEKEY_EMBEDDED_CHECKPOINT_INTERVAL",
        default_value = "50ms",
        value_parser = parse_duration,
        hide = true
    )]
    pub embedded_checkpoint_interval: Millis,
    /// Per-tenant admission limits.
    #[command(flatten)]
    pub admission: crate::api::admission::AdmissionArgs,
}

/// A configuration mistake: the message names the flag; `oncekey` exits 64.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

impl ServeArgs {
    /// Checks the flags against each other and the contract's bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |msg: String| Err(ConfigError(msg));
        if !(1_000..=3_600_000).contains(&self.default_lease) {
            return bad("--default-lease must be between 1s and 1h".into());
        }
        if self.max_retention < 60_000 {
            return bad("--max-retention must be at least 1m".into());
        }
        if !(60_000..=self.max_retention).contains(&self.default_retention) {
            return bad("--default-retention must be between 1m and --max-retention".into());
        }
        if self.max_result_bytes == 0 || self.max_result_bytes > 64 * 1024 * 1024 {
            return bad("--max-result-bytes must be between 1 and 67108864".into());
        }
        if !(16..=1 << 20).contains(&self.embedded_cache_mib) {
            return bad("--embedded-cache-mib must be between 16 and 1048576".into());
        }
        if self.max_connections == Some(0) {
            return bad("--max-connections must be at least 1".into());
        }
        if self.max_concurrent_streams == 0 {
            return bad("--max-concurrent-streams must be at least 1".into());
        }
        if !(1..=3_600_000).contains(&self.embedded_checkpoint_interval) {
            return bad("--embedded-checkpoint-interval must be between 1ms and 1h".into());
        }
        self.admission.validate()?;
        if self.reload_check_interval != 0
            && !(100..=3_600_000).contains(&self.reload_check_interval)
        {
            return bad("--reload-check-interval must be 0s (off) or between 100ms and 1h".into());
        }
        if self.store == StoreKind::Cql {
            self.cql.validate()?;
        }
        let loopback = self.listen.ip().is_loopback();
        if self.tokens_file.is_none() && !loopback && !self.allow_unauthenticated {
            return bad(format!(
                "--listen {} is not a loopback address and no --tokens-file is set: add --tokens-file, or --allow-unauthenticated to accept anyone",
                self.listen
            ));
        }
        Ok(())
    }

    /// The gRPC port's connection limit: `--max-connections`, or its default under the
    /// process's descriptor soft limit.
    pub fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or_else(|| {
            crate::conn::default_max_connections(crate::conn::descriptor_soft_limit())
        })
    }

    /// The request limits these flags set.
    pub fn limits(&self) -> Limits {
        Limits {
            default_lease: self.default_lease,
            default_retention: self.default_retention,
            max_retention: self.max_retention,
            max_result_bytes: self.max_result_bytes,
            ..Limits::default()
        }
    }
}

/// Parses `500ms`, `30s`, `5m`, `24h`, `30d` (or a bare number of seconds) into milliseconds.
pub fn parse_duration(text: &str) -> Result<Millis, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: i64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 30s, 5m, 24h or 30d"))?;
    let scale = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(30_000));
        assert_eq!(parse_duration("500ms"), Ok(500));
        assert_eq!(parse_duration("24h"), Ok(86_400_000));
        assert_eq!(parse_duration("30d"), Ok(2_592_000_000));
        assert_eq!(parse_duration("7"), Ok(7_000));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn non_loopback_needs_tokens_or_explicit_opt_in() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["oncekey", "serve"];
            argv.extend_from_slice(extra);
            match Cli::parse_from(argv).command {
                Command::Serve(args) => args,
                _ => unreachable!(),
            }
        };
        assert!(parse(&[]).validate().is_ok());
        let err = parse(&["--listen", "0.0.0.0:50051"])
            .validate()
            .unwrap_err();
        assert!(err.0.contains("--tokens-file"), "{err}");
        assert!(
            parse(&["--listen", "0.0.0.0:50051", "--allow-unauthenticated"])
                .validate()
                .is_ok()
        );
        assert!(parse(&["--default-lease", "2h"])
            .validate()
            .unwrap_err()
            .0
            .contains("--default-lease"));
    }
}
