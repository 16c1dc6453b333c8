//! Reloads the tokens file, the gRPC port's TLS files and the key ring when their contents change
//! on disk, and on SIGHUP, through the reload functions of `api::auth`, `tls` and the sealer
//! (`keyring`), which keep what they had when a new file fails to load; `cql` does the same for
//! the CQL store's client TLS files.
//!
//! Change detection polls: every `--reload-check-interval` the watched files are read and hashed
//! (they are a few KiB), and a digest that differs from the last one loaded, and reads the same
//! at two looks in a row, triggers a reload: a file caught mid-rewrite (truncated and not yet
//! written, or cut short) is never loaded. This
//! follows every way a file gets replaced: kubelet's update of a mounted Secret (a new timestamped
//! directory, then an atomic rename of the `..data` symlink the file names resolve through),
//! editors that write a temporary file and rename it, and plain rewrites in place, on any
//! filesystem, without a watcher library or inotify limits. The poll interval (seconds) is small
//! beside the kubelet's own delay in refreshing a Secret (up to about a minute).
//!
//! A change that fails to load (a half-written file, a key that does not match its certificate)
//! is logged and counted once in `oncekey_reload_failures_total{what}`; the next change (the rest
//! of the write arriving) is tried again. `oncekey_tls_certificate_expiry_seconds` holds the
//! notAfter time of the certificate being served. Never logs the files' contents.

use crate::api::auth::Auth;
use crate::settings::ServeConfig;
pub(crate) use crate::telemetry::reload::ReloadMetrics;
use crate::tls::Tls;
use oncekey_sealing::Sealer;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The notAfter time of the first certificate in a PEM file, in seconds since the Unix epoch.
pub(crate) fn certificate_expiry(pem: &[u8]) -> Result<i64, String> {
    let cert = openssl::x509::X509::from_pem(pem).map_err(|e| e.to_string())?;
    let epoch = openssl::asn1::Asn1Time::from_unix(0).map_err(|e| e.to_string())?;
    let diff = epoch.diff(cert.not_after()).map_err(|e| e.to_string())?;
    Ok(i64::from(diff.days) * 86_400 + i64::from(diff.secs))
}

/// What triggered a reload (a log field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trigger {
    Sighup,
    FileChange,
}

impl Trigger {
    fn as_str(self) -> &'static str {
        match self {
            Trigger::Sighup => "sighup",
            Trigger::FileChange => "file change",
        }
    }
}

/// A set of files reloaded together, the digest of their contents as last taken, and of a change
/// seen once but not yet settled.
struct Watched {
    paths: Vec<PathBuf>,
    seen: [u8; 32],
    unsettled: Option<[u8; 32]>,
}

impl Watched {
    fn new(paths: Vec<PathBuf>) -> Self {
        let seen = digest(&paths);
        Self {
            paths,
            seen,
            unsettled: None,
        }
    }

    /// Whether the contents changed since they were last taken, and read the same at this look
    /// and the one before: a file rewritten in place reads empty or cut short for a moment
    /// (truncated, then written), and such a moment must not be loaded — an empty tokens file is
    /// a valid one that lets nobody in, and the whole file that follows may well fail to load.
    fn changed(&mut self) -> bool {
        let now = digest(&self.paths);
        if now == self.seen {
            self.unsettled = None;
            return false;
        }
        if self.unsettled != Some(now) {
            self.unsettled = Some(now);
            return false;
        }
        self.seen = now;
        self.unsettled = None;
        true
    }

    /// Takes the current contents as seen (after a reload that read them).
    fn mark_seen(&mut self) {
        self.seen = digest(&self.paths);
        self.unsettled = None;
    }
}

