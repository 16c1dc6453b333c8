//! Opening the CQL store when `oncekey serve` starts, patiently: a cluster that cannot answer yet
//! (nodes starting, a node that died seconds ago and is still thought alive, too few replicas up
//! for QUORUM) is a state that passes, so every step of opening (connecting, the schema and
//! migration checks, preparing statements, the page-token key) is tried again with backoff until
//! a deadline (`--cql-startup-timeout`), each retry logged. A failure that retrying cannot mend
//! (a malformed flag, credentials or a certificate refused, a keyspace without the ledger
//! tables) ends the wait at once.
//!
//! This module decides only when to try again; what counts as passing is
//! `ConnectError::is_transient`.

use super::{ConnectError, CqlConfig, CqlStore};
use std::time::Duration;
use tokio::time::Instant;

/// The first pause between two attempts (doubled after each, up to `MAX_PAUSE`).
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Why the store did not open at start-up.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Settings or the cluster's setup must change (the message names the flag or the command).
    #[error(transparent)]
    Refused(ConnectError),
    /// The cluster did not become available before the deadline; the last failure is given.
    #[error("the CQL cluster was not available within --cql-startup-timeout {waited:?} ({attempts} attempts); the last error: {last}")]
    Unavailable {
        /// How long it was tried.
        waited: Duration,
        /// How many attempts were made.
        attempts: u32,
        /// The last attempt's failure.
        last: ConnectError,
    },
}

impl CqlStore {
    /// `connect`, tried again while it fails in a way that may pass, until `timeout` has gone by
    /// (each attempt within what is left of it; none begun with less than a quarter of a
    /// second left).
    pub async fn connect_within(
        config: &CqlConfig,
        timeout: Duration,
    ) -> Result<Self, StartupError> {
        let started = Instant::now();
        let deadline = started + timeout;
        let mut pause = FIRST_PAUSE;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            // One attempt may itself take long (connect and request timeouts): it gets what is
            // left of the wait.
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = tokio::time::timeout(left, Self::connect(config))
                .await
                .unwrap_or_else(|_| {
                    Err(ConnectError::Unavailable(format!(
                        "opening the store did not finish within the {left:?} left"
                    )))
                });
            let error = match outcome {
                Ok(store) => {
                    if attempts > 1 {
                        tracing::info!(
                            attempts,
                            waited_ms = started.elapsed().as_millis() as u64,
                            "the CQL cluster is available"
                        );
                    }
                    return Ok(store);
                }
                Err(e) if !e.is_transient() => return Err(StartupError::Refused(e)),
                Err(e) => e,
            };
            let left = deadline.saturating_duration_since(Instant::now());
            // Not worth another attempt in less than the first pause.
            if left < FIRST_PAUSE {
                return Err(StartupError::Unavailable {
                    waited: timeout,
                    attempts,
                    last: error,
                });
            }
            let nap = pause.min(left - FIRST_PAUSE);
            tracing::warn!(
                error = %error,
                attempt = attempts,
                retry_in_ms = nap.as_millis() as u64,
                left_ms = left.as_millis() as u64,
                "the CQL cluster is not available: opening the store again"
            );
            tokio::time::sleep(nap).await;
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_cluster_is_tried_again_until_the_deadline() {
        // Nothing listens on port 1: every attempt is refused at once.
        let config = CqlConfig::new(&["127.0.0.1:1"], "oncekey");
        let err = CqlStore::connect_within(&config, Duration::from_secs(1))
            .await
            .err()
            .expect("no cluster");
        match err {
            StartupError::Unavailable { attempts, last, .. } => {
                assert!(attempts >= 2, "tried again: {attempts}");
                assert!(last.is_transient(), "{last}");
                assert!(
                    last.to_string().contains("--cql-nodes 127.0.0.1:1"),
                    "{last}"
                );
            }
            other => panic!("expected Unavailable, got {other}"),
        }
    }

    #[tokio::test]
    async fn a_refusal_ends_the_wait_at_once() {
        let config = CqlConfig::new(&["127.0.0.1:1"], "Not-A-Keyspace");
        let err = CqlStore::connect_within(&config, Duration::from_secs(3600))
            .await
            .err()
            .expect("a bad keyspace name");
        assert!(
            matches!(&err, StartupError::Refused(ConnectError::Flag(m)) if m.contains("--cql-keyspace")),
            "{err}"
        );
    }
}
