//! Exhaustive model check (stateright) of the Oncekey protocol over the REAL state machine:
//! `oncekey_ledger::{claim, complete, fail, renew}` decide every step, applied to a model
//! store with the same compare-and-set contract as the `Store` trait.
//!
//! What is modelled, for one key (other keys and tenants are other records and never interact):
//! - 2–3 honest clients: claim, perform the side effect only while their own lease (as they last
//!   learned it) is valid, renew, complete, fail (RETRYABLE / FINAL / ABANDON), give up at any time
//!   (a client crash), and reconcile after NEEDS_RECONCILIATION by checking the outside world;
//!   following the documented operating rule that retention outlasts every retry, a client stops
//!   acting on a lease `retention` after the lease end it last learned;
//! - the engine's read → decide → conditional write loop, with other steps interleaving between the
//!   read and the write, and a conflict answered with the stored record (decide again);
//! - the store's durability: durable writes are committed before the answer, counter-only writes
//!   (dedup hits) may ride with the next durable commit and are lost by a crash;
//! - lease expiry by clock advance (one shared clock: see README "Reliability" for skew);
//! - record expiry: with a short retention the clock runs past it, an expired record counts as
//!   absent (reads, conditional writes) and the key starts a new life (tokens from 1 again);
//! - server crashes (with restart): nothing durable is lost, every in-flight request is forgotten,
//!   so a client whose request was applied may not learn it and retries or gives up;
//! - a request takes effect within `retention` of arriving, or never: the engine decides on what
//!   it read when the request arrived, and its conditional write is bounded by the store's request
//!   timeout (seconds; retention is at least a minute). Without that bound a decision could be
//!   held past the record's expiry and meet a new life of the key at the same version, which the
//!   version condition alone cannot tell apart.
//!
//! Checked in every reachable state (`always`): the effect of an AT_MOST_ONCE operation ran at most
//! once (a new operation starts only once a settled record expired); a fencing token is never
//! handed out while another client holds it within retention of its lease end; within a record's
//! life, effects ran under strictly increasing tokens (a duplicate only after a lease expiry, by a
//! newer holder), at most one holder's Complete is accepted, a SUCCEEDED result never changes,
//! replays carry the stored result and acquisition tokens strictly increase; no unsettled record
//! expired within retention after its lease end, and no unsettled AT_MOST_ONCE one at all. And, so
//! the model is not vacuous (`sometimes`): SUCCEEDED, NEEDS_RECONCILIATION, reconciliation,
//! takeover, an applied request forgotten by a crash, a key claimed again after ABANDON, a stale
//! holder refused; with expiry, a key claimed again after its record expired and (AT_MOST_ONCE) a
//! NEEDS_RECONCILIATION answered after the retention the record started with.
//!
//! The expiry rule itself comes from the ledger. `Rule::Old` replaces it, in the model store, with
//! the rule before expiry by state (claim time + retention, at least the lease end, for every
//! record): the `old_expiry_rule_*` tests show that the check finds what that rule broke.
//!
//! The operator features are modelled in models of their own. The attempt cap (`max_attempts`):
//! in one life of the record, acquisitions that are not reconciliations never exceed the cap,
//! and the cap is seen failing an operation (429) and, at least once, sending a lapsed lease to
//! reconciliation. Purge (an operator, at most `purges` times, with `force`): the fencing
//! sequence continues past it — every property above still holds, tokens handed out after a
//! purge are higher than any before (until its tombstone expired), and the purged holder is seen
//! refused with LEASE_LOST. The operator follows the documented rule for at-most-once records:
//! it force-purges an unsettled one only once its lease lapsed (the holder is gone); an
//! at-least-once record it may purge at any time, and what the purged holder still does is
//! rejected downstream by fencing (the next holder's token is higher), so such an effect is not
//! counted. `Rule::PurgeForgetsLease` keeps a Purge tombstone only `retention` after the purge,
//! not after the purged lease's end: `a_purge_tombstone_*` shows the check finds what that breaks.
//! (This model found that a record claimed over a Purge tombstone could settle and expire
//! before the purged lease's end, so that the key's next life handed the purged holder's token
//! out again: such a record is now kept as long as the tombstone would have been, `kept_until`.)
//! The approval gate (client 0 asks for approval, client 1 does not; an operator approves or
//! rejects a record awaiting approval at any time): an operation that needs approval — one a
//! Claim asking for it started, or one started over the ABANDON tombstone of such an operation —
//! is never acquired before the operator approved it; every property above still holds (with
//! and past the retention, which an undecided record expires after); and a Claim is seen
//! answered AWAITING_APPROVAL, an approved operation acquired, a rejection replayed as FAILED
//! 403, and a Claim after an approved operation was abandoned awaiting approval again.
//! `Rule::AbandonForgetsGate` (an ABANDON tombstone that forgets `require_approval`) shows that
//! the check finds an acquisition before approval.
//!
//! State-space reduction: after every write the model clears the fields the state machine never
//! branches on (history, dedup counter, timestamps of creation — kept while the record awaits
//! approval or is approved, whose expiry reads it — and update, owner), and stores every
//! time beyond the horizon (an expiry, a client's deadline) as one value, `FAR`. Everything the
//! decisions read — status, token, attempt, lease end, expiry, result, error, semantics, version —
//! is kept exactly.
//!
//! Last run with two clients: 398,528 unique states for AT_MOST_ONCE and 526,018 for
//! AT_LEAST_ONCE (20–30 s each); past the retention 2,530,706 and 3,221,350 (1–2 min each, on a
//! loaded 2-core machine). `ONCEKEY_MODEL_BIG=1` checks three clients instead of two (about 10
//! minutes for the first two: 5,176,501 and 8,470,929 unique states; not yet run past the
//! retention, expect hours). The operator models (last run, same machine): the attempt cap
//! 180,560 / 176,714 unique states (AT_LEAST_ONCE / AT_MOST_ONCE, 10–15 s each), purge past the
//! retention 1,099,654 / 419,937 (25–50 s), the approval gate 80,303 / 60,574 (4 s) and past the
//! retention 582,740 / 449,174 (30–40 s); all sixteen tests together took 6 minutes.

