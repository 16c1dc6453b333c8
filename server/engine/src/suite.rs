//! The behavioural suite every store must pass, written once against the `Store` trait and the
//! engine; `store_suite!` instantiates it for a backend.

use crate::{Clock, Engine, EngineError};
use oncekey_ledger::{
    ClaimArgs, ClaimOutcome, Disposition, EventKind, OpError, OpResult, Record, RecordId,
    Semantics, Status,
};
use oncekey_store::{Cas, Store};

mod expiry;
mod gate;
mod hits;
mod listing;
mod listing_changes;
mod listing_pages;
mod listing_status;
mod operations;
mod safety;
mod scan;
mod waits;
pub use expiry::*;
pub use hits::*;
pub use listing::*;
pub use listing_changes::*;
pub use listing_pages::*;
pub use listing_status::*;
pub use operations::*;
pub use safety::*;
pub use scan::*;
pub use waits::*;

const T0: i64 = 1_700_000_000_000;

/// Instantiates the suite for a store: `store_suite!(name, async { (store, guard) })`; attributes
/// before the name go on every test (e.g. `#[ignore = "needs …"]` for a store needing a service).
#[macro_export]
macro_rules! store_suite {
    ($(#[$attr:meta])* $name:ident, $setup:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            macro_rules! case {
                ($case:ident) => {
                    #[tokio::test]
                    $(#[$attr])*
                    async fn $case() {
                        let (store, _guard) = $setup.await;
                        $crate::suite::$case(store).await;
                    }
                };
            }
            case!(insert_get_and_conflict);
            case!(replace_and_delete_check_version);
            case!(expired_counts_as_absent);
            case!(tenants_are_isolated);
            case!(sweep_removes_expired);
            case!(engine_claim_complete_replay);
            case!(engine_retry_then_abandon);
            case!(engine_concurrent_claims_one_winner);
            case!(engine_history_in_order);
            case!(engine_dedup_hits_reach_the_store);
            case!(large_outcomes_round_trip);
            case!(engine_waiters_on_a_fresh_key_get_the_result);
            case!(engine_a_held_claim_outlives_failed_reads);
            case!(engine_duplicates_of_a_fresh_key_send_one_insert);
            case!(engine_answers_count_every_hit);
            case!(engine_a_hit_being_written_is_counted);
            case!(engine_receipts_survive_abandon_and_reclaim);
            case!(expiry_keeps_an_unsettled_at_most_once_record);
            case!(expiry_follows_a_renewing_at_least_once_holder);
            case!(expiry_removes_settled_records);
            case!(expiry_keeps_the_gate_of_an_abandoned_key);
            case!(list_pages_through_thousands_of_records);
            case!(list_filters_by_status_namespace_and_parent);
            case!(list_never_shows_another_tenants_records);
            case!(list_never_shows_a_stale_entry_under_a_wrong_status);
            case!(list_shows_a_status_held_for_5s);
            case!(attention_counts_what_needs_attention);
            case!(list_walks_on_while_records_change);
            case!(list_never_shows_a_gone_record);
            case!(list_the_page_with_the_last_record_ends_the_listing);
            case!(scan_pages_through_every_tenants_records_once);
            case!(operator_fields_round_trip);
            case!(engine_approval_gate);
            case!(engine_wait_is_held_until_decided);
            case!(engine_dry_run_writes_nothing);
            case!(engine_attempt_cap_persists);
            case!(engine_purge_continues_the_fencing_sequence);
            case!(intent_guard_refuses_and_names_a_made_up_key);
            case!(intent_guard_one_of_racing_keys_wins);
            case!(budget_is_exact_under_concurrency);
            case!(budget_caps_one_namespace);
        }
    };
}

fn args(fp: u8) -> ClaimArgs {
    ClaimArgs::for_test([fp; 32], Semantics::AtLeastOnce, 30_000, 3_600_000, "suite")
}

fn record(id: &RecordId, now: i64) -> Record {
    oncekey_ledger::claim(id, None, &args(1), now)
        .unwrap()
        .record()
        .clone()
}

/// A fresh id, so cases never share keys even on a shared keyspace.
fn fresh_id(tenant: &str) -> RecordId {
    RecordId::new(tenant, "suite.ns", format!("key-{}", rand::random::<u64>()))
}

pub async fn insert_get_and_conflict<S: Store>(store: S) {
    let id = fresh_id("t1");
    assert_eq!(store.get(&id, T0).await.unwrap(), None);
    let rec = record(&id, T0);
    assert_eq!(
        store.insert_if_absent(&rec, T0).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, T0).await.unwrap(), Some(rec.clone()));
    let other = oncekey_ledger::claim(&id, None, &args(2), T0 + 1)
        .unwrap()
        .record()
        .clone();
    assert_eq!(
        store.insert_if_absent(&other, T0 + 1).await.unwrap(),
        Cas::Conflict(Some(rec))
    );
}

