//! What a listing shows and what needs attention: the view rules every store and the API share.
//!
//! - **Reported status.** An AT_MOST_ONCE PROCESSING record whose lease lapsed is reported as
//!   UNKNOWN (by Lookup, ListRecords and the metrics), whether or not a Claim has come since: its
//!   outcome is unknown from the moment its holder stopped answering.
//! - **Buckets.** Stores index records by a `Bucket`: the stored status, with PROCESSING split by
//!   semantics. A bucket never changes with the clock (only a write moves a record), while the
//!   reported status does; `Bucket::holding` says which buckets may hold the records reported
//!   under a status, and a listing re-checks each record it reads there (`ListFilter::matches`).
//! - **Needs attention** (`Attention`): UNKNOWN as reported, and AT_LEAST_ONCE PROCESSING whose
//!   lease lapsed; AWAITING_APPROVAL (an approver's decision is due).
//!
//! Pure: no I/O, no clock; `now` is passed in.

use super::{Millis, ParentRef, Record, Semantics, Status};

impl Record {
    /// The status callers are shown at `now`: the stored one, except that an AT_MOST_ONCE
    /// PROCESSING record whose lease lapsed is UNKNOWN (its holder may or may not have run the
    /// effect, so it needs reconciliation).
    pub fn reported_status(&self, now: Millis) -> Status {
        match self.status {
            Status::Processing
                if self.semantics == Semantics::AtMostOnce && self.lease_expired(now) =>
            {
                Status::Unknown
            }
            status => status,
        }
    }
}

/// Every status a listing can show, in listing order (a tombstone is never shown). A new status
/// is added here; `listed_position` does not compile until it is.
pub const LISTED: [Status; 7] = [
    Status::Processing,
    Status::Unknown,
    Status::Retry,
    Status::Failed,
    Status::Succeeded,
    Status::AwaitingApproval,
    Status::Approved,
];

/// Where `status` is in `LISTED`; `None` for a status never listed.
fn listed_position(status: Status) -> Option<usize> {
    match status {
        Status::Processing => Some(0),
        Status::Unknown => Some(1),
        Status::Retry => Some(2),
        Status::Failed => Some(3),
        Status::Succeeded => Some(4),
        Status::AwaitingApproval => Some(5),
        Status::Approved => Some(6),
        Status::Abandoned | Status::Purged => None,
    }
}

/// Where stores index a record for listing: its stored status, except that an AT_MOST_ONCE
/// PROCESSING record has a bucket of its own (it is reported UNKNOWN once its lease lapses, and
/// an index entry must not depend on the clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bucket {
    /// Records stored with this status (PROCESSING ones: AT_LEAST_ONCE only).
    Stored(Status),
    /// AT_MOST_ONCE PROCESSING records: reported PROCESSING until their lease lapses, UNKNOWN
    /// after.
    ProcessingAtMostOnce,
}

impl Bucket {
    /// Where the bucket comes in listing order: by status (`LISTED`), the at-most-once
    /// PROCESSING records right after the others.
    fn rank(self) -> (usize, u8) {
        match self {
            Bucket::Stored(status) => (status_rank(status), 0),
            Bucket::ProcessingAtMostOnce => (status_rank(Status::Processing), 1),
        }
    }
}

impl PartialOrd for Bucket {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bucket {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rank().cmp(&other.rank())
    }
}

/// Where `status` comes in listing order; tombstones last.
fn status_rank(status: Status) -> usize {
    listed_position(status).unwrap_or(LISTED.len())
}

impl Bucket {
    /// The bucket of a stored record; `None` for a tombstone (never listed).
    pub fn of(record: &Record) -> Option<Bucket> {
        match record.status {
            Status::Abandoned | Status::Purged => None,
            Status::Processing if record.semantics == Semantics::AtMostOnce => {
                Some(Bucket::ProcessingAtMostOnce)
            }
            status => Some(Bucket::Stored(status)),
        }
    }

