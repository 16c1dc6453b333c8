//! The driver session the CQL store sends every request through, replaceable while the store
//! serves: `CqlStore::reconnect` opens a new session with the `--cql-*` settings (the client TLS
//! files read again, so a renewed certificate or CA takes effect) and, once it answers, puts it in
//! place. Requests already sent finish on the old session, which closes its connections when the
//! last of them lets it go. Prepared statements belong to no session (each node knows them by id,
//! and the driver prepares one again where a node does not).
//!
//! This module must not decide when to reconnect (`crate::reload` does).

use super::{codec, connect, ConnectError, CqlConfig, CqlStore};
use oncekey_ledger::RecordId;
use scylla::client::session::Session;
use std::sync::{Arc, RwLock};

/// The current session, and the settings to open a new one with.
pub(crate) struct Sessions {
    current: RwLock<Arc<Session>>,
    /// `None` for a store opened on a session it was given (`CqlStore::open`).
    config: Option<CqlConfig>,
}

impl Sessions {
    /// `session`, opened with `config` when known.
    pub(crate) fn new(session: Arc<Session>, config: Option<CqlConfig>) -> Self {
        Self {
            current: RwLock::new(session),
            config,
        }
    }

    /// The session requests go through now.
    pub(crate) fn current(&self) -> Arc<Session> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn replace(&self, session: Arc<Session>) {
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = session;
    }
}

impl CqlStore {
    /// The session requests go through now.
    pub(super) fn session(&self) -> Arc<Session> {
        self.sessions.current()
    }

    /// Opens a new session with the settings the store was connected with — the TLS files read
    /// again — and, once it answers a QUORUM read, sends every new request through it. On an
    /// error the current session stays. A store opened on a given session cannot reconnect.
    pub async fn reconnect(&self) -> Result<(), ConnectError> {
        let Some(config) = &self.sessions.config else {
            return Err(ConnectError::Other(
                "this store was opened on a session of its caller: nothing to reconnect with"
                    .into(),
            ));
        };
        let session = connect::session(config).await?;
        // The readiness probe's read, on the new session: it reaches the keyspace's replicas.
        let probe = RecordId::new("oncekey", "readiness.probe", "probe");
        session
            .execute_unpaged(&self.statements.read, codec::key_values(&probe).to_vec())
            .await
            .map_err(|e| ConnectError::of_request("a read on the new session", &e))?;
        self.sessions.replace(Arc::new(session));
        Ok(())
    }

    /// Whether `reconnect` can work: the store knows the settings it was opened with.
    pub fn can_reconnect(&self) -> bool {
        self.sessions.config.is_some()
    }
}
