//! The `oncekey` command line: every flag also as `ONCEKEY_<FLAG>`. Parsing only: the flags
//! become the server library's plain settings (`ServeConfig`, `CqlConfig`, `MigrateConfig`),
//! which check and use them.

mod admission;
mod cql;
mod protection;

pub use admission::AdmissionArgs;
pub use cql::{CqlArgs, MigrateArgs};
pub use protection::ProtectionArgs;

use crate::log_format::LogFormat;
use clap::{Args, Parser, Subcommand, ValueEnum};
use oncekey_server::ledger::Millis;
use oncekey_server::settings::{parse_duration, ServeConfig};
use oncekey_server::testing::TestKnobs;
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
    Claim(crate::client::ClaimCmd),
    /// Complete an acquired key (client side).
    Complete(crate::client::CompleteCmd),
    /// Fail an acquired key (client side).
    Fail(crate::client::FailCmd),
    /// Show a key's record (client side).
    Lookup(crate::client::LookupCmd),
    /// Find records: `oncekey records list` (client side).
    #[command(subcommand)]
    Records(crate::records::RecordsCommand),
    /// Ask a server's grpc.health.v1 service; exit 0 only when SERVING (for probes and helm test).
    Health(crate::client::HealthCmd),
    /// Approve an operation that awaits approval (client side; needs the approve scope).
    Approve(crate::operations::DecideCmd),
    /// Reject an operation that awaits approval: it fails with code 403 (needs the approve scope).
    Reject(crate::operations::DecideCmd),
    /// Remove a record and its history in any state (client side; needs the admin scope).
    Purge(crate::operations::PurgeCmd),
    /// Re-seal the token's tenant's records (every tenant's on a server without a tokens file)
    /// with the key ring's primary key, page after page (client side; needs the admin scope).
    Rekey(crate::protect::RekeyCmd),
    /// Erase every record of the token's tenant, page after page, and print the receipt
    /// (client side; needs the admin scope).
    EraseTenant(crate::protect::EraseTenantCmd),
    /// Print a key ring line (--encryption-keys) with a fresh random secret (no server needed).
    NewKey(crate::protect::NewKeyCmd),
    /// Load-test a running server (and optionally the PostgreSQL design) over real gRPC.
    Bench(Box<crate::bench::BenchCmd>),
    /// Run an HTTP reverse proxy giving an upstream service Idempotency-Key semantics.
    Gateway(Box<crate::gateway::GatewayCmd>),
    /// Run the operator console: a web app to approve, reconcile and purge, over the ledger.
    Console(Box<crate::console::ConsoleCmd>),
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
    /// How long start-up keeps trying to open the CQL store while the cluster cannot answer
    /// (nodes starting or down, too few replicas for QUORUM), each retry logged; then exit 69.
    #[arg(long, env = "ONCEKEY_CQL_STARTUP_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub cql_startup_timeout: Millis,
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
    #[arg(long, env = "ONCEKEY_EMBEDDED_CACHE_MIB", default_value_t = 320)]
    pub embedded_cache_mib: usize,
    /// Most connections the gRPC port holds at once; beyond it, new connections are closed at once
    /// and open ones keep being served. Default: the lower of 10000 and 80 % of the open-files
    /// soft limit (`ulimit -n`).
    #[arg(long, env = "ONCEKEY_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Most streams (concurrent RPCs) one HTTP/2 connection may have open; HTTP/2 refuses more.
    #[arg(long, env = "ONCEKEY_MAX_CONCURRENT_STREAMS", default_value_t = 1024)]
    pub max_concurrent_streams: u32,
    /// Start the embedded store even when opening it finds acknowledged writes lost (a missing,
    /// emptied or replaced oncekey.redb, a write-ahead log damaged before intact frames), which
    /// otherwise stops the server with exit code 65: drops what is damaged, keeps damaged files
    /// aside and logs at ERROR what was lost. For one start, after reading the message
    /// (docs/operations.md, "Recovering the embedded store").
    #[arg(long, env = "ONCEKEY_ACCEPT_DATA_LOSS")]
    pub accept_data_loss: bool,
    /// How often the tokens file, the TLS files and the key ring are checked for changes, which
    /// are then loaded (a mounted Secret that cert-manager renewed, a rotated tokens Secret); `0s`
    /// turns the checks off (SIGHUP still reloads).
    #[arg(long, env = "ONCEKEY_RELOAD_CHECK_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub reload_check_interval: Millis,
    /// Per-tenant admission limits.
    #[command(flatten)]
    pub admission: AdmissionArgs,
    /// Data protection: the key ring, key privacy, retention ceilings.
    #[command(flatten)]
    pub protection: ProtectionArgs,
}