    /// The buckets that may hold records reported as `status` (see `Record::reported_status`).
    pub fn holding(status: Status) -> Vec<Bucket> {
        match status {
            Status::Abandoned | Status::Purged => Vec::new(),
            Status::Processing | Status::Unknown => {
                vec![Bucket::Stored(status), Bucket::ProcessingAtMostOnce]
            }
            status => vec![Bucket::Stored(status)],
        }
    }

    /// Every bucket, in listing order.
    pub fn all() -> Vec<Bucket> {
        let mut all: Vec<Bucket> = LISTED.iter().flat_map(|s| Bucket::holding(*s)).collect();
        all.sort();
        all.dedup();
        all
    }
}

/// What a listing selects, besides the tenant (which always comes from the caller's credentials).
/// Every part left empty matches every record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// Only records of this namespace.
    pub namespace: Option<String>,
    /// Only records reported with one of these statuses; sorted, without duplicates
    /// (`ListFilter::new` sees to it).
    pub statuses: Vec<Status>,
    /// Only records whose first Claim named this parent.
    pub parent: Option<ParentRef>,
}

impl ListFilter {
    /// A filter; `statuses` in any order, duplicates allowed.
    pub fn new(
        namespace: Option<String>,
        mut statuses: Vec<Status>,
        parent: Option<ParentRef>,
    ) -> Self {
        statuses.sort_by_key(|s| status_rank(*s));
        statuses.dedup();
        Self {
            namespace,
            statuses,
            parent,
        }
    }

    /// Whether `record` (of the caller's tenant) is listed at `now`: live, not a tombstone, and
    /// matching every part of the filter, its status as reported at `now`.
    pub fn matches(&self, record: &Record, now: Millis) -> bool {
        if record.status.is_tombstone() || record.is_expired(now) {
            return false;
        }
        let status = record.reported_status(now);
        self.namespace
            .as_ref()
            .is_none_or(|ns| *ns == record.id.namespace)
            && (self.statuses.is_empty() || self.statuses.contains(&status))
            && self
                .parent
                .as_ref()
                .is_none_or(|p| record.parent.as_ref() == Some(p))
    }

    /// The buckets a store must read for the status filter, in listing order; every bucket when
    /// no status is asked for.
    pub fn buckets(&self) -> Vec<Bucket> {
        if self.statuses.is_empty() {
            return Bucket::all();
        }
        let mut buckets: Vec<Bucket> = self
            .statuses
            .iter()
            .flat_map(|s| Bucket::holding(*s))
            .collect();
        buckets.sort();
        buckets.dedup();
        buckets
    }
}

/// Why a record needs someone's attention (the label of `oncekey_records_needing_attention`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attention {
    /// Reported UNKNOWN: an at-most-once outcome to reconcile.
    Unknown,
    /// Waiting for an approver's decision.
    AwaitingApproval,
    /// AT_LEAST_ONCE PROCESSING whose lease lapsed: its holder stopped, and nobody took it over.
    ProcessingLapsed,
}

impl Attention {
    /// Every reason, in the order metrics show them.
    pub const ALL: [Attention; 3] = [
        Attention::Unknown,
        Attention::AwaitingApproval,
        Attention::ProcessingLapsed,
    ];

    /// The label value.
    pub fn name(self) -> &'static str {
        match self {
            Attention::Unknown => "UNKNOWN",
            Attention::AwaitingApproval => "AWAITING_APPROVAL",
            Attention::ProcessingLapsed => "PROCESSING_LAPSED",
        }
    }

    /// Why `record` needs attention at `now`, if it does.
    pub fn of(record: &Record, now: Millis) -> Option<Attention> {
        if record.is_expired(now) {
            return None;
        }
        match record.reported_status(now) {
            Status::Unknown => Some(Attention::Unknown),
            Status::AwaitingApproval => Some(Attention::AwaitingApproval),
            Status::Processing if record.lease_expired(now) => Some(Attention::ProcessingLapsed),
            _ => None,
        }
    }

    /// The buckets that may hold records needing attention, in listing order.
    pub fn buckets() -> Vec<Bucket> {
        let needing = vec![
            Status::Processing,
            Status::Unknown,
            Status::AwaitingApproval,
        ];
        ListFilter::new(None, needing, None).buckets()
    }
}

