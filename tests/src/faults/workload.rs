//! The claim → effect → complete workload and its verdict.
//!
//! Workers loop through the Rust client's one-call API (`client.once(&key, &args).run(…)`) over a
//! growing set of keys, half AT_MOST_ONCE and half AT_LEAST_ONCE, with 1 s or 2 s leases. A worker
//! that acquires a key with at least [`HOLDER_MARGIN`] of its lease left appends the effect to the
//! [`EffectLog`] first, then "waits for the downstream answer" (sleeps up to 300 ms, so faults land
//! mid-effect), then returns its result, which the client Completes. A few runs fail before their
//! effect (retryable or final), and so does one whose lease is nearly over when it starts.
//!
//! [`Workload::verify`] counts from the outside: no AT_MOST_ONCE effect twice; an AT_LEAST_ONCE
//! effect repeated only under a strictly newer token acquired by a takeover; no token used by two
//! executions; every acknowledged completion SUCCEEDED with the same result; every replayed result
//! the stored one and produced by a recorded effect; every key SUCCEEDED, FAILED or claimable.

mod verdict;

pub use verdict::{lookup_patiently, Verdict};

use super::effects::EffectLog;
use super::Rng;
use oncekey_client::{
    BreakerPolicy, Client, ConnectOptions, Disposition, Failure, OnceError, OperationKey,
    RecordStatus, RetryPolicy,
};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The tenant every trial runs as.
pub const TENANT: &str = "faults";
/// The longest lease the workload asks for.
pub const MAX_LEASE: Duration = Duration::from_secs(2);
/// How much of its lease a worker must still have (on its own clock) to perform the effect: more
/// than the largest clock step the fault scenarios give a server (600 ms). A server running *S*
/// ahead takes a lease over *S* early (docs/reliability.md, "Clocks"), so a holder that acted
/// with less left than the skew could run its effect after a newer token's — which the verdict
/// counts as a violation, rightly only for holders that keep this rule.
pub const HOLDER_MARGIN: Duration = Duration::from_millis(700);

/// One key of the workload.
#[derive(Debug, Clone)]
pub struct KeySpec {
    /// The key string.
    pub name: String,
    /// AT_MOST_ONCE (else AT_LEAST_ONCE).
    pub at_most_once: bool,
    /// The lease the workers ask for.
    pub lease: Duration,
    /// Filler in the key's result: every third key's result is large enough (6 KB) for the
    /// embedded store to keep it apart from its record, so crashes meet those writes too.
    pub pad: String,
}

impl KeySpec {
    fn new(id: u64) -> KeySpec {
        KeySpec {
            name: format!("k{id}"),
            at_most_once: id.is_multiple_of(2),
            lease: if (id / 2).is_multiple_of(2) {
                Duration::from_secs(1)
            } else {
                MAX_LEASE
            },
            pad: if id.is_multiple_of(3) {
                "x".repeat(6000)
            } else {
                String::new()
            },
        }
    }
}

/// Counters of what the workers saw.
#[derive(Debug, Default)]
pub struct Counts {
    /// Runs started.
    pub runs: AtomicU64,
    /// Effects performed (closures that ran to their effect).
    pub effects: AtomicU64,
    /// Completes acknowledged to the worker.
    pub acked: AtomicU64,
    /// Stored results replayed to a worker.
    pub replayed: AtomicU64,
    /// Failures recorded (retryable or final) by the worker's own Fail.
    pub failed_runs: AtomicU64,
    /// Stored final failures replayed.
    pub failed_replays: AtomicU64,
    /// NEEDS_RECONCILIATION answers.
    pub unknown: AtomicU64,
    /// IN_PROGRESS after the wait.
    pub in_progress: AtomicU64,
    /// Leases lost before the settle.
    pub lease_lost: AtomicU64,
    /// Effects whose outcome could not be recorded (server gone at the settle).
    pub unsettled: AtomicU64,
    /// Claims that failed (server unreachable, store unavailable).
    pub rpc_errors: AtomicU64,
}

