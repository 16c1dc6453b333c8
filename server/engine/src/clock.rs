//! The server clock the engine hands to the ledger: the system clock, or a manual one for tests.

use oncekey_ledger::Millis;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// Where `now` comes from.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// Wall-clock milliseconds since the Unix epoch.
    #[default]
    System,
    /// A clock that moves only when told to (tests, model checks).
    Manual(Arc<AtomicI64>),
    /// The system clock shifted by a fixed number of milliseconds (fault tests: servers whose
    /// clocks disagree).
    Skewed(Millis),
}

impl Clock {
    /// A manual clock starting at `start`.
    pub fn manual(start: Millis) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(start)))
    }

    /// The current time.
    pub fn now(&self) -> Millis {
        match self {
            Clock::System => system_now(),
            Clock::Manual(now) => now.load(Ordering::SeqCst),
            Clock::Skewed(offset) => system_now().saturating_add(*offset),
        }
    }

    /// Moves a manual clock forward by `by` milliseconds (no effect on the system clock).
    pub fn advance(&self, by: Millis) {
        if let Clock::Manual(now) = self {
            now.fetch_add(by, Ordering::SeqCst);
        }
    }
}

fn system_now() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::Clock;

    #[test]
    fn a_skewed_clock_runs_ahead_or_behind_the_system_clock() {
        let (ahead, behind) = (Clock::Skewed(2_000), Clock::Skewed(-2_000));
        let system = Clock::System.now();
        assert!((ahead.now() - system - 2_000).abs() < 500);
        assert!((system - behind.now() - 2_000).abs() < 500);
    }
}
