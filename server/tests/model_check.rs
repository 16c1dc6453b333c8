//! Exhaustive model check (stateright) of the Oncekey protocol over the REAL state machine:
//! `oncekey_server::ledger::{claim, complete, fail, renew}` decide every step, applied to a model
//! store with the same compare-and-set contract as the `Store` trait.
//!
//! What is modelled, for one key (other keys and tenants are other records and never interact):
//! - 2–3 honest clients: claim, perform the side effect only while their own lease (as they last
//!   learned it) is valid, renew, complete, fail (RETRYABLE / FINAL / ABANDON), give up at any time
//!   (a client crash), and reconcile after NEEDS_RECONCILIATION by checking the outside world;
//! - the engine's read → decide → conditional write loop, with other steps interleaving between the
//!   read and the write, and a conflict answered with the stored record (decide again);
//! - the store's durability: durable writes are committed before the answer, counter-only writes
//!   (dedup hits) may ride with the next durable commit and are lost by a crash;
//! - lease expiry by clock advance (one shared clock: see README "Reliability" for skew);
//! - server crashes (with restart): nothing durable is lost, every in-flight request is forgotten,
//!   so a client whose request was applied may not learn it and retries or gives up.
//!
//! Checked in every reachable state (`always`): the effect of an AT_MOST_ONCE operation ran at most
//! once; effects ran under strictly increasing fencing tokens (a duplicate only after a lease
//! expiry, by a newer holder); at most one holder's Complete is ever accepted; a SUCCEEDED result
//! never changes (live and durable state); replays carry the stored result; fencing tokens of
//! successful acquisitions strictly increase. And, so the model is not vacuous (`sometimes`):
//! SUCCEEDED, NEEDS_RECONCILIATION, reconciliation, takeover, an applied request forgotten by a
//! crash, a key claimed again after ABANDON, a stale holder refused.
//!
//! Records live well within their retention here (the contract's window); what happens after
//! expiry is documented in README ("Retention") and covered by `invariants.rs`.
//!
//! State-space reduction: after every write the model clears the fields the state machine never
//! branches on (history, dedup counter, timestamps of creation/update, owner), and fixes
//! `expires_at` after checking it lies beyond the horizon. Everything the decisions read — status,
//! token, attempt, lease end, result, error, semantics, version — is kept exactly.
//!
//! `ONCEKEY_MODEL_BIG=1` checks three clients instead of two (about 10 minutes instead of 20 s;
//! last run: 5,176,501 unique states for AT_MOST_ONCE, 8,470,929 for AT_LEAST_ONCE).

use oncekey_server::ledger::Transition;
use oncekey_server::ledger::{self, ClaimArgs, ClaimOutcome, Disposition, LedgerError, Millis};
use oncekey_server::ledger::{Change, OpError, OpResult, Record, RecordId, Semantics, Status};
use stateright::{Checker, Model, Property};
use std::hash::{Hash, Hasher};

const TICK: Millis = 1_000;
const LEASE: Millis = 2 * TICK;
const RETENTION: Millis = 3_600_000;
/// What `expires_at` is set to once checked: beyond every horizon of the model.
const FAR: Millis = 1 << 40;

/// A stored record, hashed field by field (stateright identifies states by their hash).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stored(Record);

impl Hash for Stored {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let r = &self.0;
        r.id.hash(h);
        r.status.hash(h);
        r.fingerprint.hash(h);
        r.semantics.hash(h);
        r.fencing_token.hash(h);
        r.attempt.hash(h);
        r.dedup_hits.hash(h);
        r.lease_owner.hash(h);
        r.lease_expires_at.hash(h);
        r.result
            .as_ref()
            .map(|x| (x.code, &x.body, &x.content_type, &x.metadata))
            .hash(h);
        r.error
            .as_ref()
            .map(|e| (e.code, &e.message, &e.details))
            .hash(h);
        r.parent.as_ref().map(|p| (&p.namespace, &p.key)).hash(h);
        (r.created_at, r.updated_at, r.expires_at, r.retention).hash(h);
        r.version.hash(h);
        r.history.len().hash(h);
        for e in &r.history {
            (
                e.at,
                e.kind,
                &e.outcome,
                e.attempt,
                e.fencing_token,
                &e.owner,
            )
                .hash(h);
        }
    }
}