/// The shared state of one workload.
pub struct Workload {
    /// The namespace of every key.
    pub ns: String,
    /// The side-effect ledger.
    pub effects: Arc<EffectLog>,
    /// Key → result body of every Complete acknowledged to a worker (closure ran, not replayed).
    pub acked: Mutex<HashMap<String, Vec<u8>>>,
    /// (key, body) of every replayed COMPLETED answer.
    pub replays: Mutex<Vec<(String, Vec<u8>)>>,
    /// Every key handed out so far.
    pub keys: Mutex<Vec<KeySpec>>,
    /// What the workers saw.
    pub counts: Counts,
    stop: AtomicBool,
    next_key: AtomicU64,
}

/// Why a run failed on purpose (before its effect).
#[derive(Debug)]
struct Refused(Disposition);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused on purpose: {:?}", self.0)
    }
}

impl Failure for Refused {
    fn disposition(&self) -> Disposition {
        self.0
    }
}

/// Client options for workers and checks: patient retries, no circuit breaker (a restart must not
/// lock the client out for its cool-down).
pub fn options() -> ConnectOptions {
    ConnectOptions {
        tenant: Some(TENANT.into()),
        timeout: Some(Duration::from_secs(5)),
        connect_timeout: Some(Duration::from_secs(1)),
        retry: RetryPolicy {
            max_attempts: 8,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
        },
        breaker: BreakerPolicy::disabled(),
        lazy: true,
        ..Default::default()
    }
}

impl Workload {
    /// A workload in namespace `ns` writing its effects to `effect_file`.
    pub fn new(ns: &str, effect_file: &std::path::Path) -> Arc<Workload> {
        Arc::new(Workload {
            ns: ns.into(),
            effects: Arc::new(EffectLog::create(effect_file)),
            acked: Mutex::default(),
            replays: Mutex::default(),
            keys: Mutex::default(),
            counts: Counts::default(),
            stop: AtomicBool::new(false),
            next_key: AtomicU64::new(0),
        })
    }