/// How many records need attention, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AttentionCounts {
    /// Reported UNKNOWN.
    pub unknown: u64,
    /// Waiting for approval.
    pub awaiting_approval: u64,
    /// AT_LEAST_ONCE PROCESSING with a lapsed lease.
    pub processing_lapsed: u64,
}

impl AttentionCounts {
    /// Counts one more record needing attention for `why`.
    pub fn add(&mut self, why: Attention) {
        *self.get_mut(why) += 1;
    }

    /// The count for `why`.
    pub fn get(&self, why: Attention) -> u64 {
        match why {
            Attention::Unknown => self.unknown,
            Attention::AwaitingApproval => self.awaiting_approval,
            Attention::ProcessingLapsed => self.processing_lapsed,
        }
    }

    fn get_mut(&mut self, why: Attention) -> &mut u64 {
        match why {
            Attention::Unknown => &mut self.unknown,
            Attention::AwaitingApproval => &mut self.awaiting_approval,
            Attention::ProcessingLapsed => &mut self.processing_lapsed,
        }
    }
}

#[cfg(test)]
mod tests {
    //! One test per view rule.

    use super::super::*;
    use super::listed_position;

    const T0: Millis = 1_000_000;
    const LEASE: Millis = 30_000;

    fn args(semantics: Semantics) -> ClaimArgs {
        ClaimArgs::for_test([1; 32], semantics, LEASE, 3_600_000, "w")
    }

    fn claimed(semantics: Semantics) -> Record {
        let id = RecordId::new("t", "ns", "k");
        claim(&id, None, &args(semantics), T0)
            .unwrap()
            .record()
            .clone()
    }

    #[test]
    fn lapsed_at_most_once_processing_is_reported_unknown_before_any_claim() {
        let rec = claimed(Semantics::AtMostOnce);
        assert_eq!(rec.reported_status(T0 + LEASE - 1), Status::Processing);
        assert_eq!(rec.status, Status::Processing, "nothing was written");
        assert_eq!(rec.reported_status(T0 + LEASE), Status::Unknown);
        // A Claim since then stores UNKNOWN: reported the same.
        let d = claim(
            &rec.id,
            Some(&rec),
            &args(Semantics::AtMostOnce),
            T0 + LEASE,
        )
        .unwrap();
        assert_eq!(d.outcome, ClaimOutcome::NeedsReconciliation);
        assert_eq!(d.record().reported_status(T0 + LEASE), Status::Unknown);
        // A renewal by the holder before anyone claimed makes it PROCESSING again.
        let renewed = renew(Some(&rec), 1, LEASE, T0 + LEASE + 5).unwrap().1;
        let renewed = renewed.record.unwrap();
        assert_eq!(renewed.reported_status(T0 + LEASE + 5), Status::Processing);
    }

    #[test]
    fn lapsed_at_least_once_processing_is_still_reported_processing() {
        let rec = claimed(Semantics::AtLeastOnce);
        assert_eq!(rec.reported_status(T0 + 10 * LEASE), Status::Processing);
        assert_eq!(
            Attention::of(&rec, T0 + LEASE),
            Some(Attention::ProcessingLapsed)
        );
        assert_eq!(Attention::of(&rec, T0 + LEASE - 1), None);
    }

