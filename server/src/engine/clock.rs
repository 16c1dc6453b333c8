//! The server clock the engine hands to the ledger: the system clock, or a manual one for tests.

use crate::ledger::Millis;
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
}

impl Clock {
    /// A manual clock starting at `start`.
    pub fn manual(start: Millis) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(start)))
    }

    /// The current time.
    pub fn now(&self) -> Millis {
        match self {
            Clock::System => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Clock::Manual(now) => now.load(Ordering::SeqCst),
        }
    }

    /// Moves a manual clock forward by `by` milliseconds (no effect on the system clock).
    pub fn advance(&self, by: Millis) {
        if let Clock::Manual(now) = self {
            now.fetch_add(by, Ordering::SeqCst);
        }
    }
}
