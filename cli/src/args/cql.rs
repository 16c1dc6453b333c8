//! The `--cql-*` flags of `oncekey serve` and `oncekey migrate`, turned into the CQL store's
//! settings (`CqlConfig`, `MigrateConfig`), which the store checks.

use clap::{Args, ValueEnum};
use oncekey_server::store::cql::migrate::{parse_replication, MigrateConfig, Replication};
use oncekey_server::store::cql::{self, CqlConfig, CqlTlsConfig};
use std::path::PathBuf;

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

/// `oncekey migrate`
#[derive(Debug, Clone, Args)]
pub struct MigrateArgs {
    /// CQL connection.
    #[command(flatten)]
    pub cql: CqlArgs,
    /// Replication of the keyspace when migrate creates it (ignored once it exists):
    /// `NetworkTopologyStrategy:dc1=3[,dc2=3…]` for production, `SimpleStrategy:1` for a local
    /// single node only. The migrations themselves are built into the binary.
    #[arg(long, env = "ONCEKEY_CQL_REPLICATION", value_parser = parse_replication)]
    pub cql_replication: Option<Replication>,
}

impl From<SerialLevel> for cql::SerialLevel {
    fn from(level: SerialLevel) -> Self {
        match level {
            SerialLevel::Serial => Self::Serial,
            SerialLevel::LocalSerial => Self::LocalSerial,
        }
    }
}

impl CqlArgs {
    /// The CQL store's settings these flags give.
    pub fn config(&self) -> CqlConfig {
        let tls = &self.cql_tls;
        CqlConfig {
            nodes: self.cql_nodes.clone(),
            keyspace: self.cql_keyspace.clone(),
            local_dc: self.cql_local_dc.clone(),
            username: self.cql_username.clone(),
            password: self.cql_password.clone(),
            serial_consistency: self.cql_serial_consistency.into(),
            keys_dc_pinned: self.cql_keys_dc_pinned,
            tls: CqlTlsConfig {
                on: tls.cql_tls,
                ca: tls.cql_tls_ca.clone(),
                cert: tls.cql_tls_cert.clone(),
                key: tls.cql_tls_key.clone(),
                server_name: tls.cql_tls_server_name.clone(),
            },
        }
    }
}

impl MigrateArgs {
    /// What `oncekey migrate` runs with.
    pub fn config(&self) -> MigrateConfig {
        MigrateConfig {
            cql: self.cql.config(),
            replication: self.cql_replication.clone(),
        }
    }
}
