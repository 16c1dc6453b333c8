//! Opens a driver session from the `--cql-*` settings (`CqlConfig`): contact points, credentials,
//! TLS, consistency levels and the driver's default load-balancing policy (token-aware; DC-aware
//! with `--cql-local-dc`).
//!
//! Errors here are startup errors, worded for the operator and naming the flag to fix. Nothing here
//! touches the ledger table.

use super::errors::Failure;
use super::statements::Levels;
use super::{CqlConfig, SerialLevel};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{
    BrokenConnectionErrorKind, ConnectionError, ConnectionPoolError,
    ConnectionSetupRequestErrorKind, DbError, ExecutionError, FrameHeaderParseError, MetadataError,
    NewSessionError, PrepareError,
};
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
    /// No contact point answered (a state that may pass: nodes starting, a network not up yet).
    #[error("--cql-nodes {nodes}: cannot connect to the cluster: {reason}")]
    Unreachable {
        /// The contact points tried.
        nodes: String,
        /// The driver's reason.
        reason: String,
    },
    /// A node answered and refused this client: authentication, or TLS (a certificate refused
    /// either way). Retrying with the same settings will not help.
    #[error("--cql-nodes {nodes}: cannot connect to the cluster: {reason}")]
    Refused {
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
    /// The cluster could not serve a start-up read or statement now (too few replicas alive, a
    /// timeout): a state that may pass.
    #[error("--store cql: {0}")]
    Unavailable(String),
    /// Any other failure while starting.
    #[error("--store cql: {0}")]
    Other(String),
}

impl ConnectError {
    /// Whether the failure may pass without a change of settings (nodes starting or down, too
    /// few replicas alive), so that trying again later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ConnectError::Unreachable { .. } | ConnectError::Unavailable(_)
        )
    }

    /// The error of a start-up statement that failed: `Unavailable` unless the cluster refused
    /// the statement itself.
    pub fn of_request(context: &str, error: &ExecutionError) -> Self {
        match super::errors::classify(error) {
            Failure::Refused(_) => ConnectError::Other(format!("{context}: {error}")),
            Failure::NotSent(_) | Failure::MaybeRan(_) => {
                ConnectError::Unavailable(format!("{context}: {error}"))
            }
        }
    }

    /// The error of preparing a statement at start-up: `Other` when the cluster refused it
    /// (a missing table, no permission), `Unavailable` otherwise.
    pub fn of_prepare(error: &PrepareError) -> Self {
        let refused = match error {
            PrepareError::AllAttemptsFailed { first_attempt } => {
                matches!(
                    super::errors::classify_attempt(first_attempt, String::new()),
                    Failure::Refused(_)
                )
            }
            PrepareError::PreparedStatementIdsMismatch => true,
            _ => false,
        };
        match refused {
            true => ConnectError::Other(format!("preparing statements: {error}")),
            false => ConnectError::Unavailable(format!("preparing statements: {error}")),
        }
    }
}

/// Checks `--cql-keyspace`: an unquoted CQL identifier in lower case (what CQL folds it to).
pub(crate) fn check_keyspace(name: &str) -> Result<(), ConnectError> {
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
pub(crate) fn levels(config: &CqlConfig) -> Levels {
    let serial = match config.serial_consistency {
        SerialLevel::Serial => SerialConsistency::Serial,
        SerialLevel::LocalSerial => SerialConsistency::LocalSerial,
    };
    Levels::new(config.local_dc.is_some(), serial)
}

/// Opens a session to the cluster (no keyspace selected).
pub(crate) async fn session(config: &CqlConfig) -> Result<Session, ConnectError> {
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
    builder.build().await.map_err(|e| {
        let (nodes, reason) = (nodes.join(","), e.to_string());
        match refused(&e) {
            true => ConnectError::Refused { nodes, reason },
            false => ConnectError::Unreachable { nodes, reason },
        }
    })
}

/// Whether opening a session failed because a node refused this client (credentials, a
/// certificate, settings the driver cannot use), rather than because no node could be reached.
fn refused(error: &NewSessionError) -> bool {
    match error {
        NewSessionError::EmptyKnownNodesList | NewSessionError::IllegalConfig(_) => true,
        NewSessionError::MetadataError(MetadataError::ConnectionPoolError(
            ConnectionPoolError::Broken {
                last_connection_error,
            },
        )) => connection_refused(last_connection_error),
        _ => false,
    }
}

/// Whether a connection failed on a refusal: authentication, or a TLS handshake that failed on
/// a certificate (not on the network under it).
fn connection_refused(error: &ConnectionError) -> bool {
    use ConnectionSetupRequestErrorKind as Kind;
    match error {
        ConnectionError::ConnectionSetupRequestError(setup) => match setup.get_error() {
            Kind::DbError(db, _) => matches!(
                db,
                DbError::AuthenticationError
                    | DbError::Unauthorized
                    | DbError::ProtocolError
                    | DbError::ConfigError
                    | DbError::Invalid
            ),
            Kind::MissingAuthentication
            | Kind::StartAuthSessionError(_)
            | Kind::AuthChallengeEvaluationError(_)
            | Kind::AuthFinishError(_) => true,
            // The node's TLS alert (e.g. the client certificate refused) arrives on the first read.
            Kind::BrokenConnection(broken) => matches!(
                broken.downcast_ref::<BrokenConnectionErrorKind>(),
                Some(BrokenConnectionErrorKind::FrameHeaderParseError(
                    FrameHeaderParseError::HeaderIoError(io)
                )) if tls_refusal(io)
            ),
            _ => false,
        },
        ConnectionError::IoError(io) => tls_refusal(io),
        _ => false,
    }
}

/// Whether an I/O error is a TLS handshake that failed on a certificate or protocol (an SSL
/// error of its own, not one of the network under it).
fn tls_refusal(io: &std::io::Error) -> bool {
    io.get_ref()
        .and_then(|inner| inner.downcast_ref::<openssl::ssl::Error>())
        .is_some_and(|tls| tls.io_error().is_none() && tls.ssl_error().is_some())
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
