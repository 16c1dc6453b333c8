//! Dedup hits: a Claim answered from the record (COMPLETED, FAILED, IN_PROGRESS, a repeated
//! NEEDS_RECONCILIATION) changes only the record's counter and receipt history, so hits may be
//! gathered and added later, many with one write. These are the rules for where gathered hits
//! go: the hits count on the life of the record that answered them, their receipts go into
//! that life's record, or into a later life's record that carries its history forward, and
//! nothing else of the record changes.
//!
//! Pure like the rest of the ledger: the engine keeps the gathered hits and writes what
//! `add_hits` decides.

use super::MAX_HISTORY;
use super::{bound_history, Change, Event, EventKind, Millis, Record, Status, Transition};
use std::collections::VecDeque;

/// One life of a key's record: from the Claim that created it to its expiry or abandonment. A
/// record created again over a tombstone is a new life even within the same millisecond: its
/// fencing sequence continues, so the tokens handed out before it (`fencing_token - attempt`,
/// which acquisitions never change) differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Life {
    created_at: Millis,
    base: u64,
}

impl Life {
    /// The life `record` belongs to (a record read without its history has one too).
    pub fn of(record: &Record) -> Self {
        Self {
            created_at: record.created_at,
            base: record
                .fencing_token
                .saturating_sub(u64::from(record.attempt)),
        }
    }

    /// Whether `record`, of another life, carries this life's history forward: it was created
    /// over this life's tombstone (directly or through later ones), so its fencing sequence runs
    /// past this life's and its history (which must have been read) still holds the receipt that
    /// created this life — an acquisition with the life's first token, or, for a life created
    /// awaiting approval, the Claim that created it before any token was handed out. A record
    /// created afresh (after an expiry or a purge) does not.
    pub fn carried_into(self, record: &Record) -> bool {
        let later = Life::of(record);
        later.base > self.base
            && later.created_at >= self.created_at
            && record.history.iter().any(|e| {
                e.at == self.created_at
                    && e.kind == EventKind::Claim
                    && ((e.fencing_token == self.base + 1 && e.outcome == "ACQUIRED")
                        || (e.fencing_token == self.base && e.outcome == "AWAITING_APPROVAL"))
            })
    }
}

/// Dedup hits of one life of a record, with their receipts (the newest `MAX_HISTORY`: a record
/// keeps no more), gathered to be added together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HitBatch {
    /// The life the hits belong to.
    pub life: Life,
    /// How many Claims were answered from the record.
    pub hits: u64,
    /// Their receipts, in the order they were answered. A queue: past `MAX_HISTORY` every hit
    /// lets the oldest go, which must not move the others (a hot key's batch is full for most of
    /// its hits).
    pub receipts: VecDeque<Event>,
}

/// What a batch of hits adds to a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// The record is of the batch's life: its hits and its receipts.
    Own,
    /// The record is a later life carrying the batch's life forward: its receipts only (the
    /// counter belongs to the record's own life).
    Carried,
}

impl HitBatch {
    /// A batch of the one hit `record` (as read) answered, leaving `receipt`.
    pub fn one(record: &Record, receipt: Event) -> Self {
        Self {
            life: Life::of(record),
            hits: 1,
            receipts: VecDeque::from([receipt]),
        }
    }

    /// Adds one more hit of the same life.
    pub fn push(&mut self, receipt: Event) {
        self.hits = self.hits.saturating_add(1);
        self.receipts.push_back(receipt);
        self.bound();
    }

    /// Adds `newer`, a batch of the same life gathered after this one.
    pub fn append(&mut self, newer: HitBatch) {
        debug_assert_eq!(self.life, newer.life);
        self.hits = self.hits.saturating_add(newer.hits);
        self.receipts.extend(newer.receipts);
        self.bound();
    }

    /// What of this batch belongs in `record`; `None` when nothing does (the record is of
    /// another life that does not carry this one). Telling `Carried` needs the history: for a
    /// record read without it, only `Own` is ever answered.
    pub fn share(&self, record: &Record) -> Option<Share> {
        if Life::of(record) == self.life {
            Some(Share::Own)
        } else if self.life.carried_into(record) {
            Some(Share::Carried)
        } else {
            None
        }
    }

    fn bound(&mut self) {
        while self.receipts.len() > MAX_HISTORY {
            self.receipts.pop_front();
        }
    }
}

/// Adds `hits` and `receipts` to `record`, keeping the history in time order and bounded
/// (`bound_history`). Nothing else changes: not the version, not `updated_at`.
pub fn count_hits<'e>(
    record: &mut Record,
    hits: u64,
    receipts: impl IntoIterator<Item = &'e Event>,
) {
    record.dedup_hits = record.dedup_hits.saturating_add(hits);
    let mut receipts = receipts.into_iter().peekable();
    if receipts.peek().is_none() {
        return;
    }
    let mut history = std::mem::take(&mut record.history);
    history.extend(receipts.cloned());
    history.sort_by_key(|e| e.at);
    bound_history(&mut history);
    record.history = history;
}

