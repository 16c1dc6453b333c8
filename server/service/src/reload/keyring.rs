//! Reloads the key ring (`--encryption-keys`, docs/api.md, "Key ring") into the running
//! `Sealer`, like the tokens file: when its contents change and on SIGHUP. A file that does not
//! load, or a ring the sealer refuses (another `hmac` key: every hashed key would become
//! unreachable), keeps the ring in force, is logged with why and counted in
//! `oncekey_reload_failures_total{what="encryption-keys"}`. A ring that took effect is logged
//! with its key ids and primary. Never logs a secret: only key ids and the loader's errors,
//! which name lines.

use super::{ReloadMetrics, Trigger, Watched};
use oncekey_sealing::{KeyRing, Sealer};
use std::path::PathBuf;

/// The metric label of key ring reloads.
pub(super) const WHAT: &str = "encryption-keys";

/// The key ring file and the sealer it is loaded into.
pub(super) struct KeyRingFile {
    path: PathBuf,
    sealer: Sealer,
    pub(super) watched: Watched,
}

impl KeyRingFile {
    /// Watches `path`, whose ring `sealer` holds now.
    pub(super) fn new(path: PathBuf, sealer: Sealer) -> Self {
        Self {
            watched: Watched::new(vec![path.clone()]),
            path,
            sealer,
        }
    }

    /// Loads the file and hands the ring to the sealer: what it holds, or why it was kept out.
    fn load(&self) -> Result<RingIds, String> {
        let ring = KeyRing::load(&self.path).map_err(|e| e.to_string())?;
        let ids = RingIds::of(&ring);
        self.sealer.replace(ring)?;
        Ok(ids)
    }

    /// Loads the file again (`trigger` says why), logging and counting the outcome; with
    /// `quiet`, a success is neither logged nor counted (the catch-up after start).
    pub(super) fn reload(&self, trigger: Trigger, metrics: &ReloadMetrics, quiet: bool) {
        let trigger = trigger.as_str();
        match self.load() {
            Ok(_) if quiet => {}
            Ok(ids) => {
                metrics.outcome(WHAT, true);
                ids.log("key ring reloaded", trigger);
            }
            Err(e) => {
                metrics.outcome(WHAT, false);
                // The error names the file and the line, never a secret.
                tracing::error!(error = %e, trigger, "key ring reload failed; keeping the previous key ring");
            }
        }
    }
}

/// What is said of a key ring: its key ids, and which are the primary and the hmac key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RingIds {
    keys: Vec<String>,
    primary: Option<String>,
    hmac: Option<String>,
}

impl RingIds {
    /// The ids of `ring`.
    pub(crate) fn of(ring: &KeyRing) -> Self {
        Self {
            keys: ring.ids().into_iter().map(str::to_owned).collect(),
            primary: ring.primary_id().map(str::to_owned),
            hmac: ring.hmac_id().map(str::to_owned),
        }
    }

    /// Logs them at info with `message` (`trigger`: what loaded the ring).
    pub(crate) fn log(&self, message: &str, trigger: &str) {
        tracing::info!(
            keys = ?self.keys,
            primary = self.primary.as_deref().unwrap_or("none"),
            hmac = self.hmac.as_deref().unwrap_or("none"),
            trigger,
            "{message}"
        );
    }
}