/// What a client decided to send to settle its lease; resent unchanged after a lost answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Settle {
    /// Complete with result code `200 + performer` (the client whose effect it reports).
    Complete {
        performer: u8,
    },
    Fail(Disposition),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Will Claim (with `reconcile` after a NEEDS_RECONCILIATION answer).
    Idle {
        reconcile: bool,
    },
    Holding {
        token: u64,
        /// The lease end the client last learned (never later than the stored one).
        lease_end: Millis,
        /// Acquired with `reconcile: true`: must check the outside world first.
        reconciling: bool,
        /// This client performed the side effect under this lease.
        effect: bool,
        settle: Option<Settle>,
    },
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Req {
    Claim { reconcile: bool },
    Settle { token: u64, settle: Settle },
    Renew { token: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Answer {
    Claimed {
        outcome: ClaimOutcome,
        token: u64,
        lease_end: Millis,
        result_code: Option<i32>,
    },
    Settled,
    Renewed {
        lease_end: Millis,
    },
    Refused(Refusal),
}

/// `LedgerError` (which is not `Hash`) as the model stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Refusal {
    KeyReused,
    LeaseLost,
    AlreadySettled,
}

impl From<LedgerError> for Refusal {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::KeyReused => Refusal::KeyReused,
            LedgerError::LeaseLost => Refusal::LeaseLost,
            LedgerError::AlreadySettled => Refusal::AlreadySettled,
        }
    }
}

// A snapshot or an answer, both short-lived: not worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Stage {
    /// The engine read (or a conflict returned) this record and will decide on it.
    Read(Option<Stored>),
    /// Decided (and written, if needed); the answer is on its way back.
    Answered(Answer),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Client {
    phase: Phase,
    rpc: Option<(Req, Stage)>,
}

/// Things that happened, for the `sometimes` properties.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
struct Seen {
    succeeded: bool,
    needs_reconciliation: bool,
    reconciled_completed: bool,
    takeover: bool,
    crash_forgot_applied: bool,
    reclaimed_after_abandon: bool,
    lease_lost: bool,
    renewed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    tick: u8,
    crashes: u8,
    /// Claims and renewals the clients may still send (all clients together).
    claims_left: u8,
    renews_left: u8,
    /// What the store answers now (durable writes plus counter writes not yet committed).
    live: Option<Stored>,
    /// What survives a crash.
    durable: Option<Stored>,
    clients: Vec<Client>,
    // Ghost state: the outside world and the history the properties judge.
    /// Side effects performed so far, and the token of the last one.
    effects: u8,
    last_effect_token: u64,
    /// The client whose effect happened last (what a reconciler finds outside).
    performer: Option<u8>,
    /// The result code of the first accepted Complete, and its token.
    success: Option<(i32, u64)>,
    last_acquired_token: u64,
    effect_tokens_ok: bool,
    acquisitions_ok: bool,
    one_completer: bool,
    replays_ok: bool,
    expiry_beyond_horizon: bool,
    seen: Seen,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    Tick,
    Crash,
    Send(usize, Req),
    Effect(usize),
    GiveUp(usize),
    Step(usize),
    Deliver(usize),
}

#[derive(Clone, Debug)]
struct Ledger {
    clients: usize,
    semantics: Semantics,
    max_ticks: u8,
    max_crashes: u8,
    /// Claims all clients together may send.
    claims: u8,
    /// Renewals all clients together may send.
    renews: u8,
}

fn id() -> RecordId {
    RecordId::new("acme", "payments.charge", "order-1")
}

fn result(performer: u8) -> OpResult {
    OpResult {
        code: 200 + i32::from(performer),
        ..Default::default()
    }
}

fn error(client: usize) -> OpError {
    OpError {
        code: 500 + client as i32,
        message: "declined".into(),
        details: Vec::new(),
    }
}

fn holds_result(r: &Option<Stored>, code: i32) -> bool {
    matches!(r, Some(Stored(rec)) if rec.status == Status::Succeeded
        && rec.result.as_ref().map(|x| x.code) == Some(code))
}

impl Ledger {
    fn now(&self, s: &State) -> Millis {
        Millis::from(s.tick) * TICK
    }

    fn horizon(&self) -> Millis {
        Millis::from(self.max_ticks) * TICK
    }

    fn args(&self, client: usize, reconcile: bool) -> ClaimArgs {
        ClaimArgs {
            fingerprint: [7; 32],
            lease_ttl: LEASE,
            retention: RETENTION,
            semantics: self.semantics,
            owner: format!("client-{client}"),
            parent: None,
            reconcile,
        }
    }

    /// Clears what the state machine never branches on (see the module doc).
    fn normalize(&self, s: &mut State, mut r: Record) -> Stored {
        if r.expires_at != FAR && r.expires_at <= self.horizon() {
            s.expiry_beyond_horizon = false;
        }
        r.expires_at = FAR;
        r.history.clear();
        r.dedup_hits = 0;
        r.created_at = 0;
        r.updated_at = 0;
        r.lease_owner.clear();
        Stored(r)
    }

