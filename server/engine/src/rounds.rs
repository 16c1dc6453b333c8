//! The one loop every change to a record goes through, a request's and a background dedup-hit
//! write's alike: decide on what is known of the record, carry the decision out with one
//! conditional write, and on a conflict decide again on the record the store returned.
//!
//! What a round decides on is a `Basis`: the record as stored, a record assumed without reading
//! (absent, or as this process last wrote it), or one read without its history. The basis says
//! which decisions it can back; a decision it cannot back is made again on the record read
//! whole. The loop decides nothing itself (the ledger does, through the caller's `decide`) and
//! knows no backend beyond the `Store` trait.

use super::first::FirstLooks;
use super::held::HeldClaims;
use super::hits::Hits;
use super::recent::Recent;
use super::waiters::Waiters;
use super::{Clock, EngineError};
use oncekey_ledger::{Change, LedgerError, Millis, Record, RecordId, Status, Transition};
use oncekey_store::{Capabilities, Cas, Store, StoreError};
use oncekey_telemetry::metrics::Metrics;
use std::sync::Arc;
use std::time::Instant;

/// Conditional-write rounds before giving up on a record that keeps changing under us.
const MAX_ROUNDS: usize = 256;

/// What the requests of one engine and its background hit writes share.
pub(super) struct Core<S> {
    pub(super) store: S,
    /// What the store said it can do, read once.
    pub(super) capabilities: Capabilities,
    pub(super) clock: Clock,
    pub(super) metrics: Arc<Metrics>,
    /// Records this process wrote that are still PROCESSING.
    pub(super) recent: Recent,
    /// Wake-ups for held Claims.
    pub(super) waiters: Waiters,
    /// Held Claims by tenant.
    pub(super) held: HeldClaims,
    /// Dedup hits answered but not written yet.
    pub(super) hits: Hits,
    /// Keys whose first look (a Claim's insert) is in flight.
    pub(super) first_looks: FirstLooks,
}

/// What a round decides on, and so which decisions it can back.
pub(super) enum Basis {
    /// The live record as the store holds it (`None`: absent): read whole, or returned by a
    /// failed condition. Backs every decision.
    Stored(Option<Record>),
    /// Assumed without reading: absent (a store whose failed insert returns the live record),
    /// or the record this process last wrote (`Recent`), which may be stale. Backs only a
    /// conditional write, whose condition checks the assumption; an answer or refusal decided
    /// on it is decided again on the stored record.
    Assumed(Option<Record>),
    /// Read without its receipt history (`Capabilities::brief_reads`). Backs every decision but
    /// one that writes the record back whole, which would drop the history.
    Brief(Option<Record>),
}

impl Basis {
    fn record(&self) -> Option<&Record> {
        match self {
            Basis::Stored(r) | Basis::Assumed(r) | Basis::Brief(r) => r.as_ref(),
        }
    }

    pub(super) fn into_record(self) -> Option<Record> {
        match self {
            Basis::Stored(r) | Basis::Assumed(r) | Basis::Brief(r) => r,
        }
    }

    /// Whether a decision made on this basis may be carried out as it is.
    fn backs<T>(&self, decided: &Result<(Transition, T), LedgerError>) -> bool {
        let change = decided.as_ref().ok().map(|(t, _)| t.change);
        let rewrites = matches!(change, Some(Change::Replace { durable: true, .. }));
        match self {
            Basis::Stored(_) => true,
            Basis::Assumed(_) => rewrites || change == Some(Change::Insert),
            Basis::Brief(_) => !rewrites,
        }
    }
}

/// How a run of `Core::run` ended.
pub(super) struct Ran<T> {
    /// The record after the decision: as written, or as the decision keeps it.
    pub(super) record: Option<Record>,
    /// The record the final decision was made on (as the basis had it).
    pub(super) decided_on: Option<Record>,
    /// What the decision returned beside its transition.
    pub(super) extra: T,
}

/// A transition that writes nothing and shows no record: for decisions whose answer is not a
/// record (a held Claim, a parked dedup hit, hits with no record to go to).
pub(super) fn nothing() -> Transition {
    Transition {
        record: None,
        change: Change::Keep,
    }
}

impl<S: Store> Core<S> {
    /// The record of `id` as stored.
    pub(super) async fn read(&self, id: &RecordId) -> Result<Basis, StoreError> {
        Ok(Basis::Stored(self.get(id).await?))
    }

