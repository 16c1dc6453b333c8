//! Property test: random sequences of Claim / Complete / Fail / Renew / clock advance from several
//! clients of two tenants, run through the engine against the real embedded store, checking after
//! every step that
//! - at most one client holds a valid lease on a record at any time;
//! - fencing tokens strictly increase within a record's life (a new life starts only after the
//!   record was abandoned or expired, and an unsettled at-most-once record never expires);
//! - a SUCCEEDED record never changes its result;
//! - no operation of one tenant observes another tenant's record;
//! - an unsettled at-most-once record is never forgotten, however far the clock moves;
//! - every answered Claim, settle and renewal leaves its receipt in the record's history (also
//!   when the key is abandoned and claimed again before parked dedup hits are written: the new
//!   record carries the old one's history), exactly once, and `dedup_hits` counts exactly the
//!   Claims answered from the record's own life, in every answer, in Lookup, and in the store
//!   once the parked hits are written (`receipts.rs`).
//!
//! Clients follow the documented operating rule that retention outlasts every retry: once a record
//! may have expired, its old holders give up their leases (a holder stalled past the record's
//! expiry could otherwise meet a new record whose tokens restart at 1; see README).

use oncekey_server::engine::{Clock, Engine, EngineError};
use oncekey_server::ledger::{ClaimArgs, ClaimOutcome, Disposition, Lease, LedgerError, Millis};
use oncekey_server::ledger::{OpError, OpResult, RecordId, Semantics, Status};
use oncekey_server::store::embedded::EmbeddedStore;
use oncekey_server::store::Store;
use proptest::prelude::*;
use std::collections::HashMap;

#[path = "invariants/receipts.rs"]
mod receipts;
use oncekey_server::ledger::EventKind;
use receipts::Trail;

const TENANTS: [&str; 2] = ["acme", "globex"];
const KEYS: [&str; 2] = ["k1", "k2"];
const CLIENTS: usize = 3;
const LEASE: Millis = 1_000;
const RETENTION: Millis = 60_000;