    /// The real state machine on `current` at `now`: the transition and the client's answer.
    fn decide(
        &self,
        s: &State,
        client: usize,
        req: Req,
        current: Option<&Record>,
        now: Millis,
    ) -> Result<(Transition, Answer), LedgerError> {
        match req {
            Req::Claim { reconcile } => {
                let d = ledger::claim(&id(), current, &self.args(client, reconcile), now)?;
                let r = d.record();
                let answer = Answer::Claimed {
                    outcome: d.outcome,
                    token: r.fencing_token,
                    lease_end: r.lease().expires_at,
                    result_code: r.result.as_ref().map(|x| x.code),
                };
                Ok((d.transition, answer))
            }
            Req::Settle { token, settle } => {
                let t = match settle {
                    Settle::Complete { performer } => {
                        ledger::complete(current, token, &result(performer), now)?
                    }
                    Settle::Fail(d) => ledger::fail(current, token, &error(client), d, now)?,
                };
                Ok((t, Answer::Settled))
            }
            Req::Renew { token } => {
                let (lease, t) = ledger::renew(current, token, LEASE, now)?;
                let _ = s;
                Ok((
                    t,
                    Answer::Renewed {
                        lease_end: lease.expires_at,
                    },
                ))
            }
        }
    }

    /// One engine round for `client`: decide on the record read, then write conditionally.
    fn step_read(&self, s: &mut State, client: usize, req: Req, read: Option<Stored>) {
        let now = self.now(s);
        let current = read.as_ref().map(|r| &r.0);
        let (transition, answer) = match self.decide(s, client, req, current, now) {
            Ok(x) => x,
            Err(e) => {
                s.clients[client].rpc = Some((req, Stage::Answered(Answer::Refused(e.into()))));
                return;
            }
        };
        let live_version = s.live.as_ref().map(|r| r.0.version);
        let durable = match transition.change {
            Change::Keep => {
                s.clients[client].rpc = Some((req, Stage::Answered(answer)));
                return;
            }
            Change::Insert if live_version.is_none() => true,
            Change::Replace {
                expected_version,
                durable,
            } if live_version == Some(expected_version) => durable,
            // The condition failed: the store returns what it holds; decide again.
            Change::Insert | Change::Replace { .. } => {
                s.clients[client].rpc = Some((req, Stage::Read(s.live.clone())));
                return;
            }
        };
        let before = s.live.as_ref().map(|r| r.0.clone());
        let next = transition.record.expect("a write carries its record");
        self.observe_write(s, client, req, before.as_ref(), &next, &answer);
        let stored = self.normalize(s, next);
        s.live = Some(stored);
        if durable {
            s.durable = s.live.clone();
        }
        s.clients[client].rpc = Some((req, Stage::Answered(answer)));
    }

    /// Ghost bookkeeping when a write applies.
    fn observe_write(
        &self,
        s: &mut State,
        client: usize,
        req: Req,
        before: Option<&Record>,
        next: &Record,
        answer: &Answer,
    ) {
        let _ = client;
        if let Answer::Claimed {
            outcome: ClaimOutcome::Acquired,
            token,
            ..
        } = answer
        {
            if *token <= s.last_acquired_token {
                s.acquisitions_ok = false;
            }
            s.last_acquired_token = *token;
            match before.map(|r| r.status) {
                Some(Status::Processing) if !matches!(req, Req::Claim { reconcile: true }) => {
                    s.seen.takeover = true
                }
                Some(Status::Abandoned) => s.seen.reclaimed_after_abandon = true,
                _ => {}
            }
        }
        if next.status == Status::Succeeded && before.map(|r| r.status) != Some(Status::Succeeded) {
            let code = next.result.as_ref().map_or(-1, |x| x.code);
            match s.success {
                None => s.success = Some((code, next.fencing_token)),
                Some((_, token)) if token != next.fencing_token => s.one_completer = false,
                Some(_) => {}
            }
            s.seen.succeeded = true;
            if matches!(
                s.clients[client].phase,
                Phase::Holding {
                    reconciling: true,
                    effect: false,
                    ..
                }
            ) {
                s.seen.reconciled_completed = true;
            }
        }
    }

