//! The CQL store's connection settings as plain values, built by the `oncekey` command line from
//! its `--cql-*` flags (or by a program embedding the store). Errors about them name the flag.

/// How to reach the cluster and which keyspace holds the ledger.
#[derive(Clone, PartialEq, Eq)]
pub struct CqlConfig {
    /// Contact points, `host:port` (`--cql-nodes`).
    pub nodes: Vec<String>,
    /// Keyspace holding the ledger (`--cql-keyspace`).
    pub keyspace: String,
    /// Local datacenter: DC-aware routing, LOCAL_QUORUM and LOCAL_SERIAL (`--cql-local-dc`).
    pub local_dc: Option<String>,
    /// CQL user name (`--cql-username`).
    pub username: Option<String>,
    /// CQL password (`--cql-password`); never printed.
    pub password: Option<String>,
}

impl CqlConfig {
    /// Settings for `nodes` and `keyspace`, without a local datacenter or credentials.
    pub fn new(nodes: &[&str], keyspace: &str) -> Self {
        Self {
            nodes: nodes.iter().map(|n| (*n).to_owned()).collect(),
            keyspace: keyspace.to_owned(),
            local_dc: None,
            username: None,
            password: None,
        }
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
