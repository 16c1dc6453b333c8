//! The keys whose outcome this gateway itself found unknown (an at-most-once request that may
//! have reached the upstream got no complete answer), remembered until the ledger says so too.
//!
//! The gateway ends such a request's lease at once (renewed to the ledger's shortest lease), after
//! which the ledger answers NEEDS_RECONCILIATION. Until then the record still looks in flight, so
//! a Claim answered IN_PROGRESS for a key remembered here is told "outcome unknown" instead of "in
//! progress". Only that answer is changed: the ledger stays the authority (a fingerprint mismatch
//! is still 422, a reconciled key is answered as reconciled). Bounded: entries expire, and beyond
//! [`MAX_ENTRIES`] live ones new keys are not remembered (they are then "in progress" for a second).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// The most keys remembered at once.
pub const MAX_ENTRIES: usize = 100_000;

/// Ledger keys with an unknown outcome, each until an instant.
#[derive(Debug, Default)]
pub struct Unknowns {
    keys: Mutex<HashMap<String, Instant>>,
}

impl Unknowns {
    /// Remembers `key` until `until`.
    pub fn insert(&self, key: &str, until: Instant) {
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        keys.retain(|_, until| *until > now);
        if keys.len() < MAX_ENTRIES || keys.contains_key(key) {
            keys.insert(key.to_owned(), until);
        }
    }

    /// True while `key` is remembered.
    pub fn contains(&self, key: &str) -> bool {
        let keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        keys.get(key).is_some_and(|until| *until > Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn keys_are_remembered_until_their_instant() {
        let u = Unknowns::default();
        let now = Instant::now();
        u.insert("a", now + Duration::from_secs(60));
        u.insert("b", now);
        assert!(u.contains("a"));
        assert!(!u.contains("b"), "expired");
        assert!(!u.contains("c"));
        // Expired entries make room.
        u.insert("c", now + Duration::from_secs(60));
        assert_eq!(u.keys.lock().unwrap().len(), 2);
    }
}