    /// Starts `n` workers, worker `i` on `endpoints[i % len]`.
    pub fn spawn(
        self: &Arc<Self>,
        n: u32,
        endpoints: &[String],
        seed: u64,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|i| {
                let this = self.clone();
                let endpoint = endpoints[i as usize % endpoints.len()].clone();
                tokio::spawn(async move { this.worker(i, endpoint, seed ^ (i as u64 + 1)).await })
            })
            .collect()
    }

    /// Tells the workers to stop after their current run.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    fn pick(&self, rng: &mut Rng) -> KeySpec {
        let mut keys = self.keys.lock().unwrap();
        if keys.is_empty() || rng.chance(0.35) {
            let spec = KeySpec::new(self.next_key.fetch_add(1, Ordering::SeqCst));
            keys.push(spec.clone());
            spec
        } else {
            // Mostly recent keys, so workers meet on them while they are in flight.
            let window = keys.len().min(24) as u64;
            keys[keys.len() - 1 - rng.range(0, window) as usize].clone()
        }
    }

    async fn worker(self: Arc<Self>, id: u32, endpoint: String, seed: u64) {
        let client = Client::connect(&endpoint, options()).await.expect("client");
        let mut rng = Rng::new(seed);
        let c = &self.counts;
        while !self.stop.load(Ordering::SeqCst) {
            let spec = self.pick(&mut rng);
            let key = OperationKey::from_raw(self.ns.as_str(), spec.name.as_str()).unwrap();
            let mut once = client
                .once(&key, &json!({ "key": spec.name }))
                .lease_ttl(spec.lease)
                .wait_timeout(Duration::from_millis(1500))
                .owner(format!("w{id}"));
            if spec.at_most_once {
                once = once.at_most_once();
            }
            let roll = rng.range(0, 100);
            let effect_ms = rng.range(0, 300);
            let effects = self.effects.clone();
            let name = spec.name.clone();
            let pad = spec.pad.clone();
            c.runs.fetch_add(1, Ordering::Relaxed);
            let ran = Arc::new(AtomicBool::new(false));
            let ran2 = ran.clone();
            let outcome = once
                .run_detailed(|lease| async move {
                    match roll {
                        0..=4 => return Err(Refused(Disposition::Retryable)),
                        5..=6 => return Err(Refused(Disposition::Final)),
                        _ => {}
                    }
                    let left = lease.expires_at().duration_since(SystemTime::now());
                    if left.unwrap_or_default() < HOLDER_MARGIN {
                        // Too little of the lease left (a slow answer): give it back unused.
                        return Err(Refused(Disposition::Retryable));
                    }
                    let token = lease.fencing_token();
                    effects.append(&name, token, id, lease.attempt());
                    ran2.store(true, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(effect_ms)).await;
                    Ok::<_, Refused>(
                        json!({ "key": name, "token": token, "worker": id, "pad": pad }),
                    )
                })
                .await;
            if ran.load(Ordering::SeqCst) {
                c.effects.fetch_add(1, Ordering::Relaxed);
            }
            match outcome {
                Ok(done) => {
                    let body = done.record.result.clone().map(|r| r.body);
                    let body = body.expect("a SUCCEEDED record without a result");
                    if done.replayed {
                        c.replayed.fetch_add(1, Ordering::Relaxed);
                        self.replays.lock().unwrap().push((spec.name, body));
                    } else {
                        c.acked.fetch_add(1, Ordering::Relaxed);
                        assert_eq!(
                            body,
                            serde_json::to_vec(&done.value).unwrap(),
                            "Complete acknowledged with a result other than the one sent"
                        );
                        let before = self.acked.lock().unwrap().insert(spec.name.clone(), body);
                        assert!(
                            before.is_none(),
                            "two acknowledged Completes of {}",
                            spec.name
                        );
                    }
                }
                Err(OnceError::Operation(_)) => {
                    c.failed_runs.fetch_add(1, Ordering::Relaxed);
                }
                Err(OnceError::Failed(_)) => {
                    c.failed_replays.fetch_add(1, Ordering::Relaxed);
                }
                Err(OnceError::NeedsReconciliation { .. }) => {
                    c.unknown.fetch_add(1, Ordering::Relaxed);
                }
                Err(OnceError::InProgress { .. }) => {
                    c.in_progress.fetch_add(1, Ordering::Relaxed);
                }
                Err(OnceError::LeaseLost { .. }) => {
                    c.lease_lost.fetch_add(1, Ordering::Relaxed);
                }
                Err(OnceError::Unsettled { .. }) => {
                    c.unsettled.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(OnceError::Rpc(e)) => {
                    assert!(
                        e.is_transient() || e.code() == tonic::Code::Unknown,
                        "unexpected Claim error: {e}"
                    );
                    c.rpc_errors.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("unexpected outcome: {e}"),
            }
        }
    }

    /// Checks that `n` random acknowledged completions are still SUCCEEDED with their result.
    pub async fn spot_check(&self, client: &Client, n: usize, rng: &mut Rng) {
        let sample: Vec<(String, Vec<u8>)> = {
            let acked = self.acked.lock().unwrap();
            let all: Vec<_> = acked.iter().collect();
            (0..n.min(all.len()))
                .map(|_| {
                    let (k, v) = all[rng.range(0, all.len() as u64) as usize];
                    (k.clone(), v.clone())
                })
                .collect()
        };
        for (name, body) in sample {
            let key = OperationKey::from_raw(self.ns.as_str(), name.as_str()).unwrap();
            let record = lookup_patiently(client, &key)
                .await
                .unwrap_or_else(|| panic!("acknowledged completion of {name} lost"));
            assert_eq!(record.status, RecordStatus::Succeeded, "{name}");
            assert_eq!(record.result.map(|r| r.body), Some(body), "{name}");
        }
    }
}

impl Counts {
    /// A one-line summary.
    pub fn summary(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "runs={} effects={} acked={} replayed={} failed_runs={} failed_replays={} needs_reconciliation={} in_progress={} lease_lost={} unsettled={} claim_errors={}",
            g(&self.runs),
            g(&self.effects),
            g(&self.acked),
            g(&self.replayed),
            g(&self.failed_runs),
            g(&self.failed_replays),
            g(&self.unknown),
            g(&self.in_progress),
            g(&self.lease_lost),
            g(&self.unsettled),
            g(&self.rpc_errors)
        )
    }
}