#[derive(Debug, Clone)]
enum Op {
    Claim {
        client: usize,
        tenant: usize,
        key: usize,
        payload: u8,
        amo: bool,
        reconcile: bool,
    },
    Complete {
        client: usize,
        tenant: usize,
        key: usize,
    },
    Fail {
        client: usize,
        tenant: usize,
        key: usize,
        disposition: u8,
    },
    Renew {
        client: usize,
        tenant: usize,
        key: usize,
    },
    Advance {
        ms: Millis,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let who = (0..CLIENTS, 0..TENANTS.len(), 0..KEYS.len());
    prop_oneof![
        3 => (who.clone(), 0u8..2, any::<bool>(), any::<bool>()).prop_map(|((client, tenant, key), payload, amo, reconcile)| Op::Claim { client, tenant, key, payload, amo, reconcile }),
        2 => who.clone().prop_map(|(client, tenant, key)| Op::Complete { client, tenant, key }),
        1 => (who.clone(), 0u8..3).prop_map(|((client, tenant, key), disposition)| Op::Fail { client, tenant, key, disposition }),
        1 => who.prop_map(|(client, tenant, key)| Op::Renew { client, tenant, key }),
        2 => prop_oneof![Just(100), Just(600), Just(1_000), Just(61_000)].prop_map(|ms| Op::Advance { ms }),
    ]
}

/// What the model knows about one record (per tenant and key).
#[derive(Default)]
struct Model {
    /// The last token handed out in this record's life.
    last_token: u64,
    /// The result stored by a successful Complete in this life.
    result: Option<OpResult>,
    /// The record may be gone (abandoned, or expiry may have passed): a new life may start.
    may_be_gone: bool,
    /// The record's expiry as last stored (`None`: never, or no record yet).
    expires_at: Option<Millis>,
    /// The record as last stored is an unsettled at-most-once operation: it must never be
    /// forgotten (its effect may have run), however much time passes.
    kept: bool,
}

struct World {
    engine: Engine<EmbeddedStore>,
    clock: Clock,
    /// (client, tenant, key) → the lease that client believes it holds.
    leases: HashMap<(usize, usize, usize), Lease>,
    models: HashMap<(usize, usize), Model>,
    /// (tenant, key) → the receipts and hits its record must show.
    trails: HashMap<(usize, usize), Trail>,
}

fn id(tenant: usize, key: usize) -> RecordId {
    RecordId::new(TENANTS[tenant], "prop.ns", KEYS[key])
}

fn owner(client: usize) -> String {
    format!("client-{client}")
}

fn result_for(tenant: usize, client: usize, token: u64) -> OpResult {
    OpResult {
        code: 200,
        body: format!("{}:{client}:{token}", TENANTS[tenant]).into_bytes(),
        ..OpResult::default()
    }
}

impl World {
    async fn step(&mut self, op: &Op) {
        match *op {
            Op::Advance { ms } => {
                self.clock.advance(ms);
                let now = self.clock.now();
                for (&(tenant, key), model) in self.models.iter_mut() {
                    if model.expires_at.is_some_and(|at| now >= at) {
                        model.may_be_gone = true;
                        self.leases.retain(|&(_, t, k), _| (t, k) != (tenant, key));
                    }
                }
            }
            Op::Claim {
                client,
                tenant,
                key,
                payload,
                amo,
                reconcile,
            } => {
                let args = ClaimArgs {
                    fingerprint: [payload; 32],
                    lease_ttl: LEASE,
                    retention: RETENTION,
                    semantics: if amo {
                        Semantics::AtMostOnce
                    } else {
                        Semantics::AtLeastOnce
                    },
                    owner: owner(client),
                    parent: None,
                    reconcile,
                    require_approval: false,
                    max_attempts: 0,
                    budget: None,
                };
                match self.engine.claim(&id(tenant, key), &args, None).await {
                    Ok(reply) => {
                        assert_eq!(reply.record.id.tenant, TENANTS[tenant], "tenant isolation");
                        self.trails.entry((tenant, key)).or_default().claimed(
                            reply.outcome,
                            &reply.record,
                            &args.owner,
                        );
                        let model = self.models.entry((tenant, key)).or_default();
                        if reply.outcome == ClaimOutcome::Acquired {
                            let lease = reply.lease.expect("ACQUIRED carries a lease");
                            if lease.token == 1 && model.last_token > 0 {
                                assert!(
                                    !model.kept,
                                    "an unsettled at-most-once record was forgotten"
                                );
                                assert!(
                                    model.may_be_gone,
                                    "token restarted at 1 while the record lived"
                                );
                                model.result = None;
                            } else {
                                assert!(
                                    lease.token > model.last_token,
                                    "fencing tokens must increase"
                                );
                            }
                            model.last_token = lease.token;
                            model.may_be_gone = false;
                            self.leases.insert((client, tenant, key), lease);
                        }
                        if reply.outcome == ClaimOutcome::Completed {
                            check_result(model, reply.record.result.as_ref(), tenant);
                        }
                    }
                    Err(EngineError::Ledger(LedgerError::KeyReused)) => {}
                    Err(e) => panic!("claim failed: {e}"),
                }
            }
            Op::Complete {
                client,
                tenant,
                key,
            } => {
                let Some(lease) = self.leases.get(&(client, tenant, key)).copied() else {
                    return;
                };
                let res = result_for(tenant, client, lease.token);
                match self
                    .engine
                    .complete(&id(tenant, key), lease.token, &res)
                    .await
                {
                    Ok(record) => {
                        assert_eq!(record.status, Status::Succeeded);
                        self.trails.entry((tenant, key)).or_default().settled(
                            EventKind::Complete,
                            "SUCCEEDED",
                            &owner(client),
                            Some(&record),
                        );
                        let model = self.models.entry((tenant, key)).or_default();
                        check_result(model, record.result.as_ref(), tenant);
                        model.result = record.result.clone();
                        self.leases.remove(&(client, tenant, key));
                    }
                    Err(EngineError::Ledger(
                        LedgerError::LeaseLost | LedgerError::AlreadySettled,
                    )) => {
                        self.leases.remove(&(client, tenant, key));
                    }
                    Err(e) => panic!("complete failed: {e}"),
                }
            }
            Op::Fail {
                client,
                tenant,
                key,
                disposition,
            } => {
                let Some(lease) = self.leases.get(&(client, tenant, key)).copied() else {
                    return;
                };
                let disposition = [
                    Disposition::Retryable,
                    Disposition::Final,
                    Disposition::Abandon,
                ][disposition as usize];
                let error = OpError {
                    code: 1,
                    message: "failed".into(),
                    details: vec![],
                };
                let outcome = self
                    .engine
                    .fail(&id(tenant, key), lease.token, &error, disposition)
                    .await;
                match outcome {
                    Ok(record) => {
                        let name = ["RETRYABLE", "FINAL", "ABANDON"][disposition as usize];
                        self.trails.entry((tenant, key)).or_default().settled(
                            EventKind::Fail,
                            name,
                            &owner(client),
                            record.as_ref(),
                        );
                        let model = self.models.entry((tenant, key)).or_default();
                        assert!(
                            model.result.is_none() || model.may_be_gone,
                            "a SUCCEEDED record was failed"
                        );
                        if record.is_none() {
                            // Abandoned: the next claim starts a new record (its tokens continue).
                            model.result = None;
                        }
                    }
                    Err(EngineError::Ledger(
                        LedgerError::LeaseLost | LedgerError::AlreadySettled,
                    )) => {}
                    Err(e) => panic!("fail failed: {e}"),
                }
                self.leases.remove(&(client, tenant, key));
            }
            Op::Renew {
                client,
                tenant,
                key,
            } => {
                let Some(lease) = self.leases.get(&(client, tenant, key)).copied() else {
                    return;
                };
                match self
                    .engine
                    .renew(&id(tenant, key), lease.token, LEASE)
                    .await
                {
                    Ok(renewed) => {
                        assert_eq!(renewed.token, lease.token);
                        self.trails
                            .entry((tenant, key))
                            .or_default()
                            .renewed(&owner(client));
                        self.leases.insert((client, tenant, key), renewed);
                    }
                    Err(EngineError::Ledger(_)) => {
                        self.leases.remove(&(client, tenant, key));
                    }
                    Err(e) => panic!("renew failed: {e}"),
                }
            }
        }
        if let Op::Claim { tenant, key, .. }
        | Op::Complete { tenant, key, .. }
        | Op::Fail { tenant, key, .. }
        | Op::Renew { tenant, key, .. } = *op
        {
            self.note_expiry(tenant, key).await;
        }
        self.check_single_holder().await;
        self.check_receipts().await;
    }

