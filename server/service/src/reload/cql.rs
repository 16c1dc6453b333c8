//! Reloads the CQL client TLS files (`--cql-tls-cert`, `--cql-tls-key`, `--cql-tls-ca`) when
//! their contents change on disk, and on SIGHUP, the same way as the gRPC port's files (`super`):
//! polled every `--reload-check-interval`, a changed digest triggers a reload.
//!
//! A reload opens a new driver session with the files read again (`CqlStore::reconnect`), so
//! every connection made from then on presents the new certificate and trusts the new CA; requests
//! in flight finish on the old session. A reload that fails — a file half written, a key that
//! does not match its certificate, a certificate the cluster refuses, or a cluster that cannot
//! answer — keeps the current session, is logged and counted once in
//! `oncekey_reload_failures_total{what="cql_tls"}`; one that failed only because the cluster did
//! not answer is tried again at every check until it succeeds or the files change again.

use super::{ReloadMetrics, Trigger, Triggers, Watched};
use crate::store::cql::CqlStore;
use std::path::PathBuf;
use std::time::Duration;

/// The metrics label of these reloads.
const WHAT: &str = "cql_tls";

/// The CQL client TLS files, with the digest of their contents taken when this was made: before
/// the store first reads them, so that a change while it connects is a change the first check
/// reloads.
pub(crate) struct CqlTlsFiles(Watched);

impl CqlTlsFiles {
    /// Watches `paths` (the client certificate, key and CA bundle given); `None` when empty.
    pub(crate) fn new(paths: Vec<PathBuf>) -> Option<Self> {
        (!paths.is_empty()).then(|| Self(Watched::new(paths)))
    }
}

/// The CQL client TLS files of `store`'s settings, reloaded together.
pub(crate) struct CqlTlsReloader {
    store: CqlStore,
    files: Watched,
    metrics: ReloadMetrics,
    /// A reload failed on the cluster, not on the files: try again at the next check.
    retry: bool,
}

impl CqlTlsReloader {
    /// Reloads `files` into `store`; `None` when the store cannot reconnect.
    pub(crate) fn new(store: CqlStore, files: CqlTlsFiles, metrics: ReloadMetrics) -> Option<Self> {
        store.can_reconnect().then_some(Self {
            store,
            files: files.0,
            metrics,
            retry: false,
        })
    }

    /// Reloads when the files changed since the last look (or a failed reload is to be retried).
    pub(crate) async fn reload_changed(&mut self) {
        if self.files.changed() {
            self.reload(Trigger::FileChange, true).await;
        } else if self.retry {
            self.reload(Trigger::FileChange, false).await;
        }
    }

    /// Reloads whatever the files hold (SIGHUP).
    pub(crate) async fn reload_all(&mut self) {
        self.files.mark_seen();
        self.reload(Trigger::Sighup, true).await;
    }

    /// `count`: a failure is counted (once per change or signal).
    async fn reload(&mut self, trigger: Trigger, count: bool) {
        let trigger = trigger.as_str();
        match self.store.reconnect().await {
            Ok(()) => {
                self.retry = false;
                self.metrics.outcome(WHAT, true);
                tracing::info!(
                    trigger,
                    "CQL client TLS files reloaded: new connections to the cluster use them"
                );
            }
            Err(e) => {
                self.retry = e.is_transient();
                if count {
                    self.metrics.outcome(WHAT, false);
                }
                tracing::error!(error = %e, trigger, retry = self.retry, "CQL client TLS reload failed; the connections keep the previous files");
            }
        }
    }
}

/// Runs `reloader`: on SIGHUP, and every `every` (when not zero). Runs until the process ends.
pub(crate) async fn run(mut reloader: CqlTlsReloader, every: Duration) {
    let mut triggers = Triggers::new(every, "the CQL client TLS files");
    loop {
        match triggers.next().await {
            Trigger::Sighup => reloader.reload_all().await,
            Trigger::FileChange => reloader.reload_changed().await,
        }
    }
}