    #[test]
    fn a_bucket_does_not_change_with_the_clock_and_holding_finds_it() {
        for semantics in [Semantics::AtLeastOnce, Semantics::AtMostOnce] {
            let rec = claimed(semantics);
            let bucket = Bucket::of(&rec).unwrap();
            for now in [T0, T0 + LEASE, T0 + 100 * LEASE] {
                let reported = rec.reported_status(now);
                assert!(
                    Bucket::holding(reported).contains(&bucket),
                    "{semantics:?} at {now}: {reported:?} not held by {bucket:?}"
                );
            }
        }
        let mut tombstone = claimed(Semantics::AtLeastOnce);
        tombstone.status = Status::Abandoned;
        assert_eq!(Bucket::of(&tombstone), None);
    }

    #[test]
    fn every_listed_status_has_its_position_and_every_bucket_is_read_by_an_empty_filter() {
        for (i, status) in LISTED.iter().enumerate() {
            assert_eq!(listed_position(*status), Some(i));
        }
        let all = Bucket::all();
        assert_eq!(ListFilter::default().buckets(), all);
        for status in LISTED {
            for bucket in Bucket::holding(status) {
                assert!(all.contains(&bucket), "{bucket:?}");
            }
        }
        assert_eq!(all.len(), LISTED.len() + 1);
    }

    #[test]
    fn a_filter_matches_by_reported_status_namespace_and_parent() {
        let mut rec = claimed(Semantics::AtMostOnce);
        rec.parent = Some(ParentRef {
            namespace: "flows".into(),
            key: "f1".into(),
        });
        let unknown = ListFilter::new(None, vec![Status::Unknown], None);
        assert!(!unknown.matches(&rec, T0));
        assert!(unknown.matches(&rec, T0 + LEASE));
        let processing = ListFilter::new(None, vec![Status::Processing], None);
        assert!(processing.matches(&rec, T0));
        assert!(!processing.matches(&rec, T0 + LEASE));
        let both = ListFilter::new(
            Some("ns".into()),
            vec![Status::Unknown, Status::Processing, Status::Unknown],
            rec.parent.clone(),
        );
        assert_eq!(both.statuses, vec![Status::Processing, Status::Unknown]);
        assert!(both.matches(&rec, T0) && both.matches(&rec, T0 + LEASE));
        let other_ns = ListFilter::new(Some("other".into()), vec![], None);
        assert!(!other_ns.matches(&rec, T0));
        let other_parent = ListFilter::new(
            None,
            vec![],
            Some(ParentRef {
                namespace: "flows".into(),
                key: "f2".into(),
            }),
        );
        assert!(!other_parent.matches(&rec, T0));
        assert!(ListFilter::default().matches(&rec, T0));
        // Tombstones and expired records are never listed.
        let mut gone = rec.clone();
        gone.status = Status::Abandoned;
        assert!(!ListFilter::default().matches(&gone, T0));
        let mut expired = rec;
        expired.expires_at = Some(T0 + 1);
        assert!(!ListFilter::default().matches(&expired, T0 + 1));
    }

    #[test]
    fn attention_counts_unknown_as_reported_and_lapsed_at_least_once() {
        let amo = claimed(Semantics::AtMostOnce);
        assert_eq!(Attention::of(&amo, T0), None);
        assert_eq!(Attention::of(&amo, T0 + LEASE), Some(Attention::Unknown));
        let done = complete(Some(&amo), 1, &OpResult::default(), T0 + 1).unwrap();
        assert_eq!(Attention::of(&done.record.unwrap(), T0 + LEASE), None);
        let buckets = Attention::buckets();
        assert!(buckets.contains(&Bucket::of(&amo).unwrap()));
        assert!(buckets.contains(&Bucket::of(&claimed(Semantics::AtLeastOnce)).unwrap()));
        assert!(buckets.contains(&Bucket::Stored(Status::Unknown)));
        let mut counts = AttentionCounts::default();
        counts.add(Attention::Unknown);
        counts.add(Attention::Unknown);
        counts.add(Attention::ProcessingLapsed);
        assert_eq!(
            Attention::ALL.map(|a| counts.get(a)),
            [2, 0, 1],
            "UNKNOWN, AWAITING_APPROVAL, PROCESSING_LAPSED"
        );
    }
}