    /// Every record this process shows (parked hits merged) holds what its trail says.
    async fn check_receipts(&self) {
        for (&(tenant, key), trail) in &self.trails {
            if let Ok(record) = self.engine.lookup(&id(tenant, key)).await {
                trail.check(&record, "Lookup");
            }
        }
    }

    /// Once the parked hits are written, every stored record (tombstones included) holds what
    /// its trail says.
    async fn check_stored_receipts(&self) {
        // As at shutdown: the flushes write what they hold without lingering first.
        self.engine.begin_shutdown();
        self.engine.flush_parked_hits().await;
        let now = self.clock.now();
        for (&(tenant, key), trail) in &self.trails {
            if let Some(record) = self
                .engine
                .store()
                .get(&id(tenant, key), now)
                .await
                .unwrap()
            {
                trail.check(&record, "stored");
            }
        }
    }

    /// Notes when the record (or its ABANDON tombstone) now expires: ops run one at a time, so
    /// the stored record is the truth. An unsettled at-most-once record never expires, so its
    /// holders never give up.
    async fn note_expiry(&mut self, tenant: usize, key: usize) {
        let (id, now) = (id(tenant, key), self.clock.now());
        if let Ok(Some(record)) = self.engine.store().get(&id, now).await {
            let model = self.models.entry((tenant, key)).or_default();
            model.expires_at = record.expires_at;
            model.kept = record.semantics == Semantics::AtMostOnce
                && matches!(record.status, Status::Processing | Status::Unknown);
        }
    }

    /// At most one client believes it holds a valid lease on each record, and it is the record's.
    async fn check_single_holder(&self) {
        let now = self.clock.now();
        for tenant in 0..TENANTS.len() {
            for key in 0..KEYS.len() {
                let holders: Vec<_> = (0..CLIENTS)
                    .filter_map(|c| self.leases.get(&(c, tenant, key)))
                    .filter(|lease| lease.expires_at > now)
                    .collect();
                assert!(holders.len() <= 1, "two valid leases at once: {holders:?}");
                if let (Some(lease), Ok(record)) =
                    (holders.first(), self.engine.lookup(&id(tenant, key)).await)
                {
                    if record.status == Status::Processing {
                        assert_eq!(
                            record.fencing_token, lease.token,
                            "the valid lease is the record's"
                        );
                    }
                }
            }
        }
    }
}

fn check_result(model: &Model, seen: Option<&OpResult>, tenant: usize) {
    let seen = seen.expect("a SUCCEEDED record has a result");
    assert!(
        seen.body.starts_with(TENANTS[tenant].as_bytes()),
        "tenant isolation: saw another tenant's result"
    );
    if let Some(stored) = &model.result {
        assert_eq!(stored, seen, "a SUCCEEDED result changed");
    }
}

/// Ops on one record, most of them Claims and ABANDONs, so that keys are abandoned and claimed
/// again while replays' dedup hits are still parked.
fn abandon_heavy_op() -> impl Strategy<Value = Op> {
    let client = 0..CLIENTS;
    prop_oneof![
        4 => (client.clone(), any::<bool>()).prop_map(|(client, reconcile)| Op::Claim { client, tenant: 0, key: 0, payload: 0, amo: false, reconcile }),
        1 => client.clone().prop_map(|client| Op::Complete { client, tenant: 0, key: 0 }),
        2 => (client.clone(), prop_oneof![1 => Just(0u8), 1 => Just(1), 3 => Just(2)]).prop_map(|(client, disposition)| Op::Fail { client, tenant: 0, key: 0, disposition }),
        1 => client.prop_map(|client| Op::Renew { client, tenant: 0, key: 0 }),
        1 => prop_oneof![Just(1), Just(100), Just(1_000)].prop_map(|ms| Op::Advance { ms }),
    ]
}

/// Runs `ops` against a fresh engine and store, then checks the stored receipts.
fn run(ops: &[Op]) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let clock = Clock::manual(1_700_000_000_000);
        let store = EmbeddedStore::open(dir.path()).unwrap();
        let mut world = World {
            engine: Engine::new(store, clock.clone()),
            clock,
            leases: HashMap::new(),
            models: HashMap::new(),
            trails: HashMap::new(),
        };
        for op in ops {
            world.step(op).await;
        }
        world.check_stored_receipts().await;
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]
    #[test]
    fn ledger_invariants_hold(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops);
    }

    #[test]
    fn receipts_and_hits_survive_abandon_and_reclaim(ops in proptest::collection::vec(abandon_heavy_op(), 1..60)) {
        run(&ops);
    }
}