use oncekey_ledger::Transition;
use oncekey_ledger::{self as ledger, ClaimArgs, ClaimOutcome, Disposition, LedgerError, Millis};
use oncekey_ledger::{Change, Decision, OpError, OpResult, Record, RecordId, Semantics, Status};
use stateright::{Checker, Model, Property};
use std::hash::{Hash, Hasher};

mod cases;
mod model;
mod steps;

const TICK: Millis = 1_000;
const LEASE: Millis = 2 * TICK;
/// A retention beyond every horizon of the model: records never expire.
const LONG: Millis = 3_600_000;
/// What a time beyond the horizon is stored as: no decision can tell such times apart.
const FAR: Millis = 1 << 40;
/// A retention the clock runs past (shorter than a lease, as `--default-lease 1h` with a retention
/// of a minute would be).
const SHORT: Millis = TICK;

/// How the model store sets `expires_at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    /// As the ledger decided (expiry by state).
    Ledger,
    /// The rule before expiry by state, to show that the check finds what it broke.
    Old,
    /// A Purge tombstone kept `retention` after the purge only, whatever the purged lease.
    PurgeForgetsLease,
    /// An ABANDON tombstone that forgets `require_approval`.
    AbandonForgetsGate,
}

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
        (r.require_approval, r.max_attempts, r.reconciliations).hash(h);
        r.approval
            .as_ref()
            .map(|a| (a.decision, &a.decided_by, &a.note, a.decided_at))
            .hash(h);
        r.history.len().hash(h);
        for e in &r.history {
            (
                e.at,
                e.kind,
                &e.outcome,
                e.attempt,
                e.fencing_token,
                &e.owner,
                &e.reason,
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
        /// When the client stops acting on this lease (the documented operating rule that
        /// retention outlasts every retry): `retention` after `lease_end`, or after it first sent
        /// its settle, whichever comes first.
        deadline: Millis,
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
            // Operator transitions only; the modelled clients never send them.
            LedgerError::NotFound
            | LedgerError::NotAwaitingApproval
            | LedgerError::UnsettledAtMostOnce => unreachable!("not modelled: {e:?}"),
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
    /// When the request in flight arrived (0 when none): a request that did not take effect
    /// within `retention` of arriving never will (see `Action::Tick`).
    sent: Millis,
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
    reclaimed_after_expiry: bool,
    reconciliation_after_retention: bool,
    /// The attempt cap failed an operation (429).
    exhausted_failed: bool,
    /// The attempt cap sent a lapsed at-least-once lease to reconciliation.
    exhausted_unknown: bool,
    /// The operator purged the record.
    purged: bool,
    /// A holder of a purged record was refused with LEASE_LOST.
    lease_lost_after_purge: bool,
    /// A token was handed out after a purge (higher than the purged one).
    acquired_after_purge: bool,
    /// A Claim was answered AWAITING_APPROVAL.
    awaited: bool,
    /// An approved operation was acquired.
    acquired_after_approval: bool,
    /// A rejected operation was replayed FAILED with the rejection's error (403).
    rejection_replayed: bool,
    /// A Claim after an approved operation was abandoned awaited approval again.
    gated_after_abandon: bool,
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
    /// No token was handed out while another client held it within retention of its lease end.
    fencing_ok: bool,
    /// No unsettled record expired within retention after its lease end.
    unsettled_kept: bool,
    /// No unsettled AT_MOST_ONCE record expired.
    at_most_once_kept: bool,
    /// When the record's current life started (its first Claim).
    life_started: Millis,
    /// Acquisitions in the record's current life that were not reconciliations.
    ordinary: u32,
    /// The attempt cap held in every life.
    cap_ok: bool,
    purges_left: u8,
    /// The fencing token of the last purged record: what its holders still do is rejected
    /// downstream (a later holder's token is higher).
    fenced_upto: u64,
    /// The current operation needs an approval.
    gated: bool,
    /// The operator approved the current operation (one created by a Claim on an absent key or
    /// over a tombstone) since it started.
    approved: bool,
    /// No operation needing approval was acquired before its approval.
    gate_ok: bool,
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
    /// The operator purges the record (with `force`).
    Purge,
    /// The operator approves or rejects the record awaiting approval.
    Decide(Decision),
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
    /// Every Claim's retention.
    retention: Millis,
    rule: Rule,
    /// Every Claim's attempt cap (0: none).
    max_attempts: u32,
    /// Purges the operator may make.
    purges: u8,
    /// Every Claim asks for approval (and the operator decides).
    require_approval: bool,
}

/// The fencing property's name (also asserted broken by the old expiry rule).
const FENCING: &str = "a token is never handed out while another holds it within retention";
/// The approval gate's property (asserted broken by `Rule::AbandonForgetsGate`).
const GATE: &str = "an operation needing approval is never acquired before its approval";

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