/// Decides adding a gathered batch to the live record `current` (read whole, with its history)
/// at `now`: a write of the counter and history only (`Change::Replace` with `durable: false`),
/// carrying the batch's hits when `current` is of the batch's life and only its receipts when
/// `current` carries that life forward. `None` when no record takes them — the key is gone,
/// expired, purged (a Purge tombstone keeps no history) or created afresh — and the batch is
/// dropped.
pub fn add_hits(current: Option<&Record>, batch: &HitBatch, now: Millis) -> Option<Transition> {
    let current = current.filter(|r| !r.is_expired(now) && r.status != Status::Purged)?;
    let hits = match batch.share(current)? {
        Share::Own => batch.hits,
        Share::Carried if !batch.receipts.is_empty() => 0,
        Share::Carried => return None,
    };
    let mut next = current.clone();
    next.version = current.version + 1;
    count_hits(&mut next, hits, &batch.receipts);
    Some(Transition {
        record: Some(next),
        change: Change::Replace {
            expected_version: current.version,
            durable: false,
        },
    })
}

#[cfg(test)]
mod tests {
    //! One test per rule of where gathered hits go.

    use super::super::*;
    use super::*;

    const T0: Millis = 1_000_000;

    fn args(fp: u8, owner: &str) -> ClaimArgs {
        ClaimArgs::for_test([fp; 32], Semantics::AtLeastOnce, 30_000, 600_000, owner)
    }

    fn id() -> RecordId {
        RecordId::new("tenant", "ns", "key")
    }

    fn written(t: Transition) -> Record {
        t.record.expect("a record")
    }

    /// A record claimed at `now`, and the batch of one IN_PROGRESS replay of it.
    fn claimed_with_replay(now: Millis) -> (Record, HitBatch) {
        let record = claim(&id(), None, &args(1, "holder"), now)
            .unwrap()
            .record()
            .clone();
        let replay = claim(&id(), Some(&record), &args(1, "replayed"), now).unwrap();
        assert!(replay.is_dedup_hit());
        let batch = HitBatch::one(&record, replay.receipt().clone());
        (record, batch)
    }

    /// The holder abandons `record` at `now` and another Claim creates the key again.
    fn abandoned_and_reclaimed(record: &Record, now: Millis) -> Record {
        let abandon = fail(
            Some(record),
            1,
            &OpError::default(),
            Disposition::Abandon,
            now,
        );
        let tombstone = written(abandon.unwrap());
        claim(&id(), Some(&tombstone), &args(2, "next"), now)
            .unwrap()
            .record()
            .clone()
    }

    #[test]
    fn hits_of_the_records_own_life_add_counter_and_receipts_and_nothing_else() {
        let (record, mut batch) = claimed_with_replay(T0);
        batch.push(batch.receipts[0].clone());
        let t = add_hits(Some(&record), &batch, T0 + 5).expect("a write");
        assert_eq!(
            t.change,
            Change::Replace {
                expected_version: record.version,
                durable: false
            }
        );
        let next = written(t);
        assert_eq!(next.dedup_hits, 2);
        assert_eq!(next.history.len(), 3);
        let mut same = next.clone();
        same.version = record.version;
        same.dedup_hits = record.dedup_hits;
        same.history.clone_from(&record.history);
        assert_eq!(same, record, "only version, dedup_hits and history change");
    }

    #[test]
    fn hits_of_an_abandoned_life_leave_their_receipts_in_the_record_carrying_it_forward() {
        for later in [0, 1] {
            let (record, batch) = claimed_with_replay(T0);
            let again = abandoned_and_reclaimed(&record, T0 + later);
            assert_ne!(
                Life::of(&again),
                batch.life,
                "a new life, even in the same ms"
            );
            assert_eq!(batch.share(&again), Some(Share::Carried));
            let next = written(add_hits(Some(&again), &batch, T0 + 2).expect("a write"));
            assert_eq!(next.dedup_hits, 0, "the counter is the new life's own");
            let replayed = next.history.iter().filter(|e| e.owner == "replayed");
            assert_eq!(replayed.count(), 1);
        }
    }

    #[test]
    fn hits_of_a_record_created_afresh_or_gone_are_dropped() {
        let (record, batch) = claimed_with_replay(T0);
        let expires_at = record.expires_at.expect("an at-least-once record expires");
        assert_eq!(add_hits(None, &batch, T0), None);
        assert_eq!(add_hits(Some(&record), &batch, expires_at), None, "expired");
        let afresh = claim(&id(), Some(&record), &args(1, "new"), expires_at)
            .unwrap()
            .record()
            .clone();
        assert_eq!(batch.share(&afresh), None, "its history lacks the old life");
        assert_eq!(add_hits(Some(&afresh), &batch, expires_at), None);

        // A carried life with no receipts left has nothing to add.
        let again = abandoned_and_reclaimed(&record, T0 + 1);
        let empty = HitBatch {
            receipts: VecDeque::new(),
            ..batch
        };
        assert_eq!(add_hits(Some(&again), &empty, T0 + 2), None);
    }

    #[test]
    fn a_batch_keeps_the_newest_receipts_a_record_can_hold() {
        let (record, mut batch) = claimed_with_replay(T0);
        let template = batch.receipts[0].clone();
        let receipt = |at| Event {
            at,
            ..template.clone()
        };
        for at in 1..MAX_HISTORY as Millis {
            batch.push(receipt(T0 + at));
        }
        let mut newer = HitBatch::one(&record, receipt(T0 + 1_000));
        newer.push(receipt(T0 + 1_001));
        batch.append(newer);
        assert_eq!(batch.hits, MAX_HISTORY as u64 + 2);
        assert_eq!(batch.receipts.len(), MAX_HISTORY);
        assert_eq!(batch.receipts.back().unwrap().at, T0 + 1_001);
        let next = written(add_hits(Some(&record), &batch, T0).unwrap());
        assert_eq!(next.history.len(), MAX_HISTORY);
        assert!(next.history.windows(2).all(|w| w[0].at <= w[1].at));
    }
}
