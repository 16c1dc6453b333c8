//! The data protection flags of `oncekey serve` (docs/api.md, "Data protection"), turned into the
//! server's `ProtectionConfig`, which checks them and reads the key ring.

use clap::Args;
use oncekey_server::settings::ProtectionConfig;
use std::path::PathBuf;

/// The data protection flags of `oncekey serve`.
#[derive(Debug, Clone, Args)]
pub struct ProtectionArgs {
    /// The key ring: `ID SECRET [FLAGS]` lines (`oncekey new-key` prints one). With a `primary`
    /// key, results and errors are sealed at rest; an `hmac` key serves --key-privacy. Reloaded
    /// when it changes and on SIGHUP (a ring that does not load, or changes the hmac key, is
    /// kept out). Without it, new writes are clear and sealed records unreadable.
    #[arg(long, env = "ONCEKEY_ENCRYPTION_KEYS")]
    pub encryption_keys: Option<PathBuf>,
    /// Key privacy rules (repeatable; comma-separated in the environment): `hmac` (every
    /// namespace), `PATTERN=hmac` or `PATTERN=off`, PATTERN a namespace, a prefix ending in `*`,
    /// or `*`; the longest matching pattern applies. Keys of those namespaces are stored only as
    /// an HMAC under the key ring's hmac key.
    #[arg(long, env = "ONCEKEY_KEY_PRIVACY", value_delimiter = ',')]
    pub key_privacy: Vec<String>,
    /// Retention ceilings, PATTERN=DURATION (repeatable; comma-separated in the environment):
    /// e.g. `payments.*=7d`. A Claim of a matching namespace asking for more (or defaulting to
    /// more) is kept that long; 1m ..= --max-retention; the longest matching pattern applies.
    #[arg(long, env = "ONCEKEY_RETENTION_CEILING", value_delimiter = ',')]
    pub retention_ceiling: Vec<String>,
}

impl ProtectionArgs {
    /// The data protection settings these flags give.
    pub fn config(&self) -> ProtectionConfig {
        ProtectionConfig {
            encryption_keys: self.encryption_keys.clone(),
            key_privacy: self.key_privacy.clone(),
            retention_ceiling: self.retention_ceiling.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::args::{Cli, Command};
    use clap::Parser;

    #[test]
    fn the_data_protection_flags_reach_the_settings() {
        let argv = [
            "oncekey",
            "serve",
            "--encryption-keys",
            "/etc/oncekey/keyring",
            "--key-privacy",
            "payments.*=hmac,payments.refund=off",
            "--key-privacy",
            "hmac",
            "--retention-ceiling",
            "payments.*=7d",
        ];
        let Command::Serve(args) = Cli::parse_from(argv).command else {
            unreachable!()
        };
        let config = args.protection.config();
        assert_eq!(
            config.encryption_keys.as_deref(),
            Some(std::path::Path::new("/etc/oncekey/keyring"))
        );
        assert_eq!(
            config.key_privacy,
            ["payments.*=hmac", "payments.refund=off", "hmac"]
        );
        assert_eq!(config.retention_ceiling, ["payments.*=7d"]);
    }
}