/// SHA-256 over each path's contents (following symlinks); a file that cannot be read counts as
/// its error kind, so its disappearance and its return are both changes.
fn digest(paths: &[PathBuf]) -> [u8; 32] {
    let mut hash = Sha256::new();
    for path in paths {
        hash.update(path.as_os_str().as_encoded_bytes());
        match std::fs::read(path) {
            Ok(bytes) => {
                hash.update([1]);
                hash.update((bytes.len() as u64).to_be_bytes());
                hash.update(&bytes);
            }
            Err(e) => {
                hash.update([0]);
                hash.update(format!("{:?}", e.kind()).as_bytes());
            }
        }
    }
    hash.finalize().into()
}

/// Reloads the tokens file, the TLS files and the key ring.
pub(crate) struct Reloader {
    auth: Arc<Auth>,
    tls: Option<(Arc<Tls>, PathBuf)>,
    metrics: ReloadMetrics,
    tokens_files: Option<Watched>,
    tls_files: Option<Watched>,
    key_ring: Option<keyring::KeyRingFile>,
}

impl Reloader {
    /// Watches the files `args` names (`--tokens-file`, `--tls-cert`, `--tls-key`,
    /// `--tls-client-ca`), as loaded now into `auth` and `tls`; exports the serving
    /// certificate's expiry.
    pub(crate) fn new(
        args: &ServeConfig,
        auth: Arc<Auth>,
        tls: Option<Arc<Tls>>,
        metrics: ReloadMetrics,
    ) -> Self {
        let tokens_files = args
            .tokens_file
            .as_ref()
            .filter(|_| auth.has_tokens())
            .map(|path| Watched::new(vec![path.clone()]));
        let tls = tls.zip(args.tls_cert.clone());
        let tls_files = tls.as_ref().map(|(_, cert)| {
            let mut paths = vec![cert.clone()];
            paths.extend(args.tls_key.clone());
            paths.extend(args.tls_client_ca.clone());
            Watched::new(paths)
        });
        let reloader = Self {
            auth,
            tls,
            metrics,
            tokens_files,
            tls_files,
            key_ring: None,
        };
        reloader.catch_up();
        if let Some((_, cert)) = &reloader.tls {
            reloader.export_expiry(cert);
        }
        reloader
    }

    /// The same reloader, also watching the key ring file `path` (`--encryption-keys`), whose
    /// ring `sealer` holds; catches up with a change since it was read, like `new`.
    pub(crate) fn with_key_ring(mut self, path: PathBuf, sealer: Sealer) -> Self {
        let file = keyring::KeyRingFile::new(path, sealer);
        file.reload(Trigger::FileChange, &self.metrics, true);
        self.key_ring = Some(file);
        self
    }

    /// Loads the files once more, now that their digests are taken: the server read them at
    /// start, possibly long before (opening the store can take a while), and a change in between
    /// would otherwise go unnoticed until the next one. Only a failure is logged and counted.
    fn catch_up(&self) {
        if self.tokens_files.is_some() {
            if let Err(e) = self.auth.reload() {
                self.metrics.outcome("tokens", false);
                tracing::error!(error = %e, "tokens file reload failed; keeping the previous tokens");
            }
        }
        if let Some((tls, _)) = &self.tls {
            if let Err(e) = tls.reload() {
                self.metrics.outcome("tls", false);
                tracing::error!(error = %e, "TLS reload failed; keeping the previous certificate");
            }
        }
    }

    /// Reloads whatever changed on disk since the last look.
    pub(crate) fn reload_changed(&mut self) {
        if self.tokens_files.as_mut().is_some_and(Watched::changed) {
            self.reload_tokens(Trigger::FileChange);
        }
        if self.tls_files.as_mut().is_some_and(Watched::changed) {
            self.reload_tls(Trigger::FileChange);
        }
        if let Some(file) = &mut self.key_ring {
            if file.watched.changed() {
                file.reload(Trigger::FileChange, &self.metrics, false);
            }
        }
    }

    /// Reloads everything (SIGHUP).
    pub(crate) fn reload_all(&mut self) {
        if let Some(files) = &mut self.tokens_files {
            files.mark_seen();
        }
        if let Some(files) = &mut self.tls_files {
            files.mark_seen();
        }
        self.reload_tokens(Trigger::Sighup);
        self.reload_tls(Trigger::Sighup);
        if let Some(file) = &mut self.key_ring {
            file.watched.mark_seen();
            file.reload(Trigger::Sighup, &self.metrics, false);
        }
    }

