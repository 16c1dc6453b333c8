//! Opens a driver session from the `--cql-*` settings (`CqlConfig`): contact points, credentials,
//! TLS, consistency levels and the driver's default load-balancing policy (token-aware; DC-aware
//! with `--cql-local-dc`).
//!
//! Errors here are startup errors, worded for the operator and naming the flag to fix. Nothing here
//! touches the ledger table.

use super::statements::Levels;
use super::{CqlConfig, SerialLevel};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::statement::SerialConsistency;
use std::time::Duration;

/// How long one request may take before the driver gives up on it. Longer than the server-side
/// write and CAS contention timeouts, so the node's own timeout (with its write type) comes first.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// How long opening a connection to one node may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// A flag is malformed.
    #[error("{0}")]
    Flag(String),
    /// No contact point answered.
    #[error("--cql-nodes {nodes}: cannot connect to the cluster: {reason}")]
    Unreachable {
        /// The contact points tried.
        nodes: String,
        /// The driver's reason.
        reason: String,
    },
    /// The keyspace or its tables do not exist.
    #[error("keyspace {0} has no ledger tables: run `oncekey migrate`")]
    NoTables(String),
    /// Migrations newer than the keyspace's schema are embedded in this binary.
    #[error("keyspace {keyspace} lacks migration {missing}: run `oncekey migrate`")]
    Outdated {
        /// The keyspace.
        keyspace: String,
        /// The first migration not applied.
        missing: String,
    },
    /// Any other failure while starting.
    #[error("--store cql: {0}")]
    Other(String),
}

/// Checks `--cql-keyspace`: an unquoted CQL identifier in lower case (what CQL folds it to).
pub fn check_keyspace(name: &str) -> Result<(), ConnectError> {
    let ok = name.len() <= 48
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ConnectError::Flag(format!(
            "--cql-keyspace {name:?}: use 1-48 lower-case letters, digits or _, starting with a letter"
        )))
    }
}

/// The consistency levels the settings ask for.
pub fn levels(config: &CqlConfig) -> Levels {
    let serial = match config.serial_consistency {
        SerialLevel::Serial => SerialConsistency::Serial,
        SerialLevel::LocalSerial => SerialConsistency::LocalSerial,
    };
    Levels::new(config.local_dc.is_some(), serial)
}

/// Opens a session to the cluster (no keyspace selected).
pub async fn session(config: &CqlConfig) -> Result<Session, ConnectError> {
    config.validate().map_err(|e| ConnectError::Flag(e.0))?;
    check_keyspace(&config.keyspace)?;
    let nodes: Vec<&str> = config
        .nodes
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if nodes.is_empty() {
        return Err(ConnectError::Flag(
            "--cql-nodes: give at least one host:port".into(),
        ));
    }
    let levels = levels(config);
    let mut policy = DefaultPolicy::builder().token_aware(true);
    if let Some(dc) = &config.local_dc {
        // LOCAL_QUORUM (and LOCAL_SERIAL) only mean something if requests stay in the local DC.
        policy = policy
            .prefer_datacenter(dc.clone())
            .permit_dc_failover(false);
    }
    let profile = ExecutionProfile::builder()
        .consistency(levels.consistency)
        .serial_consistency(Some(levels.serial))
        .load_balancing_policy(policy.build())
        .request_timeout(Some(REQUEST_TIMEOUT))
        .build();
    let mut builder = SessionBuilder::new()
        .known_nodes(&nodes)
        .connection_timeout(CONNECT_TIMEOUT)
        .default_execution_profile_handle(profile.into_handle());
    if let Some(tls) = super::tls::context(&config.tls).map_err(ConnectError::Flag)? {
        builder = builder.tls_context(Some(tls));
    }
    match (&config.username, &config.password) {
        (Some(user), Some(password)) => builder = builder.user(user, password),
        (None, None) => {}
        _ => {
            return Err(ConnectError::Flag(
                "--cql-username and --cql-password go together".into(),
            ))
        }
    }
    builder
        .build()
        .await
        .map_err(|e| ConnectError::Unreachable {
            nodes: nodes.join(","),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyspace_names() {
        assert!(check_keyspace("oncekey").is_ok());
        assert!(check_keyspace("oncekey_t_0123abcd").is_ok());
        for bad in ["", "Oncekey", "1ks", "ks-1", "ks;drop", &"k".repeat(49)] {
            let err = check_keyspace(bad).unwrap_err().to_string();
            assert!(err.contains("--cql-keyspace"), "{err}");
        }
    }
}