impl From<StoreKind> for oncekey_server::settings::StoreKind {
    fn from(kind: StoreKind) -> Self {
        match kind {
            StoreKind::Embedded => Self::Embedded,
            StoreKind::Cql => Self::Cql,
        }
    }
}

impl ServeArgs {
    /// The server's settings: these flags, with the test-only knobs `testing` (from the
    /// `ONCEKEY_TEST_*` variables; production values unless a test sets them).
    pub fn config(&self, testing: TestKnobs) -> ServeConfig {
        ServeConfig {
            listen: self.listen,
            admin_listen: self.admin_listen,
            store: self.store.into(),
            data_dir: self.data_dir.clone(),
            cql: self.cql.config(),
            cql_startup_timeout: self.cql_startup_timeout,
            tokens_file: self.tokens_file.clone(),
            allow_unauthenticated: self.allow_unauthenticated,
            default_lease: self.default_lease,
            default_retention: self.default_retention,
            max_retention: self.max_retention,
            max_result_bytes: self.max_result_bytes,
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            tls_client_ca: self.tls_client_ca.clone(),
            drain_timeout: self.drain_timeout,
            sweep_interval: self.sweep_interval,
            embedded_cache_mib: self.embedded_cache_mib,
            max_connections: self.max_connections,
            max_concurrent_streams: self.max_concurrent_streams,
            accept_data_loss: self.accept_data_loss,
            reload_check_interval: self.reload_check_interval,
            admission: self.admission.config(),
            protection: self.protection.config(),
            testing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serve(extra: &[&str]) -> ServeConfig {
        let mut argv = vec!["oncekey", "serve"];
        argv.extend_from_slice(extra);
        match Cli::parse_from(argv).command {
            Command::Serve(args) => args.config(TestKnobs::default()),
            _ => unreachable!(),
        }
    }

    #[test]
    fn non_loopback_needs_tokens_or_explicit_opt_in() {
        assert!(serve(&[]).validate().is_ok());
        let err = serve(&["--listen", "0.0.0.0:50051"])
            .validate()
            .unwrap_err();
        assert!(err.0.contains("--tokens-file"), "{err}");
        assert!(
            serve(&["--listen", "0.0.0.0:50051", "--allow-unauthenticated"])
                .validate()
                .is_ok()
        );
        assert!(serve(&["--default-lease", "2h"])
            .validate()
            .unwrap_err()
            .0
            .contains("--default-lease"));
    }

    #[test]
    fn every_flag_reaches_the_settings() {
        let config = serve(&[
            "--store",
            "cql",
            "--cql-nodes",
            "10.0.0.1:9042,10.0.0.2:9042",
            "--cql-keyspace",
            "ledger",
            "--cql-local-dc",
            "dc1",
            "--default-lease",
            "10s",
            "--max-connections",
            "7",
            "--accept-data-loss",
        ]);
        assert_eq!(config.store, oncekey_server::settings::StoreKind::Cql);
        assert_eq!(config.cql.nodes, ["10.0.0.1:9042", "10.0.0.2:9042"]);
        assert_eq!(config.cql.keyspace, "ledger");
        assert_eq!(config.cql.local_dc.as_deref(), Some("dc1"));
        assert_eq!(config.default_lease, 10_000);
        assert_eq!(config.max_connections, Some(7));
        assert!(config.accept_data_loss);
        assert_eq!(config.testing, TestKnobs::default());
    }

    #[test]
    fn test_only_knobs_are_not_flags() {
        for flag in ["--clock-skew-ms", "--embedded-checkpoint-interval"] {
            let parsed = Cli::try_parse_from(["oncekey", "serve", flag, "1"]);
            assert!(parsed.is_err(), "{flag} is accepted as a flag");
        }
    }
}
