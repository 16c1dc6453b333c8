//! The data protection settings of `oncekey serve` (docs/api.md, "Data protection"):
//! `--encryption-keys`, `--key-privacy` and `--retention-ceiling`, checked and turned into what
//! the server runs with. Every error names its flag (exit 64); a key ring error names the file's
//! line, never a secret.

use crate::api::limits::retention_ceilings;
use crate::api::pattern::ByNamespace;
use crate::api::privacy::{KeyPrivacy, PrivacyRules};
use crate::ledger::Millis;
use crate::store::ConfigError;
use oncekey_sealing::{KeyRing, Sealer};
use std::path::PathBuf;

/// The data protection flags, as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectionConfig {
    /// The key ring file (`--encryption-keys`); `None`: an empty ring (new writes in clear,
    /// sealed records unreadable).
    pub encryption_keys: Option<PathBuf>,
    /// Key privacy rules (`--key-privacy`, each value one or more comma-separated rules).
    pub key_privacy: Vec<String>,
    /// Retention ceilings (`--retention-ceiling`, each value one or more comma-separated
    /// `PATTERN=DURATION`).
    pub retention_ceiling: Vec<String>,
}

impl ProtectionConfig {
    /// Checks the rules (not the key ring file, which `key_privacy` reads).
    pub fn validate(&self, max_retention: Millis) -> Result<(), ConfigError> {
        self.privacy_rules()?;
        self.retention_ceilings(max_retention)?;
        Ok(())
    }

    /// The key privacy rules.
    pub fn privacy_rules(&self) -> Result<PrivacyRules, ConfigError> {
        PrivacyRules::from_flags(&self.key_privacy)
            .map_err(|e| ConfigError(format!("--key-privacy: {e}")))
    }

    /// The retention ceilings, each at most `max_retention`.
    pub fn retention_ceilings(
        &self,
        max_retention: Millis,
    ) -> Result<ByNamespace<Millis>, ConfigError> {
        retention_ceilings(&self.retention_ceiling, max_retention)
            .map_err(|e| ConfigError(format!("--retention-ceiling: {e}")))
    }

    /// The key ring, read now (empty without `--encryption-keys`).
    pub fn key_ring(&self) -> Result<KeyRing, ConfigError> {
        match &self.encryption_keys {
            Some(path) => {
                KeyRing::load(path).map_err(|e| ConfigError(format!("--encryption-keys: {e}")))
            }
            None => Ok(KeyRing::empty()),
        }
    }

    /// Key privacy over a sealer of the key ring read now; refused when a rule hashes keys and
    /// the ring has no `hmac` key.
    pub fn key_privacy(&self) -> Result<KeyPrivacy, ConfigError> {
        let rules = self.privacy_rules()?;
        let ring = self.key_ring()?;
        if rules.any() && ring.hmac_id().is_none() {
            let why = match &self.encryption_keys {
                Some(_) => "the key ring of --encryption-keys has no key flagged hmac",
                None => "it needs --encryption-keys with a key flagged hmac",
            };
            return Err(ConfigError(format!(
                "--key-privacy: {why} (oncekey new-key --id ID --hmac prints one)"
            )));
        }
        Ok(KeyPrivacy::new(rules, Sealer::new(ring)))
    }
}

#[cfg(test)]
mod tests;