    fn reload_tokens(&self, trigger: Trigger) {
        if !self.auth.has_tokens() {
            return;
        }
        let trigger = trigger.as_str();
        match self.auth.reload() {
            Ok(n) => {
                self.metrics.outcome("tokens", true);
                tracing::info!(entries = n, trigger, "tokens file reloaded");
            }
            Err(e) => {
                self.metrics.outcome("tokens", false);
                tracing::error!(error = %e, trigger, "tokens file reload failed; keeping the previous tokens");
            }
        }
    }

    fn reload_tls(&self, trigger: Trigger) {
        let Some((tls, cert)) = &self.tls else {
            return;
        };
        let trigger = trigger.as_str();
        match tls.reload() {
            Ok(()) => {
                self.metrics.outcome("tls", true);
                self.export_expiry(cert);
                tracing::info!(trigger, "TLS certificate reloaded");
            }
            Err(e) => {
                self.metrics.outcome("tls", false);
                tracing::error!(error = %e, trigger, "TLS reload failed; keeping the previous certificate");
            }
        }
    }

    /// Exports the expiry of the certificate in `cert` (just loaded: a file changing in between
    /// is a change the next look reloads).
    fn export_expiry(&self, cert: &Path) {
        match std::fs::read(cert)
            .map_err(|e| e.to_string())
            .and_then(|pem| certificate_expiry(&pem))
        {
            Ok(expiry) => self.metrics.set_certificate_expiry(expiry),
            Err(e) => {
                tracing::warn!(error = %e, file = %cert.display(), "cannot read the TLS certificate's expiry")
            }
        }
    }
}

/// What wakes a reload loop: SIGHUP (reload everything) and, every `every` when not zero, a check
/// for changed files. Shared by the loops of the gRPC port's files and the CQL client's.
struct Triggers {
    hup: Option<tokio::signal::unix::Signal>,
    tick: Option<tokio::time::Interval>,
}

impl Triggers {
    /// `what` names the files in the warning when SIGHUP cannot be handled.
    fn new(every: Duration, what: &str) -> Self {
        let hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(hup) => Some(hup),
            Err(e) => {
                tracing::warn!(error = %e, "cannot handle SIGHUP; {what} are reloaded only on change");
                None
            }
        };
        let tick = (!every.is_zero()).then(|| {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick
        });
        Self { hup, tick }
    }

    /// Waits for the next trigger (forever when there is none).
    async fn next(&mut self) -> Trigger {
        loop {
            let hangup = async {
                match &mut self.hup {
                    Some(hup) => hup.recv().await.is_some(),
                    None => std::future::pending().await,
                }
            };
            let poll = async {
                match &mut self.tick {
                    Some(tick) => tick.tick().await,
                    None => std::future::pending().await,
                }
            };
            let signalled = tokio::select! {
                signal = hangup => Some(signal),
                _ = poll => None,
            };
            match signalled {
                Some(true) => return Trigger::Sighup,
                // The signal stream ended: from now on only the checks.
                Some(false) => self.hup = None,
                None => return Trigger::FileChange,
            }
        }
    }
}

/// Runs `reloader`: on SIGHUP, and every `every` (when not zero) for changed files. Runs until
/// the process ends.
pub(crate) async fn run(mut reloader: Reloader, every: Duration) {
    let mut triggers = Triggers::new(every, "files");
    loop {
        // The files are small and local (mounted Secrets): read on this task, as SIGHUP always was.
        match triggers.next().await {
            Trigger::Sighup => reloader.reload_all(),
            Trigger::FileChange => reloader.reload_changed(),
        }
    }
}

pub(crate) mod cql;
mod keyring;
pub(crate) use keyring::RingIds;
#[cfg(test)]
mod tests;
