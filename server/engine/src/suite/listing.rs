//! Listing through the engine: thousands of records paged through, every filter (with the reported
//! status of a lapsed at-most-once record), tenant isolation, and the helpers the other listing
//! suites share. Listing against status (stale index entries, a status held for a while) and the
//! needs-attention counts are in `listing_status`.

use super::T0;
use crate::{Clock, Engine};
use oncekey_ledger::{
    ClaimArgs, ClaimOutcome, Disposition, ListFilter, Millis, OpError, OpResult, ParentRef, Record,
    RecordId, Semantics, Status,
};
use oncekey_store::Store;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub(super) const LEASE: Millis = 30_000;

pub(super) fn args(semantics: Semantics, parent: Option<ParentRef>) -> ClaimArgs {
    ClaimArgs {
        parent,
        ..ClaimArgs::for_test([3; 32], semantics, LEASE, 3_600_000, "suite")
    }
}

pub(super) fn parent(key: &str) -> ParentRef {
    ParentRef {
        namespace: "flows".into(),
        key: key.into(),
    }
}

/// A tenant no other case uses.
pub(super) fn tenant() -> String {
    format!("list-{:08x}", rand::random::<u32>())
}

pub(super) fn filter(
    namespace: Option<&str>,
    statuses: &[Status],
    parent: Option<ParentRef>,
) -> ListFilter {
    ListFilter::new(namespace.map(str::to_owned), statuses.to_vec(), parent)
}

/// Every page of `tenant`'s listing with `filter`, `limit` at a time; checks that no page is
/// larger than asked and that no record comes twice.
pub(super) async fn all_pages<S: Store>(
    engine: &Engine<S>,
    tenant: &str,
    filter: &ListFilter,
    limit: usize,
) -> Vec<Record> {
    let mut records = Vec::new();
    let mut seen = BTreeSet::new();
    let mut after: Option<Vec<u8>> = None;
    for _ in 0..10_000 {
        let page = engine
            .list(tenant, filter, after.as_deref(), limit)
            .await
            .unwrap();
        assert!(
            page.records.len() <= limit,
            "{} > {limit}",
            page.records.len()
        );
        for record in page.records {
            assert_eq!(record.id.tenant, tenant, "another tenant's record listed");
            assert!(
                seen.insert(record.id.clone()),
                "{:?} listed twice",
                record.id
            );
            assert!(
                record.history.is_empty(),
                "a listed record carries its history"
            );
            records.push(record);
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return records,
        }
    }
    panic!("the listing never ended");
}

pub(super) fn keys(records: &[Record]) -> BTreeSet<(String, String)> {
    records
        .iter()
        .map(|r| (r.id.namespace.clone(), r.id.key.clone()))
        .collect()
}

