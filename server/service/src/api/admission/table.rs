//! Per-tenant admission state: each limited tenant's token bucket and count of RPCs in progress,
//! in a map split into shards so tenants rarely wait for each other's lock.
//!
//! Memory stays bounded by the tenants that are busy, not by every tenant ever seen: an entry
//! whose bucket is full and which has nothing in progress is no different from a missing one,
//! and such entries are dropped whenever a shard has doubled since it was last swept (amortised
//! O(1) per new entry). Tenants without any limit get no entry at all.

use super::bucket::Bucket;
use super::policy::{Policy, TenantLimits};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

const SHARDS: usize = 16;
/// A shard is not swept before it holds this many entries.
const MIN_SWEEP: usize = 64;

/// How an RPC is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Claim, Lookup, ListRecords: may be refused; takes a token, counts as in progress.
    Admitted,
    /// Other unary RPCs (Complete, Fail, Renew, …): never refused, but count as in progress.
    Counted,
    /// Streams (KeepAlive): neither refused nor counted.
    Free,
}

/// Which limit refused a request, and when to come back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The request rate: a token is there after the delay.
    Rate(Duration),
    /// Too many RPCs in progress: no telling when one ends.
    Inflight,
}

#[derive(Debug)]
struct Entry {
    bucket: Option<Bucket>,
    inflight: u32,
}

impl Entry {
    /// Whether forgetting this entry changes nothing.
    fn at_rest(&self, limits: &TenantLimits, now: Instant) -> bool {
        self.inflight == 0
            && self.bucket.is_none_or(|b| {
                limits.rate <= 0.0 || b.is_full(now, limits.rate, limits.bucket_size())
            })
    }
}

#[derive(Debug, Default)]
struct Shard {
    entries: HashMap<Arc<str>, Entry>,
    sweep_at: usize,
}

/// Every limited tenant's state.
#[derive(Debug)]
pub(super) struct Table {
    shards: [Mutex<Shard>; SHARDS],
    hasher: RandomState,
}

impl Default for Table {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| Mutex::default()),
            hasher: RandomState::new(),
        }
    }
}

/// One RPC counted as in progress for its tenant until dropped (or nothing, when uncounted).
#[derive(Debug)]
#[must_use = "the RPC counts as in progress while the permit lives"]
pub struct Permit(Option<(Arc<Table>, Arc<str>)>);

impl Permit {
    /// A permit that counts nothing.
    pub fn none() -> Self {
        Permit(None)
    }

    /// Whether this permit counts an RPC in progress.
    pub fn counts(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some((table, tenant)) = self.0.take() {
            table.release(&tenant);
        }
    }
}

impl Table {
    fn shard(&self, tenant: &str) -> MutexGuard<'_, Shard> {
        let i = (self.hasher.hash_one(tenant) as usize) % SHARDS;
        self.shards[i].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits (or refuses) one RPC of `kind` from `tenant` at `now` under `policy`.
    pub(super) fn admit(
        self: &Arc<Self>,
        policy: &Policy,
        tenant: &str,
        kind: Kind,
        now: Instant,
    ) -> Result<Permit, Refusal> {
        let limits = policy.limits(tenant);
        let needed = match kind {
            Kind::Admitted => !limits.is_off(),
            Kind::Counted => limits.inflight > 0,
            Kind::Free => false,
        };
        if !needed {
            return Ok(Permit::none());
        }
        let mut shard = self.shard(tenant);
        if !shard.entries.contains_key(tenant) && shard.entries.len() >= shard.sweep_at {
            shard.sweep(policy, now);
        }
        let (key, entry) = match shard.entries.get_key_value(tenant) {
            Some((key, _)) => {
                let key = key.clone();
                let entry = shard.entries.get_mut(tenant).expect("just found");
                (key, entry)
            }
            None => {
                let key: Arc<str> = Arc::from(tenant);
                let entry = shard.entries.entry(key.clone()).or_insert(Entry {
                    bucket: None,
                    inflight: 0,
                });
                (key, entry)
            }
        };
        if kind == Kind::Admitted {
            if limits.inflight > 0 && entry.inflight >= limits.inflight {
                return Err(Refusal::Inflight);
            }
            if limits.rate > 0.0 {
                let size = limits.bucket_size();
                entry
                    .bucket
                    .get_or_insert_with(|| Bucket::full(size, now))
                    .take(now, limits.rate, size)
                    .map_err(Refusal::Rate)?;
            }
        }
        if limits.inflight == 0 {
            return Ok(Permit::none());
        }
        entry.inflight += 1;
        Ok(Permit(Some((self.clone(), key))))
    }

    /// One of `tenant`'s counted RPCs ended.
    fn release(&self, tenant: &str) {
        let mut shard = self.shard(tenant);
        if let Some(entry) = shard.entries.get_mut(tenant) {
            entry.inflight = entry.inflight.saturating_sub(1);
            if entry.inflight == 0 && entry.bucket.is_none() {
                shard.entries.remove(tenant);
            }
        }
    }

    /// How many tenants have an entry.
    pub(super) fn tenants(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).entries.len())
            .sum()
    }

    /// RPCs of `tenant` counted as in progress now.
    #[cfg(test)]
    pub(super) fn inflight(&self, tenant: &str) -> u32 {
        self.shard(tenant)
            .entries
            .get(tenant)
            .map_or(0, |e| e.inflight)
    }
}

