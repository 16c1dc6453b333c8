//! Listing while records change: records that move between two pages of a walk, and records
//! that are gone (expired, deleted) but may still have index entries.

use super::listing::{all_pages, args, filter, keys, tenant};
use super::T0;
use crate::{Clock, Engine};
use oncekey_ledger::{ClaimArgs, ListFilter, OpResult, RecordId, Semantics, Status};
use oncekey_store::{Cas, Store};
use std::collections::{BTreeMap, BTreeSet};

/// A walk whose records are completed between its pages: under the PROCESSING filter each
/// record shows at most once and only while PROCESSING, and every record that stayed PROCESSING
/// shows exactly once; with no filter every record shows, under the status it had when its page
/// was read (a moved one possibly twice: PROCESSING, then SUCCEEDED).
pub async fn list_walks_on_while_records_change<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let processing = filter(None, &[Status::Processing], None);
    for f in [processing.clone(), ListFilter::default()] {
        let tenant = tenant();
        let ids: Vec<RecordId> = (0..40)
            .map(|i| RecordId::new(&tenant, "moves", format!("k{i:02}")))
            .collect();
        for id in &ids {
            let a = args(Semantics::AtLeastOnce, None);
            engine.claim(id, &a, None).await.unwrap();
        }
        let mut seen: BTreeMap<RecordId, Vec<Status>> = BTreeMap::new();
        let mut moved = BTreeSet::new();
        let mut after: Option<Vec<u8>> = None;
        for pages in 0.. {
            assert!(pages < 1000, "the walk never ended");
            let page = engine.list(&tenant, &f, after.as_deref(), 4).await.unwrap();
            for r in &page.records {
                assert!(
                    f.matches(r, engine.clock().now()),
                    "{:?}: {:?}",
                    r.id,
                    r.status
                );
                seen.entry(r.id.clone()).or_default().push(r.status);
            }
            // Between pages: complete two records no page showed yet, and one this page did.
            let unseen = ids
                .iter()
                .filter(|id| !seen.contains_key(*id) && !moved.contains(*id))
                .take(2);
            let shown = page
                .records
                .iter()
                .map(|r| &r.id)
                .find(|id| !moved.contains(*id));
            let now_moving: Vec<RecordId> = unseen.chain(shown).cloned().collect();
            for id in now_moving {
                let done = engine.complete(&id, 1, &OpResult::default()).await;
                assert_eq!(done.unwrap().status, Status::Succeeded);
                moved.insert(id);
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert!(moved.len() > 10, "{} moved", moved.len());
        for id in &ids {
            let shown = seen.get(id).map(Vec::as_slice).unwrap_or_default();
            let ok = if f == processing {
                match moved.contains(id) {
                    true => shown.is_empty() || shown == [Status::Processing],
                    false => shown == [Status::Processing],
                }
            } else {
                [
                    &[Status::Processing][..],
                    &[Status::Succeeded],
                    &[Status::Processing, Status::Succeeded],
                ]
                .contains(&shown)
            };
            assert!(
                ok,
                "{id:?} (moved: {}) listed {shown:?}",
                moved.contains(id)
            );
        }
        // Once the changes are done, a new walk sees each record once, as it is.
        let stayed: BTreeSet<_> = ids
            .iter()
            .filter(|id| !moved.contains(*id))
            .map(|id| (id.namespace.clone(), id.key.clone()))
            .collect();
        assert_eq!(
            keys(&all_pages(&engine, &tenant, &processing, 7).await),
            stayed
        );
    }
}

/// Records that are gone — expired (whether or not swept), deleted, abandoned — are never
/// listed, under any filter, nor counted as needing attention.
pub async fn list_never_shows_a_gone_record<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let tenant = tenant();
    let short = ClaimArgs {
        retention: 60_000,
        ..args(Semantics::AtLeastOnce, None)
    };
    let id = |key: &str| RecordId::new(&tenant, "gone", key);
    let (expired, deleted, kept) = (id("expired"), id("deleted"), id("kept"));
    let lapsed = id("lapsed");
    for key in [&expired, &deleted, &lapsed] {
        engine.claim(key, &short, None).await.unwrap();
    }
    // `kept` has a long retention: it outlives the others.
    let long = args(Semantics::AtLeastOnce, None);
    engine.claim(&kept, &long, None).await.unwrap();
    for key in [&expired, &deleted, &kept] {
        engine.complete(key, 1, &OpResult::default()).await.unwrap();
    }
    let record = engine.lookup(&deleted).await.unwrap();
    let cas = engine
        .store()
        .delete_if_version(&deleted, record.version, clock.now())
        .await;
    assert_eq!(cas.unwrap(), Cas::Applied);
    let everything = [
        ListFilter::default(),
        filter(None, &[Status::Succeeded], None),
        filter(None, &[Status::Processing, Status::Unknown], None),
        filter(Some("gone"), &[], None),
    ];
    let listed = keys(&all_pages(&engine, &tenant, &everything[0], 10).await);
    let k = |r: &RecordId| (r.namespace.clone(), r.key.clone());
    assert_eq!(listed, [&expired, &kept, &lapsed].map(k).into());
    // Past the short retention (and the lapsed at-least-once lease's retention after it).
    clock.advance(2 * 60_000 + 30_000 + 1);
    let counts = engine.attention().await.unwrap();
    assert_eq!(counts.processing_lapsed, 0, "{counts:?}");
    for f in &everything {
        let listed = all_pages(&engine, &tenant, f, 10).await;
        assert!(
            listed.iter().all(|r| r.id == kept),
            "{f:?}: {:?}",
            listed.iter().map(|r| &r.id).collect::<Vec<_>>()
        );
    }
    // The sweeper's removals change nothing in what is listed.
    engine
        .store()
        .sweep_expired(clock.now(), 100)
        .await
        .unwrap();
    let listed = keys(&all_pages(&engine, &tenant, &everything[0], 10).await);
    assert_eq!(listed, [k(&kept)].into());
}
