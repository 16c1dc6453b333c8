//! The server's settings as plain values: what `serve::run` needs, built by the `oncekey` command
//! line (the `oncekey` crate parses the flags) or by a program that embeds the server.
//!
//! Each field holds the value of the `oncekey serve` flag of the same name, and every check here
//! names that flag, so the operator reads which one to fix. Nothing here parses a command line or
//! reads the environment (test-only knobs: `crate::testing`).

use crate::api::admission::AdmissionConfig;
use crate::api::limits::Limits;
use crate::ledger::Millis;
use crate::store::cql::CqlConfig;
use crate::testing::TestKnobs;
use std::net::SocketAddr;
use std::path::PathBuf;

mod protection;
pub use protection::ProtectionConfig;

/// Which store holds the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// One redb file under `data_dir` (single machine).
    Embedded,
    /// A ScyllaDB / Apache Cassandra cluster.
    Cql,
}

/// Everything `oncekey serve` runs with.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// gRPC address (Ledger, health, reflection).
    pub listen: SocketAddr,
    /// Admin HTTP address: /metrics, /healthz, /readyz.
    pub admin_listen: SocketAddr,
    /// Where the ledger lives.
    pub store: StoreKind,
    /// The embedded store's directory.
    pub data_dir: PathBuf,
    /// CQL connection (with the CQL store).
    pub cql: CqlConfig,
    /// How long start-up keeps trying to open the CQL store while the cluster cannot answer.
    pub cql_startup_timeout: Millis,
    /// Tokens file: `tenant:sha256-hex-of-token` lines; `None`: dev mode (tenant header).
    pub tokens_file: Option<PathBuf>,
    /// Allow listening on a non-loopback address without a tokens file.
    pub allow_unauthenticated: bool,
    /// Lease when a request does not say (1s ..= 1h).
    pub default_lease: Millis,
    /// Retention when a Claim does not say (1m ..= `max_retention`).
    pub default_retention: Millis,
    /// Longest retention a Claim may ask for.
    pub max_retention: Millis,
    /// Largest result body a Complete may store, in bytes.
    pub max_result_bytes: usize,
    /// PEM certificate chain: serve gRPC over TLS (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// PEM CA bundle: require client certificates signed by it (mutual TLS).
    pub tls_client_ca: Option<PathBuf>,
    /// How long SIGTERM waits for in-flight RPCs before exiting anyway.
    pub drain_timeout: Millis,
    /// How often the embedded store sweeps expired records.
    pub sweep_interval: Millis,
    /// Memory the embedded store caches its file's pages in, in MiB.
    pub embedded_cache_mib: usize,
    /// Most connections the gRPC port holds at once; `None`: the default under the descriptor
    /// soft limit (see `max_connections()`).
    pub max_connections: Option<usize>,
    /// Most streams (concurrent RPCs) one HTTP/2 connection may have open.
    pub max_concurrent_streams: u32,
    /// Start the embedded store even when opening it finds acknowledged writes lost.
    pub accept_data_loss: bool,
    /// How often the tokens file, the TLS files and the key ring are checked for changes (0: only
    /// SIGHUP).
    pub reload_check_interval: Millis,
    /// Per-tenant admission limits.
    pub admission: AdmissionConfig,
    /// Data protection: the key ring, key privacy, retention ceilings.
    pub protection: ProtectionConfig,
    /// Test-only knobs (`ONCEKEY_TEST_*`); their defaults in production.
    pub testing: TestKnobs,
}

pub use crate::duration::parse_duration;
pub use crate::store::ConfigError;

/// A service the server needs (the CQL cluster) did not become available before its start-up
/// deadline: nothing in the settings is known to be wrong; `oncekey` exits 69 (EX_UNAVAILABLE).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnavailableError(pub String);

impl ServeConfig {
    /// Checks the settings against each other and the documented bounds.
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
        self.testing.validate()?;
        self.admission.validate()?;
        self.protection.validate(self.max_retention)?;
        if self.reload_check_interval != 0
            && !(100..=3_600_000).contains(&self.reload_check_interval)
        {
            return bad("--reload-check-interval must be 0s (off) or between 100ms and 1h".into());
        }
        if self.store == StoreKind::Cql {
            self.cql.validate()?;
            if !(1_000..=3_600_000).contains(&self.cql_startup_timeout) {
                return bad("--cql-startup-timeout must be between 1s and 1h".into());
            }
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

    /// The gRPC port's connection limit: `max_connections`, or its default under the
    /// process's descriptor soft limit.
    pub fn max_connections(&self) -> usize {
        self.max_connections.unwrap_or_else(|| {
            crate::conn::default_max_connections(crate::conn::descriptor_soft_limit())
        })
    }

    /// The request limits these settings set.
    pub fn limits(&self) -> Result<Limits, ConfigError> {
        Ok(Limits {
            default_lease: self.default_lease,
            default_retention: self.default_retention,
            max_retention: self.max_retention,
            max_result_bytes: self.max_result_bytes,
            retention_ceilings: self.protection.retention_ceilings(self.max_retention)?,
            ..Limits::default()
        })
    }
}

#[cfg(test)]
impl ServeConfig {
    /// The settings `oncekey serve` runs with when given no flag (for tests in this crate).
    pub(crate) fn for_tests() -> Self {
        Self {
            listen: ([127, 0, 0, 1], 50051).into(),
            admin_listen: ([127, 0, 0, 1], 9090).into(),
            store: StoreKind::Embedded,
            data_dir: "./oncekey-data".into(),
            cql: CqlConfig::new(&["127.0.0.1:9042"], "oncekey"),
            cql_startup_timeout: 60_000,
            tokens_file: None,
            allow_unauthenticated: false,
            default_lease: 30_000,
            default_retention: 86_400_000,
            max_retention: 30 * 86_400_000,
            max_result_bytes: 1024 * 1024,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            drain_timeout: 30_000,
            sweep_interval: 1_000,
            embedded_cache_mib: 320,
            max_connections: None,
            max_concurrent_streams: 1024,
            accept_data_loss: false,
            reload_check_interval: 5_000,
            admission: AdmissionConfig::default(),
            protection: ProtectionConfig::default(),
            testing: TestKnobs::default(),
        }
    }
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
}