pub async fn replace_and_delete_check_version<S: Store>(store: S) {
    let id = fresh_id("t1");
    let rec = record(&id, T0);
    store.insert_if_absent(&rec, T0).await.unwrap();
    let mut next = rec.clone();
    next.version = 2;
    next.dedup_hits = 7;
    assert_eq!(
        store.replace_if_version(&next, 5, true, T0).await.unwrap(),
        Cas::Conflict(Some(rec.clone()))
    );
    assert_eq!(
        store.replace_if_version(&next, 1, true, T0).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, T0).await.unwrap(), Some(next.clone()));
    assert_eq!(
        store.delete_if_version(&id, 1, T0).await.unwrap(),
        Cas::Conflict(Some(next))
    );
    assert_eq!(
        store.delete_if_version(&id, 2, T0).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, T0).await.unwrap(), None);
    assert_eq!(
        store.delete_if_version(&id, 2, T0).await.unwrap(),
        Cas::Conflict(None)
    );
}

pub async fn expired_counts_as_absent<S: Store>(store: S) {
    let id = fresh_id("t1");
    let rec = record(&id, T0);
    store.insert_if_absent(&rec, T0).await.unwrap();
    let at_expiry = rec.expires_at.expect("an at-least-once record expires");
    assert!(store.get(&id, at_expiry - 1).await.unwrap().is_some());
    assert_eq!(store.get(&id, at_expiry).await.unwrap(), None);
    let mut next = rec.clone();
    next.version = 2;
    assert_eq!(
        store
            .replace_if_version(&next, 1, true, at_expiry)
            .await
            .unwrap(),
        Cas::Conflict(None)
    );
    let again = record(&id, at_expiry);
    assert_eq!(
        store.insert_if_absent(&again, at_expiry).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, at_expiry).await.unwrap(), Some(again));
}

pub async fn tenants_are_isolated<S: Store>(store: S) {
    let a = fresh_id("tenant-a");
    let b = RecordId::new("tenant-b", a.namespace.clone(), a.key.clone());
    store.insert_if_absent(&record(&a, T0), T0).await.unwrap();
    assert_eq!(store.get(&b, T0).await.unwrap(), None);
    assert_eq!(
        store.insert_if_absent(&record(&b, T0), T0).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(
        store.delete_if_version(&b, 1, T0).await.unwrap(),
        Cas::Applied
    );
    assert!(store.get(&a, T0).await.unwrap().is_some());
}

pub async fn sweep_removes_expired<S: Store>(store: S) {
    let id = fresh_id("t1");
    let rec = record(&id, T0);
    store.insert_if_absent(&rec, T0).await.unwrap();
    let expires_at = rec.expires_at.expect("an at-least-once record expires");
    let swept = store.sweep_expired(expires_at, 1000).await.unwrap();
    assert!(store.get(&id, expires_at - 1).await.unwrap().is_none() || swept == 0);
    assert_eq!(store.get(&id, expires_at).await.unwrap(), None);
}

pub async fn engine_claim_complete_replay<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let id = fresh_id("t1");
    let first = engine.claim(&id, &args(1), None).await.unwrap();
    assert_eq!(first.outcome, ClaimOutcome::Acquired);
    let token = first.lease.unwrap().token;
    let result = OpResult {
        code: 201,
        body: b"charged".to_vec(),
        ..OpResult::default()
    };
    let done = engine.complete(&id, token, &result).await.unwrap();
    assert_eq!(done.status, Status::Succeeded);
    let replay = engine.claim(&id, &args(1), None).await.unwrap();
    assert_eq!(replay.outcome, ClaimOutcome::Completed);
    assert_eq!(replay.record.result, Some(result));
    assert_eq!(replay.record.dedup_hits, 1);
    assert_eq!(engine.lookup(&id).await.unwrap().dedup_hits, 1);
}

pub async fn engine_retry_then_abandon<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let id = fresh_id("t1");
    let token = engine
        .claim(&id, &args(1), None)
        .await
        .unwrap()
        .lease
        .unwrap()
        .token;
    let err = OpError {
        code: 503,
        message: "provider down".into(),
        details: vec![],
    };
    let rec = engine
        .fail(&id, token, &err, Disposition::Retryable)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.status, Status::Retry);
    let again = engine.claim(&id, &args(1), None).await.unwrap();
    assert_eq!(
        (again.outcome, again.lease.unwrap().token),
        (ClaimOutcome::Acquired, 2)
    );
    assert_eq!(
        engine
            .fail(&id, 2, &err, Disposition::Abandon)
            .await
            .unwrap(),
        None
    );
    assert!(matches!(
        engine.lookup(&id).await,
        Err(EngineError::NotFound)
    ));
    let other = engine.claim(&id, &args(9), None).await.unwrap();
    assert_eq!(
        (other.outcome, other.lease.unwrap().token),
        (ClaimOutcome::Acquired, 3)
    );
    assert_eq!(other.record.fingerprint, [9; 32]);
}

