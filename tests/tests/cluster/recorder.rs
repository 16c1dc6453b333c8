//! The recorded workload: clients that claim, hold, renew, complete, fail, walk away and look up
//! a few hot keys through the raw generated client (one RPC per operation, no retries, so every
//! answer belongs to exactly one request), recording each operation into a [`History`] with its
//! invocation and response times and the serving Oncekey server's clock skew at the time.
//!
//! Keys rotate: a key is retired after `ops_per_key` operations so each key's history stays small
//! enough for the checker; half the keys are AT_MOST_ONCE; leases are 1 or 2 s and holders
//! sometimes hold past them, so takeovers and reconciliations happen. After an operation without
//! an answer a client backs off until a Lookup answers again, so an outage leaves few unknowns.

use super::history::{Answer, Call, Op};
use super::wire;
use oncekey_client::{Client, ConnectOptions, LedgerRpc};
use oncekey_server::ledger::{ClaimArgs, ClaimOutcome, Disposition, Millis};
use oncekey_server::ledger::{OpError, OpResult, Semantics};
use oncekey_tests::faults::Rng;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The tenant of every recorded operation.
pub const TENANT: &str = "history";
/// How long a client waits for one answer before counting it unknown.
const CALL_TIMEOUT: Duration = Duration::from_secs(8);
const RETENTION: Millis = 24 * 3_600_000;

/// How the recorded clients behave.
#[derive(Debug, Clone)]
pub struct Config {
    /// Clients (client `i` goes through server `i % servers`).
    pub clients: u32,
    /// Keys in use at once.
    pub active_keys: usize,
    /// Operations after which a key is retired.
    pub ops_per_key: usize,
    /// Percent of acquisitions settled with Fail RETRYABLE (the next Claims race to acquire).
    pub retry_percent: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            clients: 4,
            active_keys: 3,
            ops_per_key: 60,
            retry_percent: 12,
        }
    }
}

#[derive(Debug, Clone)]
struct KeySpec {
    name: String,
    semantics: Semantics,
    lease_ttl: Millis,
    issued: usize,
}

/// What the clients recorded, and the servers' current clock skews.
pub struct History {
    ns: String,
    config: Config,
    ops: Mutex<Vec<Op>>,
    skews: Vec<AtomicI64>,
    keys: Mutex<(Vec<KeySpec>, u64)>,
    stop: AtomicBool,
    /// INTERNAL answers (a bug on the server's side).
    pub internal: AtomicU64,
}

/// Unix milliseconds on this machine's clock (the servers' clock before their skew).
pub fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

impl History {
    /// A history for namespace `ns` over `servers` servers (skew 0 each).
    pub fn new(ns: &str, servers: usize, config: Config) -> Arc<History> {
        Arc::new(History {
            ns: ns.into(),
            config,
            ops: Mutex::default(),
            skews: (0..servers).map(|_| AtomicI64::new(0)).collect(),
            keys: Mutex::default(),
            stop: AtomicBool::new(false),
            internal: AtomicU64::new(0),
        })
    }

    /// Notes that server `i`'s clock now runs `skew` ms off (set it before that server answers).
    pub fn set_skew(&self, server: usize, skew: Millis) {
        self.skews[server].store(skew, Ordering::SeqCst);
    }

    /// Starts the clients; client `i` talks to `endpoints[i % len]`.
    pub fn spawn(
        self: &Arc<Self>,
        endpoints: &[String],
        seed: u64,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        (0..self.config.clients)
            .map(|i| {
                let this = self.clone();
                let server = i as usize % endpoints.len();
                let endpoint = endpoints[server].clone();
                tokio::spawn(async move {
                    this.client(i, server, endpoint, seed ^ (0x5eed + i as u64))
                        .await
                })
            })
            .collect()
    }

    /// Tells the clients to stop after their current step.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Everything recorded so far.
    pub fn ops(&self) -> Vec<Op> {
        self.ops.lock().unwrap().clone()
    }

    /// Every key used so far.
    pub fn keys(&self) -> Vec<String> {
        let keys = self.keys.lock().unwrap();
        (0..keys.1).map(|n| format!("lk{n}")).collect()
    }

