//! The CQL store's connection settings as plain values, built by the `oncekey` command line from
//! its `--cql-*` flags (or by a program embedding the store). Checks and errors about them name
//! the flag.

use oncekey_store::ConfigError;
use std::path::PathBuf;

/// How to reach the cluster and which keyspace holds the ledger.
#[derive(Clone, PartialEq, Eq)]
pub struct CqlConfig {
    /// Contact points, `host:port` (`--cql-nodes`).
    pub nodes: Vec<String>,
    /// Keyspace holding the ledger (`--cql-keyspace`).
    pub keyspace: String,
    /// Local datacenter: DC-aware routing and LOCAL_QUORUM (`--cql-local-dc`).
    pub local_dc: Option<String>,
    /// CQL user name (`--cql-username`).
    pub username: Option<String>,
    /// CQL password (`--cql-password`); never printed.
    pub password: Option<String>,
    /// The Paxos phase of conditional writes and linearizable reads
    /// (`--cql-serial-consistency`).
    pub serial_consistency: SerialLevel,
    /// The operator's statement that every key is written from one datacenter only
    /// (`--cql-keys-dc-pinned`), which `SerialLevel::LocalSerial` needs.
    pub keys_dc_pinned: bool,
    /// TLS to the cluster (`--cql-tls*`).
    pub tls: CqlTlsConfig,
}

/// The serial consistency of lightweight transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SerialLevel {
    /// SERIAL: Paxos over every datacenter's replicas.
    #[default]
    Serial,
    /// LOCAL_SERIAL: Paxos over the local datacenter's replicas only.
    LocalSerial,
}

/// Client TLS to the CQL cluster (ScyllaDB / Cassandra `client_encryption_options`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CqlTlsConfig {
    /// TLS on, trusting the system's CA certificates unless `ca` is given (`--cql-tls`; any
    /// other TLS setting implies it).
    pub on: bool,
    /// PEM CA bundle the nodes' certificates must chain to (`--cql-tls-ca`).
    pub ca: Option<PathBuf>,
    /// PEM client certificate chain (`--cql-tls-cert`).
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert` (`--cql-tls-key`).
    pub key: Option<PathBuf>,
    /// The DNS name every node's certificate must carry (`--cql-tls-server-name`).
    pub server_name: Option<String>,
}

impl CqlTlsConfig {
    /// Whether TLS to the cluster is on.
    pub fn enabled(&self) -> bool {
        self.on || self.ca.is_some() || self.cert.is_some() || self.server_name.is_some()
    }
}

impl CqlConfig {
    /// Settings for `nodes` and `keyspace`, with every other setting at its default.
    pub fn new(nodes: &[&str], keyspace: &str) -> Self {
        Self {
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
            keyspace: keyspace.to_owned(),
            local_dc: None,
            username: None,
            password: None,
            serial_consistency: SerialLevel::Serial,
            keys_dc_pinned: false,
            tls: CqlTlsConfig::default(),
        }
    }

    /// Checks the settings against each other; the message names the flag to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.serial_consistency == SerialLevel::LocalSerial {
            if self.local_dc.is_none() {
                return Err(ConfigError(
                    "--cql-serial-consistency local-serial needs --cql-local-dc: LOCAL_SERIAL \
                     means the Paxos of whichever datacenter a request lands in"
                        .into(),
                ));
            }
            if !self.keys_dc_pinned {
                return Err(ConfigError(
                    "--cql-serial-consistency local-serial lets two datacenters each acquire the \
                     same key: use it only when every key is written from one datacenter, and say \
                     so with --cql-keys-dc-pinned (otherwise keep the default, serial)"
                        .into(),
                ));
            }
        }
        if let Some(name) = &self.tls.server_name {
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

impl std::fmt::Debug for CqlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqlConfig")
            .field("nodes", &self.nodes)
            .field("keyspace", &self.keyspace)
            .field("local_dc", &self.local_dc)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("serial_consistency", &self.serial_consistency)
            .field("keys_dc_pinned", &self.keys_dc_pinned)
            .field("tls", &self.tls)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_password() {
        let config = CqlConfig {
            password: Some("s3cret-pass".into()),
            ..CqlConfig::new(&["127.0.0.1:9042"], "oncekey")
        };
        let printed = format!("{config:?}");
        assert!(!printed.contains("s3cret-pass"), "{printed}");
        assert!(printed.contains("<hidden>"), "{printed}");
    }
}