pub async fn engine_concurrent_claims_one_winner<S: Store>(store: S) {
    let engine = std::sync::Arc::new(Engine::new(store, Clock::System));
    let id = fresh_id("t1");
    let tasks: Vec<_> = (0..32)
        .map(|_| {
            let (engine, id) = (engine.clone(), id.clone());
            tokio::spawn(async move { engine.claim(&id, &args(1), None).await.unwrap().outcome })
        })
        .collect();
    let mut acquired = 0;
    for task in tasks {
        if task.await.unwrap() == ClaimOutcome::Acquired {
            acquired += 1;
        }
    }
    assert_eq!(acquired, 1);
    assert_eq!(engine.lookup(&id).await.unwrap().dedup_hits, 31);
}

pub async fn engine_history_in_order<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let id = fresh_id("t1");
    let short = ClaimArgs {
        lease_ttl: 1_000,
        ..args(1)
    };
    engine.claim(&id, &short, None).await.unwrap();
    clock.advance(1_000);
    let taker = ClaimArgs {
        owner: "taker".into(),
        ..args(1)
    };
    let taken = engine.claim(&id, &taker, None).await.unwrap();
    assert_eq!(taken.lease.unwrap().token, 2);
    let result = OpResult {
        code: 200,
        ..OpResult::default()
    };
    engine.complete(&id, 2, &result).await.unwrap();
    engine.claim(&id, &args(1), None).await.unwrap();
    let history = engine.lookup(&id).await.unwrap().history;
    let seen: Vec<_> = history
        .iter()
        .map(|e| {
            (
                e.kind,
                e.outcome.as_str(),
                e.fencing_token,
                e.owner.as_str(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (EventKind::Claim, "ACQUIRED", 1, "suite"),
            (EventKind::Takeover, "ACQUIRED", 2, "taker"),
            (EventKind::Complete, "SUCCEEDED", 2, "taker"),
            (EventKind::Claim, "COMPLETED", 2, "suite"),
        ]
    );
}

pub async fn engine_dedup_hits_reach_the_store<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let id = fresh_id("t1");
    engine.claim(&id, &args(1), None).await.unwrap();
    let result = OpResult {
        code: 200,
        ..OpResult::default()
    };
    engine.complete(&id, 1, &result).await.unwrap();
    for n in 1..=5 {
        let replay = engine.claim(&id, &args(1), None).await.unwrap();
        assert_eq!(
            (replay.outcome, replay.record.dedup_hits),
            (ClaimOutcome::Completed, n)
        );
    }
    // Answered at once; written by the background flush (or this one, at shutdown).
    engine.flush_parked_hits().await;
    let stored = engine.store().get(&id, T0).await.unwrap().unwrap();
    assert_eq!(stored.dedup_hits, 5);
    let replays = stored
        .history
        .iter()
        .filter(|e| e.outcome == "COMPLETED")
        .count();
    assert_eq!(replays, 5);
    assert_eq!(
        engine.lookup(&id).await.unwrap().dedup_hits,
        5,
        "no double count after the flush"
    );
}

/// Results and errors near the default limits (a MiB of body, 64 KiB of details, 32 metadata
/// entries) survive every write that keeps, changes or drops them, and conflicts answer with them.
pub async fn large_outcomes_round_trip<S: Store>(store: S) {
    let id = fresh_id("t1");
    let mut rec = record(&id, T0);
    rec.result = Some(OpResult {
        code: 200,
        body: (0..1 << 20).map(|i| (i % 251) as u8).collect(),
        content_type: "application/octet-stream".into(),
        metadata: (0..32)
            .map(|i| (format!("m{i}"), "v".repeat(1024)))
            .collect(),
    });
    store.insert_if_absent(&rec, T0).await.unwrap();
    assert_eq!(store.get(&id, T0).await.unwrap(), Some(rec.clone()));
    let brief = store.get_brief(&id, T0).await.unwrap().unwrap();
    assert_eq!(brief.result, rec.result);

    // Counters only (a dedup hit's write), then a different outcome, then none.
    let mut hit = rec.clone();
    hit.version += 1;
    hit.dedup_hits += 1;
    assert_eq!(
        store
            .replace_if_version(&hit, rec.version, false, T0)
            .await
            .unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, T0).await.unwrap(), Some(hit.clone()));
    let mut failed = hit.clone();
    failed.version += 1;
    failed.result = None;
    failed.error = Some(OpError {
        code: 13,
        message: "gateway said no".into(),
        details: vec![7; 64 << 10],
    });
    assert_eq!(
        store
            .replace_if_version(&failed, hit.version, true, T0)
            .await
            .unwrap(),
        Cas::Applied
    );
    assert_eq!(
        store.insert_if_absent(&rec, T0).await.unwrap(),
        Cas::Conflict(Some(failed.clone()))
    );
    let mut small = failed.clone();
    small.version += 1;
    small.error = None;
    assert_eq!(
        store
            .replace_if_version(&small, failed.version, true, T0)
            .await
            .unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, T0).await.unwrap(), Some(small.clone()));
    assert_eq!(
        store
            .delete_if_version(&id, small.version, T0)
            .await
            .unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&id, T0).await.unwrap(), None);
}