    /// Records one answered Lookup of every key used so far, through `endpoint` (server
    /// `server`): the final state of each key, in the history.
    pub async fn final_lookups(&self, endpoint: &str, server: usize) {
        let mut rpc = connect(endpoint).await;
        let id = self.config.clients;
        let mut c = Caller {
            history: self,
            rpc: &mut rpc,
            id,
            server,
        };
        for key in self.keys() {
            for _ in 0..120 {
                if c.record(&key, Call::Lookup).await.is_known() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }

    fn pick(&self, rng: &mut Rng) -> KeySpec {
        let mut keys = self.keys.lock().unwrap();
        let (active, next) = &mut *keys;
        active.retain(|k| k.issued < self.config.ops_per_key);
        while active.len() < self.config.active_keys {
            let n = *next;
            *next += 1;
            active.push(KeySpec {
                name: format!("lk{n}"),
                semantics: if n % 2 == 0 {
                    Semantics::AtMostOnce
                } else {
                    Semantics::AtLeastOnce
                },
                lease_ttl: if (n / 2) % 2 == 0 { 1_000 } else { 2_000 },
                issued: 0,
            });
        }
        let i = rng.range(0, active.len() as u64) as usize;
        active[i].clone()
    }

    fn issued(&self, key: &str) {
        let mut keys = self.keys.lock().unwrap();
        if let Some(k) = keys.0.iter_mut().find(|k| k.name == key) {
            k.issued += 1;
        }
    }

    async fn client(self: Arc<Self>, id: u32, server: usize, endpoint: String, seed: u64) {
        let mut rpc = connect(&endpoint).await;
        let mut rng = Rng::new(seed);
        let mut c = Caller {
            history: &self,
            rpc: &mut rpc,
            id,
            server,
        };
        let mut reconcile = false;
        while !self.stop.load(Ordering::SeqCst) {
            let spec = self.pick(&mut rng);
            let key = spec.name.as_str();
            if rng.chance(0.1) {
                c.record(key, Call::Lookup).await;
                continue;
            }
            let args = ClaimArgs {
                fingerprint: Sha256::digest(key.as_bytes()).into(),
                lease_ttl: spec.lease_ttl,
                retention: RETENTION,
                semantics: spec.semantics,
                owner: format!("r{id}"),
                parent: None,
                reconcile: reconcile && rng.chance(0.7),
                require_approval: false,
                max_attempts: 0,
                budget: None,
            };
            reconcile = false;
            match c.record(key, Call::Claim(args)).await {
                Answer::Claimed {
                    lease: Some((token, _)),
                    ..
                } => {
                    self.hold(&mut c, &mut rng, &spec, token).await;
                }
                Answer::Claimed {
                    outcome: ClaimOutcome::InProgress,
                    ..
                } => {
                    tokio::time::sleep(Duration::from_millis(rng.range(50, 250))).await;
                }
                Answer::Claimed {
                    outcome: ClaimOutcome::NeedsReconciliation,
                    ..
                } => reconcile = true,
                Answer::Unknown(_) => c.back_off(key, &mut rng).await,
                _ => tokio::time::sleep(Duration::from_millis(rng.range(20, 100))).await,
            }
        }
    }

    /// Holds an acquired lease for a while (sometimes past its end), maybe renews it, then
    /// settles it — or walks away.
    async fn hold(&self, c: &mut Caller<'_>, rng: &mut Rng, spec: &KeySpec, token: u64) {
        let key = spec.name.as_str();
        let hold = rng.range(0, spec.lease_ttl as u64 * 13 / 10);
        if rng.chance(0.15) {
            tokio::time::sleep(Duration::from_millis(hold / 2)).await;
            let renew = Call::Renew {
                token,
                lease_ttl: spec.lease_ttl,
            };
            if !c.record(key, renew).await.is_known() {
                return c.back_off(key, rng).await;
            }
            tokio::time::sleep(Duration::from_millis(hold / 2)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(hold)).await;
        }
        let roll = rng.range(0, 100);
        let retry = self.config.retry_percent;
        let call = if roll < retry {
            fail(token, Disposition::Retryable)
        } else if roll < retry + 6 {
            fail(token, Disposition::Final)
        } else if roll < retry + 14 {
            return; // walks away: the lease runs out
        } else {
            let body = format!("{key}:{token}:{}", c.id).into_bytes();
            Call::Complete {
                token,
                result: OpResult {
                    code: 200,
                    body,
                    content_type: "text/plain".into(),
                    ..Default::default()
                },
            }
        };
        if !c.record(key, call.clone()).await.is_known() {
            // The identical request again is safe, whatever became of the first.
            c.back_off(key, rng).await;
            c.record(key, call).await;
        }
    }
}

/// The raw generated client (no retries, no timeout) for the recorded tenant.
async fn connect(endpoint: &str) -> LedgerRpc {
    let options = ConnectOptions {
        tenant: Some(TENANT.into()),
        connect_timeout: Some(Duration::from_secs(1)),
        lazy: true,
        ..Default::default()
    };
    Client::connect(endpoint, options)
        .await
        .expect("client")
        .ledger()
}

fn fail(token: u64, disposition: Disposition) -> Call {
    Call::Fail {
        token,
        error: OpError {
            code: 503,
            message: format!("{disposition:?}"),
            details: Vec::new(),
        },
        disposition,
    }
}

/// One client's connection, recording what it does.
struct Caller<'a> {
    history: &'a History,
    rpc: &'a mut LedgerRpc,
    id: u32,
    server: usize,
}

impl Caller<'_> {
    /// After an operation without an answer: waits, then until a Lookup answers (the Lookups
    /// that fail are not recorded: a read without an answer changed nothing).
    async fn back_off(&mut self, key: &str, rng: &mut Rng) {
        loop {
            tokio::time::sleep(Duration::from_millis(rng.range(500, 1_500))).await;
            if self.history.stop.load(Ordering::SeqCst)
                || self.record(key, Call::Lookup).await.is_known()
            {
                return;
            }
        }
    }

    /// Sends one request and records it (a Lookup only when it was answered).
    async fn record(&mut self, key: &str, call: Call) -> Answer {
        let h = self.history;
        let skew_before = h.skews[self.server].load(Ordering::SeqCst);
        let invoke = now_ms();
        let answer = match tokio::time::timeout(CALL_TIMEOUT, self.send(key, &call)).await {
            Ok(answer) => answer,
            Err(_) => Answer::Unknown(format!("no answer within {CALL_TIMEOUT:?}")),
        };
        let ret = now_ms();
        let skew_after = h.skews[self.server].load(Ordering::SeqCst);
        if matches!(call, Call::Lookup) && !answer.is_known() {
            return answer;
        }
        h.issued(key);
        h.ops.lock().unwrap().push(Op {
            key: key.into(),
            client: self.id,
            server: self.server,
            invoke,
            ret,
            skew: (skew_before.min(skew_after), skew_before.max(skew_after)),
            call,
            answer: answer.clone(),
        });
        answer
    }

    async fn send(&mut self, key: &str, call: &Call) -> Answer {
        match wire::send(self.rpc, &self.history.ns, key, call).await {
            Ok(answer) => answer,
            Err(status) => {
                if status.code() == tonic::Code::Internal {
                    self.history.internal.fetch_add(1, Ordering::Relaxed);
                }
                wire::refusal(call, &status)
            }
        }
    }
}
