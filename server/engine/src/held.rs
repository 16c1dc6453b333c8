//! How many Claims each tenant has held by `wait` right now, and the bound on it: a held Claim
//! costs memory and an open stream for up to a minute, so one tenant holding tens of thousands
//! of them must not starve the others. The bound itself comes from the caller (the API reads it
//! from the admission limits); this only counts, per tenant, in a map split into shards so that
//! tenants rarely wait for one another's lock. A tenant's entry goes when its last held Claim
//! does.

use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Mutex, MutexGuard};

const SHARDS: usize = 16;

/// Held Claims by tenant.
pub(crate) struct HeldClaims {
    shards: [Mutex<HashMap<String, u32>>; SHARDS],
    hasher: RandomState,
    /// Every tenant's held Claims, for `/metrics`.
    total: Gauge,
}

impl HeldClaims {
    /// No Claim held yet; `total` follows the count of every tenant's.
    pub(crate) fn new(total: Gauge) -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::default()),
            hasher: RandomState::new(),
            total,
        }
    }
}

/// One held Claim of a tenant, counted until dropped.
#[must_use = "the Claim counts as held while the permit lives"]
pub(crate) struct HeldPermit<'a> {
    held: &'a HeldClaims,
    tenant: String,
}

impl HeldClaims {
    fn shard(&self, tenant: &str) -> MutexGuard<'_, HashMap<String, u32>> {
        let i = self.hasher.hash_one(tenant) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts one more held Claim of `tenant`, unless it holds `max` already (`max` 0: no bound).
    pub(crate) fn enter(&self, tenant: &str, max: u32) -> Option<HeldPermit<'_>> {
        let mut shard = self.shard(tenant);
        let count = match shard.get_mut(tenant) {
            Some(count) => count,
            None => shard.entry(tenant.to_owned()).or_insert(0),
        };
        if max > 0 && *count >= max {
            return None;
        }
        *count += 1;
        self.total.inc();
        Some(HeldPermit {
            held: self,
            tenant: tenant.to_owned(),
        })
    }

    /// How many Claims `tenant` holds now.
    pub(crate) fn of(&self, tenant: &str) -> u32 {
        self.shard(tenant).get(tenant).copied().unwrap_or(0)
    }
}

impl Drop for HeldPermit<'_> {
    fn drop(&mut self) {
        self.held.total.dec();
        let mut shard = self.held.shard(&self.tenant);
        if let Some(count) = shard.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                shard.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tenant_is_bounded_on_its_own_until_its_claims_end() {
        let held = HeldClaims::new(Gauge::default());
        let a: Vec<_> = (0..3).map(|_| held.enter("a", 3).unwrap()).collect();
        assert!(held.enter("a", 3).is_none(), "a fourth is over the bound");
        let b = held.enter("b", 3).expect("another tenant is not affected");
        assert_eq!((held.of("a"), held.of("b")), (3, 1));
        assert_eq!(held.total.get(), 4);
        drop(a);
        assert_eq!(held.of("a"), 0);
        assert!(held.enter("a", 3).is_some());
        // 0: no bound.
        let many: Vec<_> = (0..10).map(|_| held.enter("c", 0).unwrap()).collect();
        assert_eq!(held.of("c"), 10);
        drop((many, b));
        assert_eq!(held.total.get(), 0);
        assert!(held.shards.iter().all(|s| s.lock().unwrap().is_empty()));
    }
}
