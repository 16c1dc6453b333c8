//! The reference model of receipts and dedup hits for `invariants.rs`: which receipts a record
//! (and the abandoned records it was created again over) must hold, and how many Claims its own
//! life answered from it. Checked against every answer, against Lookup after every step, and
//! against the stored record once the parked hits are written.

use oncekey_server::ledger::{ClaimOutcome, Event, EventKind, Record};

/// A receipt as the model predicts it: its class (claim, complete, fail, renew), the answer and
/// who.
pub type Receipt = (&'static str, String, String);

/// What one key's record must show.
#[derive(Debug, Default)]
pub struct Trail {
    /// Every receipt of the record's life and of the lives it carries forward.
    receipts: Vec<Receipt>,
    /// Claims answered from the record in its own life.
    hits: u64,
    /// The key was abandoned: its next acquisition creates a new life over the tombstone.
    abandoned: bool,
}

fn class(kind: EventKind) -> &'static str {
    match kind {
        EventKind::Claim | EventKind::Takeover => "claim",
        EventKind::Complete => "complete",
        EventKind::Fail => "fail",
        EventKind::Renew => "renew",
        EventKind::Approve => "approve",
        EventKind::Reject => "reject",
    }
}

fn outcome_name(outcome: ClaimOutcome) -> &'static str {
    match outcome {
        ClaimOutcome::Acquired => "ACQUIRED",
        ClaimOutcome::Completed => "COMPLETED",
        ClaimOutcome::Failed => "FAILED",
        ClaimOutcome::InProgress => "IN_PROGRESS",
        ClaimOutcome::NeedsReconciliation => "NEEDS_RECONCILIATION",
        ClaimOutcome::AwaitingApproval => "AWAITING_APPROVAL",
        ClaimOutcome::DuplicateIntent => "DUPLICATE_INTENT",
    }
}

impl Trail {
    /// A Claim by `owner` was answered `outcome` with `record` (whose lease token is `token`).
    pub fn claimed(&mut self, outcome: ClaimOutcome, record: &Record, owner: &str) {
        let receipt = ("claim", outcome_name(outcome).to_owned(), owner.to_owned());
        match outcome {
            ClaimOutcome::Acquired if record.fencing_token == 1 => {
                // A record created afresh (the key was new, or its record expired).
                *self = Trail::default();
            }
            ClaimOutcome::Acquired if self.abandoned => {
                // Created again over the tombstone: a new life that keeps the history.
                self.hits = 0;
                self.abandoned = false;
            }
            ClaimOutcome::Acquired => {}
            _ => self.hits += 1,
        }
        self.receipts.push(receipt);
        assert_eq!(
            record.dedup_hits, self.hits,
            "the answer to a Claim ({outcome:?}) counts every hit answered before it"
        );
    }

    /// The holder `owner` settled: `kind` with `outcome`; `record` is the answer's (none when
    /// abandoned).
    pub fn settled(
        &mut self,
        kind: EventKind,
        outcome: &str,
        owner: &str,
        record: Option<&Record>,
    ) {
        self.receipts
            .push((class(kind), outcome.to_owned(), owner.to_owned()));
        match record {
            Some(record) => assert_eq!(record.dedup_hits, self.hits, "{kind:?} {outcome}"),
            None => self.abandoned = true,
        }
    }

    /// The holder `owner` renewed its lease.
    pub fn renewed(&mut self, owner: &str) {
        self.receipts
            .push(("renew", "RENEWED".to_owned(), owner.to_owned()));
    }

    /// Checks `record`, read through the engine or from the store, against the model.
    pub fn check(&self, record: &Record, how: &str) {
        let mut seen: Vec<Receipt> = record.history.iter().map(receipt).collect();
        let mut expected = self.receipts.clone();
        seen.sort();
        expected.sort();
        assert_eq!(seen, expected, "{how}: every receipt, once");
        assert_eq!(record.dedup_hits, self.hits, "{how}: dedup_hits");
    }
}

fn receipt(e: &Event) -> Receipt {
    (class(e.kind), e.outcome.clone(), e.owner.clone())
}
