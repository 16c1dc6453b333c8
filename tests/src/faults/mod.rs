//! The fault-injection harness shared by the crash and store-fault trials: an external side-effect
//! ledger that workers append to when they perform their effect, a claim → effect → complete
//! workload over the Rust client, the checks that count duplicates and losses from the outside,
//! and a CQL-aware TCP fault proxy (CQL nodes: `crate::cql`).
//!
//! Nothing here trusts the service's own answers for the verdict: duplicates are counted in the
//! effect file, losses by looking up what the client saw acknowledged.

pub mod effects;
pub mod proxy;
pub mod workload;

use std::time::{SystemTime, UNIX_EPOCH};

/// A small xorshift generator (no extra dependency), seeded from the clock unless a seed is given
/// in `$ONCEKEY_FAULT_SEED` (printed by every trial, to replay one).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The run's seed: `$ONCEKEY_FAULT_SEED` or the clock.
    pub fn seed() -> u64 {
        std::env::var("ONCEKEY_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `lo..hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo).max(1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() % 1_000_000) as f64 / 1_000_000.0 < p
    }
}

/// `ADDR` of `http://ADDR`.
pub fn host_port(url: &str) -> String {
    url.trim_start_matches("http://").to_owned()
}
