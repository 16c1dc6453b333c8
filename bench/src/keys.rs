//! Which key each op uses. Keys carry a random run id, so repeated runs against one server never
//! collide, and come from shared counters, so no two cycles ever claim the same fresh key.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's finaliser: a bijection of u64 that scatters consecutive values.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Key generators shared by every worker of one `oncekey bench` process.
pub struct Keys {
    run: u32,
    /// Scatter the keys over the key space (`--key-order random`).
    random: bool,
    fill: AtomicU64,
    cycle: AtomicU64,
    replay_setup: AtomicU64,
    storm: AtomicU64,
    /// How many completed keys `replay` chooses from.
    pub replay_keys: u64,
    hot_keys: u64,
    claims_per_key: u64,
}

impl Keys {
    /// Fresh generators for one run.
    pub fn new(replay_keys: u64, hot_keys: u64, claims_per_key: u64) -> Self {
        Self {
            run: rand::random(),
            random: false,
            fill: AtomicU64::new(0),
            cycle: AtomicU64::new(0),
            replay_setup: AtomicU64::new(0),
            storm: AtomicU64::new(0),
            replay_keys,
            hot_keys,
            claims_per_key,
        }
    }

    /// The same generators with keys scattered over the key space (`--key-order random`): each
    /// counter value goes through a bijective mix, so keys stay unique and repeatable.
    pub fn scattered(mut self, random: bool) -> Self {
        self.random = random;
        self
    }

    fn key(&self, kind: char, n: u64) -> String {
        let mut key = String::with_capacity(32);
        match self.random {
            false => write!(key, "{kind}{:08x}-{n}", self.run),
            true => write!(key, "{:016x}-{kind}{:08x}", mix(n), self.run),
        }
        .expect("writing to a String");
        key
    }

    /// A key never claimed before, for `cycle`.
    pub fn fresh(&self) -> String {
        self.key('c', self.cycle.fetch_add(1, Ordering::Relaxed))
    }

    /// A key never claimed before, for the preload.
    pub fn fill(&self) -> String {
        self.key('f', self.fill.fetch_add(1, Ordering::Relaxed))
    }

    /// The next key the replay setup completes.
    pub fn replay_setup(&self) -> String {
        self.key('r', self.replay_setup.fetch_add(1, Ordering::Relaxed))
    }

    /// Replay key number `n % replay_keys` (completed by the setup).
    pub fn replay(&self, n: u64) -> String {
        self.key('r', n % self.replay_keys)
    }

    /// The storm's next key: `hot_keys` keys are hammered at a time, each for `claims_per_key`
    /// Claims, then the storm moves on to fresh ones.
    pub fn storm(&self) -> String {
        let n = self.storm.fetch_add(1, Ordering::Relaxed);
        let group = self.hot_keys * self.claims_per_key;
        self.key('s', (n / group) * self.hot_keys + n % self.hot_keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storm_spreads_over_hot_keys_then_moves_on() {
        let keys = Keys::new(10, 2, 3);
        let seq: Vec<String> = (0..8).map(|_| keys.storm()).collect();
        let distinct: std::collections::BTreeSet<_> = seq[..6].iter().collect();
        assert_eq!(distinct.len(), 2, "{seq:?}");
        assert!(!distinct.contains(&seq[6]));
        assert_eq!(keys.replay(13), keys.replay(3));
        assert_ne!(keys.fresh(), keys.fresh());
    }

    #[test]
    fn scattered_keys_are_unique_repeatable_and_out_of_order() {
        let keys = Keys::new(10, 2, 3).scattered(true);
        let fresh: Vec<String> = (0..1000).map(|_| keys.fresh()).collect();
        let distinct: std::collections::BTreeSet<_> = fresh.iter().collect();
        assert_eq!(distinct.len(), fresh.len());
        let sorted = fresh.windows(2).filter(|w| w[0] < w[1]).count();
        assert!(
            (300..700).contains(&sorted),
            "{sorted} of 999 pairs in order"
        );
        assert_eq!(keys.replay(13), keys.replay(3));
    }
}