    /// The client reads its answer and moves on.
    fn deliver(&self, s: &mut State, client: usize, req: Req, answer: Answer) {
        let c = &mut s.clients[client];
        c.rpc = None;
        match (req, answer) {
            (
                Req::Claim { reconcile },
                Answer::Claimed {
                    outcome,
                    token,
                    lease_end,
                    result_code,
                },
            ) => match outcome {
                ClaimOutcome::Acquired => {
                    c.phase = Phase::Holding {
                        token,
                        lease_end,
                        reconciling: reconcile,
                        effect: false,
                        settle: None,
                    }
                }
                ClaimOutcome::Completed => {
                    if result_code != s.success.map(|(code, _)| code) {
                        s.replays_ok = false;
                    }
                    c.phase = Phase::Done;
                }
                ClaimOutcome::Failed => c.phase = Phase::Done,
                ClaimOutcome::InProgress => c.phase = Phase::Idle { reconcile: false },
                ClaimOutcome::NeedsReconciliation => {
                    s.seen.needs_reconciliation = true;
                    c.phase = Phase::Idle { reconcile: true };
                }
            },
            (Req::Settle { settle, .. }, Answer::Settled) => {
                c.phase = match settle {
                    Settle::Fail(Disposition::Retryable) => Phase::Idle { reconcile: false },
                    _ => Phase::Done,
                }
            }
            (Req::Renew { .. }, Answer::Renewed { lease_end: end }) => {
                s.seen.renewed = true;
                if let Phase::Holding { lease_end, .. } = &mut c.phase {
                    *lease_end = end;
                }
            }
            (_, Answer::Refused(e)) => {
                if e == Refusal::LeaseLost {
                    s.seen.lease_lost = true;
                }
                // Lost or settled by someone else: an honest client stops acting on this lease.
                c.phase = Phase::Done;
            }
            (req, answer) => panic!("answer {answer:?} to {req:?}"),
        }
    }
}

