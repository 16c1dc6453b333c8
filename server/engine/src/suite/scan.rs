//! `Store::scan`: every tenant's live records, page after page, each exactly once, whatever the
//! page size; a deleted record is not met.

use super::{record, T0};
use oncekey_ledger::RecordId;
use oncekey_store::{Cas, Store};
use std::collections::BTreeSet;

/// Records of three tenants in two namespaces, one of them deleted, scanned in pages of every
/// size from 1 to one more than there are records.
pub async fn scan_pages_through_every_tenants_records_once<S: Store>(store: S) {
    // Tenants of this run only, should the store hold others' records.
    let run = format!("{:08x}", rand::random::<u32>());
    let mut written = BTreeSet::new();
    for (tenant, count) in [("scan-a", 4), ("scan-b", 3), ("scan-c", 2)] {
        for i in 0..count {
            let namespace = ["x.ns", "y.ns"][i % 2];
            let id = RecordId::new(format!("{tenant}-{run}"), namespace, format!("k-{i}"));
            let inserted = store.insert_if_absent(&record(&id, T0), T0).await;
            assert_eq!(inserted.unwrap(), Cas::Applied);
            written.insert(id);
        }
    }
    let gone = written.pop_first().expect("records");
    let deleted = store.delete_if_version(&gone, 1, T0).await;
    assert_eq!(deleted.unwrap(), Cas::Applied);
    for limit in 1..=written.len() + 1 {
        let (mut seen, mut after) = (Vec::new(), None::<Vec<u8>>);
        for pages in 0.. {
            assert!(pages <= 10_000, "pages of {limit}: no end");
            let page = store.scan(after.as_deref(), limit, T0).await.unwrap();
            assert!(page.ids.len() <= limit, "pages of {limit}: {page:?}");
            seen.extend(page.ids);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let unique: BTreeSet<RecordId> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "pages of {limit}: {seen:?}");
        let ours: BTreeSet<RecordId> = unique
            .into_iter()
            .filter(|id| id.tenant.ends_with(&run))
            .collect();
        assert_eq!(ours, written, "pages of {limit}");
    }
}