/// 2 500 records in five namespaces, a fifth of them completed: every page walk finds each
/// exactly once, whatever the page size, with and without filters.
pub async fn list_pages_through_thousands_of_records<S: Store>(store: S) {
    const N: usize = 2_500;
    let engine = Arc::new(Engine::new(store, Clock::manual(T0)));
    let tenant = tenant();
    let mut expected: BTreeMap<(String, String), Status> = BTreeMap::new();
    let ids: Vec<RecordId> = (0..N)
        .map(|i| RecordId::new(tenant.clone(), format!("ns{}", i % 5), format!("k{i:05}")))
        .collect();
    for chunk in ids.chunks(100) {
        let tasks: Vec<_> = chunk
            .iter()
            .cloned()
            .map(|id| {
                let engine = engine.clone();
                tokio::spawn(async move {
                    let a = args(Semantics::AtLeastOnce, None);
                    let claim = engine.claim(&id, &a, None).await.unwrap();
                    assert_eq!(claim.outcome, ClaimOutcome::Acquired);
                    let done = id.key.ends_with('0') || id.key.ends_with('5');
                    if done {
                        let token = claim.lease.unwrap().token;
                        engine
                            .complete(&id, token, &OpResult::default())
                            .await
                            .unwrap();
                    }
                    (id, done)
                })
            })
            .collect();
        for task in tasks {
            let (id, done) = task.await.unwrap();
            let status = if done {
                Status::Succeeded
            } else {
                Status::Processing
            };
            expected.insert((id.namespace, id.key), status);
        }
    }
    let all: BTreeSet<_> = expected.keys().cloned().collect();
    for limit in [1000, 333, 100] {
        let listed = all_pages(&engine, &tenant, &ListFilter::default(), limit).await;
        assert_eq!(listed.len(), N, "page size {limit}");
        assert_eq!(keys(&listed), all, "page size {limit}");
        for r in &listed {
            let key = (r.id.namespace.clone(), r.id.key.clone());
            assert_eq!(Some(&r.status), expected.get(&key), "{key:?}");
        }
    }
    let succeeded: BTreeSet<_> = expected
        .iter()
        .filter(|(_, s)| **s == Status::Succeeded)
        .map(|(k, _)| k.clone())
        .collect();
    let listed = all_pages(
        &engine,
        &tenant,
        &filter(None, &[Status::Succeeded], None),
        100,
    )
    .await;
    assert_eq!(keys(&listed), succeeded);
    let in_ns2 = all_pages(
        &engine,
        &tenant,
        &filter(Some("ns2"), &[Status::Processing], None),
        77,
    )
    .await;
    let want: BTreeSet<_> = expected
        .iter()
        .filter(|((ns, _), s)| ns == "ns2" && **s == Status::Processing)
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(keys(&in_ns2), want);
    assert_eq!(want.len(), N / 5, "keys ending in 2 or 7: never completed");
}

/// Every filter — status (each status a record can be reported with), namespace, parent — and
/// their combinations select exactly the matching records.
pub async fn list_filters_by_status_namespace_and_parent<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let tenant = tenant();
    let id = |ns: &str, key: &str| RecordId::new(tenant.clone(), ns, key);
    let alo = |p: Option<ParentRef>| args(Semantics::AtLeastOnce, p);
    let amo = |p: Option<ParentRef>| args(Semantics::AtMostOnce, p);
    let err = OpError {
        code: 500,
        message: "down".into(),
        details: b"trace".to_vec(),
    };
    // payments: one of each status; mail: processing children of flow f1.
    let processing = id("payments", "processing");
    engine
        .claim(&processing, &alo(Some(parent("f1"))), None)
        .await
        .unwrap();
    let succeeded = id("payments", "succeeded");
    engine
        .claim(&succeeded, &alo(Some(parent("f1"))), None)
        .await
        .unwrap();
    let body = OpResult {
        code: 201,
        body: b"receipt".to_vec(),
        ..OpResult::default()
    };
    engine.complete(&succeeded, 1, &body).await.unwrap();
    let failed = id("payments", "failed");
    engine.claim(&failed, &alo(None), None).await.unwrap();
    engine
        .fail(&failed, 1, &err, Disposition::Final)
        .await
        .unwrap();
    let retry = id("payments", "retry");
    engine
        .claim(&retry, &alo(Some(parent("f2"))), None)
        .await
        .unwrap();
    engine
        .fail(&retry, 1, &err, Disposition::Retryable)
        .await
        .unwrap();
    let abandoned = id("payments", "abandoned");
    engine
        .claim(&abandoned, &alo(Some(parent("f1"))), None)
        .await
        .unwrap();
    engine
        .fail(&abandoned, 1, &err, Disposition::Abandon)
        .await
        .unwrap();
    let unknown = id("payments", "unknown-amo");
    engine.claim(&unknown, &amo(None), None).await.unwrap();
    let mail = id("mail", "welcome");
    engine
        .claim(&mail, &alo(Some(parent("f1"))), None)
        .await
        .unwrap();
    // The at-most-once record's lease lapses: reported UNKNOWN without any Claim; the others
    // renewed.
    clock.advance(LEASE - 1);
    for held in [&processing, &mail] {
        engine.renew(held, 1, LEASE).await.unwrap();
    }
    clock.advance(1);
    let select = |f: ListFilter| {
        let engine = &engine;
        let tenant = tenant.clone();
        async move { keys(&all_pages(engine, &tenant, &f, 10).await) }
    };
    let k = |r: &RecordId| (r.namespace.clone(), r.key.clone());
    let set = |ids: &[&RecordId]| ids.iter().map(|r| k(r)).collect::<BTreeSet<_>>();
    assert_eq!(
        select(ListFilter::default()).await,
        set(&[&processing, &succeeded, &failed, &retry, &unknown, &mail]),
        "an empty filter lists everything but the tombstone"
    );
    for (status, want) in [
        (Status::Processing, set(&[&processing, &mail])),
        (Status::Succeeded, set(&[&succeeded])),
        (Status::Failed, set(&[&failed])),
        (Status::Retry, set(&[&retry])),
        (Status::Unknown, set(&[&unknown])),
    ] {
        assert_eq!(
            select(filter(None, &[status], None)).await,
            want,
            "{status:?}"
        );
    }
    assert_eq!(
        select(filter(None, &[Status::Unknown, Status::Retry], None)).await,
        set(&[&unknown, &retry])
    );
    assert_eq!(select(filter(Some("mail"), &[], None)).await, set(&[&mail]));
    assert_eq!(
        select(filter(Some("payments"), &[Status::Processing], None)).await,
        set(&[&processing])
    );
    assert_eq!(
        select(filter(None, &[], Some(parent("f1")))).await,
        set(&[&processing, &succeeded, &mail]),
        "children of f1 (the abandoned one is gone)"
    );
    assert_eq!(
        select(filter(
            Some("payments"),
            &[Status::Processing],
            Some(parent("f1"))
        ))
        .await,
        set(&[&processing])
    );
    assert_eq!(
        select(filter(None, &[], Some(parent("nope")))).await,
        BTreeSet::new()
    );
    // Listed records keep their result and error, less the body and details; no history.
    let listed = all_pages(&engine, &tenant, &ListFilter::default(), 100).await;
    for r in &listed {
        if let Some(result) = &r.result {
            assert_eq!(result.code, 201);
            assert!(result.body.is_empty() || result.body == b"receipt");
        }
        if let Some(e) = &r.error {
            assert_eq!(e.message, "down");
        }
    }
}