    /// The record of `id`, without its history where the store reads that for less.
    pub(super) async fn read_brief(&self, id: &RecordId) -> Result<Basis, StoreError> {
        if !self.capabilities.brief_reads {
            return self.read(id).await;
        }
        let started = Instant::now();
        let record = self.store.get_brief(id, self.clock.now()).await;
        self.metrics.store_op("get", started.elapsed());
        Ok(Basis::Brief(record?))
    }

    /// The record of `id` as this process last wrote it, if it remembers; else as stored.
    pub(super) async fn remembered(&self, id: &RecordId) -> Result<Basis, StoreError> {
        match self.recent.get(id) {
            Some(record) => Ok(Basis::Assumed(Some(record))),
            None => self.read(id).await,
        }
    }

    /// The live record of `id` (tombstones included), timed.
    pub(super) async fn get(&self, id: &RecordId) -> Result<Option<Record>, StoreError> {
        let started = Instant::now();
        let record = self.store.get(id, self.clock.now()).await;
        self.metrics.store_op("get", started.elapsed());
        record
    }

    /// Decides on `basis` and carries the decision out, until a write applies or the decision
    /// writes nothing. `decide` returns the ledger's transition and whatever the caller wants
    /// back from the final round.
    pub(super) async fn run<T>(
        &self,
        id: &RecordId,
        mut basis: Basis,
        mut decide: impl FnMut(Option<&Record>, Millis) -> Result<(Transition, T), LedgerError>,
    ) -> Result<Ran<T>, EngineError> {
        for _ in 0..MAX_ROUNDS {
            let now = self.clock.now();
            let decided = decide(basis.record(), now);
            if !basis.backs(&decided) {
                basis = self.read(id).await?;
                continue;
            }
            let (transition, extra) = decided.inspect_err(|e| {
                if *e == LedgerError::LeaseLost {
                    self.metrics.lease_lost();
                }
            })?;
            if transition.change != Change::Keep {
                if let Cas::Conflict(stored) = self.write(&transition, basis.record(), now).await? {
                    basis = Basis::Stored(stored);
                    continue;
                }
                self.applied(id, &transition);
            }
            return Ok(Ran {
                record: transition.record,
                decided_on: basis.into_record(),
                extra,
            });
        }
        Err(EngineError::Contention)
    }

    /// The one conditional write `transition` asks for, timed and counted. `decided_on` is the
    /// record the decision was made on: a replace of that very version hands it to the store
    /// (`Store::replace`), which learns from it where the record was indexed.
    async fn write(
        &self,
        transition: &Transition,
        decided_on: Option<&Record>,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let started = Instant::now();
        let (op, cas) = match (transition.change, &transition.record) {
            (Change::Insert, Some(next)) => {
                ("insert", self.store.insert_if_absent(next, now).await?)
            }
            (
                Change::Replace {
                    expected_version,
                    durable,
                },
                Some(next),
            ) => (
                "replace",
                match decided_on.filter(|r| r.version == expected_version) {
                    Some(previous) => self.store.replace(next, previous, durable, now).await?,
                    None => {
                        self.store
                            .replace_if_version(next, expected_version, durable, now)
                            .await?
                    }
                },
            ),
            (Change::Keep, _) | (_, None) => {
                unreachable!("a write carries the record it writes")
            }
        };
        self.metrics.store_op(op, started.elapsed());
        if matches!(cas, Cas::Conflict(_)) {
            self.metrics.conflict(op);
        }
        Ok(cas)
    }

    /// What follows a write that applied: `recent` remembers the record (or forgets it once
    /// settled), and a write that ends a PROCESSING record's run (settled, UNKNOWN, deleted)
    /// wakes the Claims held on it. A dedup hit's write changes no state and does neither.
    fn applied(&self, id: &RecordId, transition: &Transition) {
        if matches!(transition.change, Change::Replace { durable: false, .. }) {
            return;
        }
        match &transition.record {
            Some(record) => self.recent.wrote(record),
            None => self.recent.forget(id),
        }
        if transition
            .record
            .as_ref()
            .is_none_or(|r| r.status != Status::Processing)
        {
            self.waiters.notify(id);
        }
    }
}
