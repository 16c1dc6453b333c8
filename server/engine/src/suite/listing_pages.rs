//! Where a listing ends (AIP-158): the page that holds the last record has no next page token,
//! also when it is exactly full, whatever the filter and page size; an empty listing is one
//! empty page without a token.

use super::listing::{args, filter, parent, tenant, LEASE};
use super::T0;
use crate::{Clock, Engine};
use oncekey_ledger::{ListFilter, OpResult, RecordId, Semantics, Status};
use oncekey_store::Store;

/// Pages of every size from 1 to one more than there are records, through five filters: every
/// page has records, and only the last one (which holds the last record) has no `next`.
pub async fn list_the_page_with_the_last_record_ends_the_listing<S: Store>(store: S) {
    let clock = Clock::manual(T0);
    let engine = Engine::new(store, clock.clone());
    let tenant = tenant();
    // Six records: in two namespaces, three of them children of flow f1, three completed.
    for i in 0..6 {
        let id = RecordId::new(tenant.clone(), ["a", "b"][i % 2], format!("k{i}"));
        let parent = (i < 3).then(|| parent("f1"));
        let claimed = engine
            .claim(&id, &args(Semantics::AtLeastOnce, parent), None)
            .await
            .unwrap();
        if i % 2 == 0 {
            let token = claimed.lease.unwrap().token;
            engine
                .complete(&id, token, &OpResult::default())
                .await
                .unwrap();
        }
    }
    // Settled long enough to be listed under its status by every store; no lease lapses.
    clock.advance(LEASE / 2);
    let filters: [(ListFilter, usize); 5] = [
        (ListFilter::default(), 6),
        (filter(None, &[Status::Succeeded], None), 3),
        (
            filter(None, &[Status::Processing, Status::Succeeded], None),
            6,
        ),
        (filter(None, &[], Some(parent("f1"))), 3),
        (filter(Some("b"), &[], None), 3),
    ];
    for (filter, count) in &filters {
        for limit in 1..=count + 1 {
            let mut after: Option<Vec<u8>> = None;
            let mut listed = 0;
            for page_number in 0.. {
                assert!(
                    page_number <= *count,
                    "{filter:?}, pages of {limit}: no end"
                );
                let page = engine
                    .list(&tenant, filter, after.as_deref(), limit)
                    .await
                    .unwrap();
                assert!(
                    !page.records.is_empty(),
                    "{filter:?}, pages of {limit}: an empty page after {listed} records"
                );
                listed += page.records.len();
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            assert_eq!(listed, *count, "{filter:?}, pages of {limit}");
        }
    }
    let nobody = engine
        .list("no-such-tenant", &ListFilter::default(), None, 10)
        .await
        .unwrap();
    assert!(nobody.records.is_empty() && nobody.next.is_none());
}