/// Two tenants with the same namespaces and keys: each lists its own records only, and never
/// sees the other's statuses.
pub async fn list_never_shows_another_tenants_records<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let (a, b) = (tenant(), tenant());
    for i in 0..30 {
        let key = format!("k{i}");
        let claim_a = engine
            .claim(
                &RecordId::new(&a, "shared", &key),
                &args(Semantics::AtLeastOnce, None),
                None,
            )
            .await
            .unwrap();
        assert_eq!(claim_a.outcome, ClaimOutcome::Acquired);
        if i % 3 == 0 {
            let id = RecordId::new(&b, "shared", &key);
            engine
                .claim(&id, &args(Semantics::AtMostOnce, None), None)
                .await
                .unwrap();
            engine.complete(&id, 1, &OpResult::default()).await.unwrap();
        }
    }
    let listed_a = all_pages(&engine, &a, &ListFilter::default(), 7).await;
    let listed_b = all_pages(&engine, &b, &ListFilter::default(), 7).await;
    assert_eq!(listed_a.len(), 30);
    assert_eq!(listed_b.len(), 10);
    assert!(listed_a.iter().all(|r| r.status == Status::Processing));
    assert!(listed_b.iter().all(|r| r.status == Status::Succeeded));
    for (tenant, want) in [(&a, 0), (&b, 10)] {
        let succeeded = filter(Some("shared"), &[Status::Succeeded], None);
        let n = all_pages(&engine, tenant, &succeeded, 3).await.len();
        assert_eq!(n, want, "{tenant}");
    }
    assert!(all_pages(&engine, &tenant(), &ListFilter::default(), 10)
        .await
        .is_empty());
}
