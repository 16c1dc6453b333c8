//! Test-only knobs of `oncekey serve`, set through `ONCEKEY_TEST_*` environment variables and
//! nothing else. They exist so that end-to-end tests can drive the real binary into situations a
//! test cannot wait for: replicas whose clocks disagree, an embedded store that rarely
//! checkpoints. **Never set them in production**: `serve` logs a warning when any is set.
//!
//! - `ONCEKEY_TEST_CLOCK_SKEW_MS`: shift this server's clock by this many milliseconds (may be
//!   negative), to test replicas whose clocks disagree. Default 0.
//! - `ONCEKEY_TEST_EMBEDDED_CHECKPOINT_INTERVAL`: the embedded store's longest time between
//!   checkpoints, as a duration (`50ms`, `1h`); with a long one its write-ahead log keeps every
//!   write since the last checkpoint, e.g. to build a damaged log. Default 50ms, 1ms ..= 1h.
//! - `ONCEKEY_TEST_PLANTED_BUG=lost-update`: the CQL store's replacing writes check
//!   `version >= ?` instead of `version = ?`, so a write decided on a stale read still applies (a
//!   lost update): the known bug the cluster fault tests plant to show that their
//!   linearizability checker catches it. Unset by default; any other value is refused.
//!
//! Why environment variables and not a cargo feature or hidden flags: the tests run the very
//! binary that ships (a feature would build another one, and cargo's feature unification would
//! switch it on in every workspace build that includes the tests), and the knobs stay out of the
//! command line and its help. Only the `oncekey` binary reads the environment (`from_env`); a
//! program embedding the server sets `ServeConfig::testing` directly.

use crate::duration::parse_duration;
use crate::ledger::Millis;
use crate::store::ConfigError;

/// The variable shifting the server's clock.
pub const CLOCK_SKEW_MS: &str = "ONCEKEY_TEST_CLOCK_SKEW_MS";
/// The variable setting the embedded store's longest time between checkpoints.
pub const EMBEDDED_CHECKPOINT_INTERVAL: &str = "ONCEKEY_TEST_EMBEDDED_CHECKPOINT_INTERVAL";
/// The variable planting a known bug (`lost-update`).
pub const PLANTED_BUG: &str = "ONCEKEY_TEST_PLANTED_BUG";

/// The test-only knobs; `TestKnobs::default()` is production.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestKnobs {
    /// Milliseconds added to the server's clock (may be negative).
    pub clock_skew_ms: Millis,
    /// The embedded store's longest time between checkpoints, in milliseconds.
    pub embedded_checkpoint_interval: Millis,
    /// The CQL store's replacing writes skip their version check (a planted lost update).
    pub planted_lost_update: bool,
}

impl Default for TestKnobs {
    fn default() -> Self {
        Self {
            clock_skew_ms: 0,
            embedded_checkpoint_interval: 50,
            planted_lost_update: false,
        }
    }
}

impl TestKnobs {
    /// The knobs the `ONCEKEY_TEST_*` variables set (unset: the default); a malformed value is a
    /// configuration error naming the variable.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The knobs from a variable lookup (`from_env` with the process environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let mut knobs = Self::default();
        if let Some(text) = var(CLOCK_SKEW_MS) {
            knobs.clock_skew_ms = text.trim().parse().map_err(|_| {
                ConfigError(format!(
                    "{CLOCK_SKEW_MS}={text:?}: not a number of milliseconds"
                ))
            })?;
        }
        if let Some(text) = var(EMBEDDED_CHECKPOINT_INTERVAL) {
            knobs.embedded_checkpoint_interval = parse_duration(&text)
                .map_err(|e| ConfigError(format!("{EMBEDDED_CHECKPOINT_INTERVAL}: {e}")))?;
        }
        if let Some(text) = var(PLANTED_BUG) {
            if text.trim() != "lost-update" {
                return Err(ConfigError(format!(
                    "{PLANTED_BUG}={text:?}: the only planted bug is `lost-update`"
                )));
            }
            knobs.planted_lost_update = true;
        }
        knobs.validate()?;
        Ok(knobs)
    }

    /// Checks the bounds; the message names the variable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=3_600_000).contains(&self.embedded_checkpoint_interval) {
            return Err(ConfigError(format!(
                "{EMBEDDED_CHECKPOINT_INTERVAL} must be between 1ms and 1h"
            )));
        }
        Ok(())
    }

    /// Whether any knob differs from production.
    pub fn any_set(&self) -> bool {
        *self != Self::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs(vars: &[(&str, &str)]) -> Result<TestKnobs, ConfigError> {
        TestKnobs::from_vars(|name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn unset_variables_leave_production_values() {
        let production = knobs(&[]).unwrap();
        assert_eq!(production, TestKnobs::default());
        assert!(!production.any_set());
    }

    #[test]
    fn variables_set_the_knobs() {
        let set = knobs(&[
            (CLOCK_SKEW_MS, "-2000"),
            (EMBEDDED_CHECKPOINT_INTERVAL, "1h"),
            (PLANTED_BUG, "lost-update"),
        ])
        .unwrap();
        assert_eq!(set.clock_skew_ms, -2000);
        assert_eq!(set.embedded_checkpoint_interval, 3_600_000);
        assert!(set.planted_lost_update);
        assert!(set.any_set());
    }

    #[test]
    fn malformed_values_name_the_variable() {
        let skew = knobs(&[(CLOCK_SKEW_MS, "soon")]).unwrap_err();
        assert!(skew.0.contains(CLOCK_SKEW_MS), "{skew}");
        let interval = knobs(&[(EMBEDDED_CHECKPOINT_INTERVAL, "2h")]).unwrap_err();
        assert!(
            interval.0.contains(EMBEDDED_CHECKPOINT_INTERVAL),
            "{interval}"
        );
        let bug = knobs(&[(PLANTED_BUG, "everything")]).unwrap_err();
        assert!(bug.0.contains(PLANTED_BUG), "{bug}");
        let interval = knobs(&[(EMBEDDED_CHECKPOINT_INTERVAL, "a while")]).unwrap_err();
        assert!(
            interval.0.contains(EMBEDDED_CHECKPOINT_INTERVAL),
            "{interval}"
        );
    }
}
