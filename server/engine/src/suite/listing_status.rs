//! Listing against status: a stale index entry never shows a record under a status it does not
//! have, a status held for a while is listed, and the needs-attention counts.

use super::listing::{all_pages, args, filter, tenant, LEASE};
use super::T0;
use crate::{Clock, Engine};
use oncekey_ledger::{
    AttentionCounts, ClaimArgs, ClaimOutcome, Disposition, ListFilter, OpError, OpResult, RecordId,
    Semantics, Status,
};
use oncekey_store::{Cas, Store};

/// Writes that leave an index entry behind — a transition whose store was not told the record's
/// previous state, a conditional write that lost — never make a record show under a status it
/// does not have, nor twice.
pub async fn list_never_shows_a_stale_entry_under_a_wrong_status<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let tenant = tenant();
    let id = RecordId::new(&tenant, "stale", "k");
    let claimed = engine
        .claim(&id, &args(Semantics::AtLeastOnce, None), None)
        .await
        .unwrap()
        .record;
    let store = engine.store();
    let now = clock.now();
    // Completed through the bare conditional write: the store does not know it was PROCESSING.
    let done = oncekey_ledger::complete(Some(&claimed), 1, &OpResult::default(), now)
        .unwrap()
        .record
        .unwrap();
    let cas = store
        .replace_if_version(&done, claimed.version, true, now)
        .await;
    assert_eq!(cas.unwrap(), Cas::Applied);
    // A Fail decided on the old record loses its conditional write.
    let failed = oncekey_ledger::fail(
        Some(&claimed),
        1,
        &OpError::default(),
        Disposition::Final,
        now,
    )
    .unwrap()
    .record
    .unwrap();
    let lost = store.replace(&failed, &claimed, true, now).await.unwrap();
    assert!(matches!(lost, Cas::Conflict(Some(ref r)) if r.status == Status::Succeeded));
    for _ in 0..2 {
        for status in [Status::Processing, Status::Failed, Status::Unknown] {
            let listed = all_pages(&engine, &tenant, &filter(None, &[status], None), 5).await;
            assert!(listed.is_empty(), "{status:?}: {listed:?}");
        }
        let all = all_pages(&engine, &tenant, &ListFilter::default(), 5).await;
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].status, Status::Succeeded);
        let succeeded = filter(None, &[Status::Succeeded], None);
        assert_eq!(all_pages(&engine, &tenant, &succeeded, 5).await.len(), 1);
        // Readers clean stale entries up meanwhile; the answers stay the same.
        clock.advance(10 * 60_000);
    }
}

/// A record whose status has not changed for 5 s is listed under it, at every step of its life.
pub async fn list_shows_a_status_held_for_5s<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let tenant = tenant();
    let id = RecordId::new(&tenant, "steps", "k");
    let listed_as = |status: Status| {
        let (engine, tenant) = (&engine, tenant.clone());
        async move {
            let f = filter(None, &[status], None);
            all_pages(engine, &tenant, &f, 10).await.len() == 1
        }
    };
    let short = ClaimArgs {
        lease_ttl: 60_000,
        ..args(Semantics::AtLeastOnce, None)
    };
    engine.claim(&id, &short, None).await.unwrap();
    clock.advance(5_000);
    assert!(listed_as(Status::Processing).await);
    let err = OpError::default();
    engine
        .fail(&id, 1, &err, Disposition::Retryable)
        .await
        .unwrap();
    clock.advance(5_000);
    assert!(listed_as(Status::Retry).await && !listed_as(Status::Processing).await);
    engine.claim(&id, &short, None).await.unwrap();
    clock.advance(5_000);
    assert!(listed_as(Status::Processing).await && !listed_as(Status::Retry).await);
    engine.complete(&id, 2, &OpResult::default()).await.unwrap();
    clock.advance(5_000);
    assert!(listed_as(Status::Succeeded).await && !listed_as(Status::Processing).await);
}

/// The needs-attention counts: UNKNOWN as reported (a lapsed at-most-once record, whether or not
/// a Claim came since), AT_LEAST_ONCE PROCESSING with a lapsed lease, and nothing else.
pub async fn attention_counts_what_needs_attention<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let (t1, t2) = (tenant(), tenant());
    let amo = args(Semantics::AtMostOnce, None);
    let alo = args(Semantics::AtLeastOnce, None);
    let lapsed_amo = RecordId::new(&t1, "a", "lapsed-amo");
    let claimed_amo = RecordId::new(&t2, "a", "claimed-amo");
    let lapsed_alo = RecordId::new(&t1, "a", "lapsed-alo");
    let renewed = RecordId::new(&t2, "a", "renewed");
    let done = RecordId::new(&t1, "a", "done");
    for (id, a) in [
        (&lapsed_amo, &amo),
        (&claimed_amo, &amo),
        (&lapsed_alo, &alo),
        (&renewed, &alo),
        (&done, &amo),
    ] {
        engine.claim(id, a, None).await.unwrap();
    }
    engine
        .complete(&done, 1, &OpResult::default())
        .await
        .unwrap();
    assert_eq!(
        engine.attention().await.unwrap(),
        AttentionCounts::default()
    );
    clock.advance(LEASE - 1);
    engine.renew(&renewed, 1, LEASE).await.unwrap();
    clock.advance(1);
    let again = engine.claim(&claimed_amo, &amo, None).await.unwrap();
    assert_eq!(again.outcome, ClaimOutcome::NeedsReconciliation);
    let counts = engine.attention().await.unwrap();
    assert_eq!(
        counts,
        AttentionCounts {
            unknown: 2,
            awaiting_approval: 0,
            processing_lapsed: 1,
        }
    );
    let unknown = filter(None, &[Status::Unknown], None);
    assert_eq!(all_pages(&engine, &t1, &unknown, 10).await.len(), 1);
    assert_eq!(all_pages(&engine, &t2, &unknown, 10).await.len(), 1);
    // Reconciled: no longer needs attention.
    let reconcile = ClaimArgs {
        reconcile: true,
        ..amo.clone()
    };
    let token = engine
        .claim(&lapsed_amo, &reconcile, None)
        .await
        .unwrap()
        .lease
        .unwrap()
        .token;
    engine
        .complete(&lapsed_amo, token, &OpResult::default())
        .await
        .unwrap();
    assert_eq!(engine.attention().await.unwrap().unknown, 1);
}