impl Shard {
    /// Drops the entries at rest; the next sweep comes when the shard has doubled.
    fn sweep(&mut self, policy: &Policy, now: Instant) {
        self.entries
            .retain(|tenant, entry| !entry.at_rest(policy.limits(tenant), now));
        self.sweep_at = (self.entries.len() * 2).max(MIN_SWEEP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(rate: f64, burst: u32, inflight: u32) -> Policy {
        Policy::new(
            TenantLimits {
                rate,
                burst,
                inflight,
                held_claims: 0,
            },
            HashMap::new(),
        )
    }

    #[test]
    fn each_tenant_has_its_own_bucket() {
        let table = Arc::new(Table::default());
        let p = policy(1.0, 2, 0);
        let now = Instant::now();
        let admit = |tenant| table.admit(&p, tenant, Kind::Admitted, now);
        assert!(admit("a").is_ok());
        assert!(admit("a").is_ok());
        let Err(Refusal::Rate(wait)) = admit("a") else {
            panic!("a third request at once must be refused")
        };
        assert!(wait > Duration::ZERO && wait <= Duration::from_secs(1));
        // Another tenant at the same instant is untouched by a's empty bucket.
        assert!(admit("b").is_ok());
        assert!(admit("b").is_ok());
    }

    #[test]
    fn settlements_and_streams_are_never_refused() {
        let table = Arc::new(Table::default());
        let p = policy(1.0, 1, 1);
        let now = Instant::now();
        let held = table.admit(&p, "a", Kind::Admitted, now).unwrap();
        assert_eq!(
            table.admit(&p, "a", Kind::Admitted, now).unwrap_err(),
            Refusal::Inflight
        );
        // Over both limits, yet Complete/Fail/Renew and KeepAlive go through.
        let settle = table.admit(&p, "a", Kind::Counted, now).unwrap();
        assert!(settle.counts());
        assert_eq!(table.inflight("a"), 2);
        assert!(!table.admit(&p, "a", Kind::Free, now).unwrap().counts());
        drop((held, settle));
        assert_eq!(table.inflight("a"), 0);
        // In-flight room again, but the rate's one token is spent.
        assert!(matches!(
            table.admit(&p, "a", Kind::Admitted, now),
            Err(Refusal::Rate(_))
        ));
    }

    #[test]
    fn inflight_counts_until_the_permit_is_dropped() {
        let table = Arc::new(Table::default());
        let p = policy(0.0, 0, 2);
        let now = Instant::now();
        let one = table.admit(&p, "a", Kind::Admitted, now).unwrap();
        let two = table.admit(&p, "a", Kind::Admitted, now).unwrap();
        assert_eq!(
            table.admit(&p, "a", Kind::Admitted, now).unwrap_err(),
            Refusal::Inflight
        );
        assert!(table.admit(&p, "b", Kind::Admitted, now).is_ok());
        drop(one);
        let three = table.admit(&p, "a", Kind::Admitted, now).unwrap();
        drop((two, three));
        // Without a rate nothing is left to remember once nothing is in flight.
        assert_eq!(table.tenants(), 0);
    }

    #[test]
    fn unlimited_tenants_cost_no_entry() {
        let table = Arc::new(Table::default());
        let mut overrides = HashMap::new();
        overrides.insert("vip".to_owned(), TenantLimits::OFF);
        let p = Policy::new(
            TenantLimits {
                rate: 1.0,
                burst: 1,
                inflight: 0,
                held_claims: 0,
            },
            overrides,
        );
        let now = Instant::now();
        for _ in 0..10 {
            let permit = table.admit(&p, "vip", Kind::Admitted, now).unwrap();
            assert!(!permit.counts());
        }
        // No in-flight limit: settlements are not even counted.
        assert!(!table.admit(&p, "x", Kind::Counted, now).unwrap().counts());
        assert_eq!(table.tenants(), 0);
        assert!(table.admit(&p, "plain", Kind::Admitted, now).is_ok());
        assert!(table.admit(&p, "plain", Kind::Admitted, now).is_err());
    }

    #[test]
    fn idle_tenants_are_forgotten_so_memory_follows_the_busy_ones() {
        let table = Arc::new(Table::default());
        let p = policy(10.0, 5, 0);
        let t0 = Instant::now();
        // 100 000 tenants, one request each, one second apart in groups of 1000: a bucket
        // refills in 0.1 s, so at any time only the last group's entries matter.
        for group in 0..100u64 {
            let now = t0 + Duration::from_secs(group);
            for i in 0..1000 {
                let tenant = format!("t{group}-{i}");
                assert!(table.admit(&p, &tenant, Kind::Admitted, now).is_ok());
            }
        }
        let len = table.tenants();
        assert!(len <= 4 * 1000 + SHARDS * MIN_SWEEP, "{len} entries kept");
        // A busy tenant is never forgotten: its empty bucket survives every sweep.
        let busy = "busy";
        let now = t0 + Duration::from_secs(200);
        for _ in 0..5 {
            assert!(table.admit(&p, busy, Kind::Admitted, now).is_ok());
        }
        for i in 0..20_000 {
            let _ = table.admit(&p, &format!("late-{i}"), Kind::Admitted, now);
        }
        assert!(table.admit(&p, busy, Kind::Admitted, now).is_err());
    }

    #[test]
    fn an_entry_with_rpcs_in_flight_survives_sweeps() {
        let table = Arc::new(Table::default());
        let p = policy(1000.0, 1, 1);
        let t0 = Instant::now();
        let held = table.admit(&p, "held", Kind::Admitted, t0).unwrap();
        let later = t0 + Duration::from_secs(60);
        for i in 0..10_000 {
            drop(table.admit(&p, &format!("t{i}"), Kind::Admitted, later));
        }
        assert_eq!(table.inflight("held"), 1);
        assert_eq!(
            table.admit(&p, "held", Kind::Admitted, later).unwrap_err(),
            Refusal::Inflight
        );
        drop(held);
        assert_eq!(table.inflight("held"), 0);
    }
}