impl Model for Ledger {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State {
            tick: 0,
            crashes: 0,
            claims_left: self.claims,
            renews_left: self.renews,
            live: None,
            durable: None,
            clients: vec![
                Client {
                    phase: Phase::Idle { reconcile: false },
                    rpc: None,
                };
                self.clients
            ],
            effects: 0,
            last_effect_token: 0,
            performer: None,
            success: None,
            last_acquired_token: 0,
            effect_tokens_ok: true,
            acquisitions_ok: true,
            one_completer: true,
            replays_ok: true,
            expiry_beyond_horizon: true,
            seen: Seen::default(),
        }]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        if s.tick < self.max_ticks {
            actions.push(Action::Tick);
        }
        if s.crashes < self.max_crashes && s.clients.iter().any(|c| c.rpc.is_some()) {
            actions.push(Action::Crash);
        }
        let now = self.now(s);
        for (i, c) in s.clients.iter().enumerate() {
            if let Some((_, stage)) = &c.rpc {
                actions.push(match stage {
                    Stage::Answered(_) => Action::Deliver(i),
                    _ => Action::Step(i),
                });
                continue;
            }
            match c.phase {
                Phase::Idle { reconcile } if s.claims_left > 0 => {
                    actions.push(Action::Send(i, Req::Claim { reconcile }))
                }
                Phase::Idle { .. } | Phase::Done => {}
                Phase::Holding {
                    token,
                    lease_end,
                    reconciling,
                    effect,
                    settle,
                } => {
                    actions.push(Action::GiveUp(i));
                    if let Some(settle) = settle {
                        // A settle whose answer was lost is resent unchanged.
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                        continue;
                    }
                    if reconciling && !effect && s.effects > 0 {
                        // The outside world shows the effect happened: record it.
                        let performer = s.performer.expect("an effect has a performer");
                        let settle = Settle::Complete { performer };
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                        continue;
                    }
                    if effect {
                        let settle = Settle::Complete { performer: i as u8 };
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                        continue;
                    }
                    if now < lease_end {
                        actions.push(Action::Effect(i));
                    }
                    if s.renews_left > 0 {
                        actions.push(Action::Send(i, Req::Renew { token }));
                    }
                    for d in [
                        Disposition::Retryable,
                        Disposition::Final,
                        Disposition::Abandon,
                    ] {
                        let settle = Settle::Fail(d);
                        actions.push(Action::Send(i, Req::Settle { token, settle }));
                    }
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        match action {
            Action::Tick => s.tick += 1,
            Action::Crash => {
                s.crashes += 1;
                s.live = s.durable.clone();
                for c in &mut s.clients {
                    if let Some((_, Stage::Answered(answer))) = c.rpc.take() {
                        if !matches!(answer, Answer::Refused(_)) {
                            s.seen.crash_forgot_applied = true;
                        }
                    }
                }
            }
            Action::Send(i, req) => {
                let c = &mut s.clients[i];
                match (&mut c.phase, req) {
                    (_, Req::Claim { .. }) => s.claims_left -= 1,
                    (Phase::Holding { settle, .. }, Req::Settle { settle: chosen, .. }) => {
                        *settle = Some(chosen)
                    }
                    (Phase::Holding { .. }, Req::Renew { .. }) => s.renews_left -= 1,
                    _ => unreachable!(),
                }
                // Received and read at once (a request waiting to be read is no different from
                // one not sent yet, except that a crash drops it: covered by dropping later stages).
                c.rpc = Some((req, Stage::Read(s.live.clone())));
            }
            Action::Effect(i) => {
                let Phase::Holding { token, effect, .. } = &mut s.clients[i].phase else {
                    unreachable!()
                };
                *effect = true;
                if *token <= s.last_effect_token {
                    s.effect_tokens_ok = false;
                }
                s.last_effect_token = *token;
                s.effects += 1;
                s.performer = Some(i as u8);
            }
            Action::GiveUp(i) => s.clients[i].phase = Phase::Done,
            Action::Step(i) => {
                let (req, stage) = s.clients[i].rpc.clone().expect("an rpc");
                match stage {
                    Stage::Read(read) => self.step_read(&mut s, i, req, read),
                    Stage::Answered(_) => unreachable!(),
                }
            }
            Action::Deliver(i) => {
                let Some((req, Stage::Answered(answer))) = s.clients[i].rpc.clone() else {
                    unreachable!()
                };
                self.deliver(&mut s, i, req, answer);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut p = vec![
            Property::always(
                "effects ran under strictly increasing tokens",
                |_, s: &State| s.effect_tokens_ok,
            ),
            Property::always(
                "at most one holder's Complete is accepted",
                |_, s: &State| s.one_completer,
            ),
            Property::always("a SUCCEEDED result never changes", |_, s: &State| {
                s.success.is_none_or(|(code, _)| {
                    holds_result(&s.live, code) && holds_result(&s.durable, code)
                })
            }),
            Property::always("replays carry the stored result", |_, s: &State| {
                s.replays_ok
            }),
            Property::always("acquisition tokens strictly increase", |_, s: &State| {
                s.acquisitions_ok
            }),
            Property::always(
                "no record expires within the modelled window",
                |_, s: &State| s.expiry_beyond_horizon,
            ),
            Property::sometimes("SUCCEEDED", |_, s: &State| s.seen.succeeded),
            Property::sometimes("an applied request forgotten by a crash", |_, s: &State| {
                s.seen.crash_forgot_applied
            }),
            Property::sometimes("a key claimed again after ABANDON", |_, s: &State| {
                s.seen.reclaimed_after_abandon
            }),
            Property::sometimes("a stale holder refused with LEASE_LOST", |_, s: &State| {
                s.seen.lease_lost
            }),
            Property::sometimes("a lease renewed", |_, s: &State| s.seen.renewed),
        ];
        if self.semantics == Semantics::AtMostOnce {
            p.push(Property::always(
                "AT_MOST_ONCE: the effect ran at most once",
                |_, s: &State| s.effects <= 1,
            ));
            p.push(Property::sometimes(
                "NEEDS_RECONCILIATION",
                |_, s: &State| s.seen.needs_reconciliation,
            ));
            p.push(Property::sometimes(
                "a reconciler completed what a vanished holder did",
                |_, s: &State| s.seen.reconciled_completed,
            ));
        } else {
            p.push(Property::sometimes(
                "a takeover of an expired lease",
                |_, s: &State| s.seen.takeover,
            ));
            p.push(Property::sometimes(
                "the effect ran twice (at least once)",
                |_, s: &State| s.effects >= 2,
            ));
        }
        p
    }
}

fn check(model: Ledger) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = std::time::Instant::now();
    let checker = model.clone().checker().threads(threads).spawn_bfs().join();
    println!(
        "{model:?}: {} states explored ({} unique), max depth {}, in {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
}

fn big() -> bool {
    std::env::var_os("ONCEKEY_MODEL_BIG").is_some()
}

#[test]
fn at_most_once_protocol() {
    check(Ledger {
        clients: if big() { 3 } else { 2 },
        semantics: Semantics::AtMostOnce,
        max_ticks: 3,
        max_crashes: 1,
        claims: 3,
        renews: 1,
    });
}

#[test]
fn at_least_once_protocol() {
    check(Ledger {
        clients: if big() { 3 } else { 2 },
        semantics: Semantics::AtLeastOnce,
        max_ticks: 3,
        max_crashes: 1,
        claims: 3,
        renews: 1,
    });
}
