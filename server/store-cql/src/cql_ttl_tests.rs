//! The CQL store's row TTLs against a real node: a record kept until it settles is stored
//! without TTL, and the write that settles it leaves nothing of the record behind once it
//! expires.

use super::cql_tests::{fresh_store, new_kept_record, now_ms};
use super::*;
use oncekey_ledger::OpResult;
use std::time::Duration;

/// The TTLs of a row's cells, by column (`None`: no TTL), or `None` when the row is gone whole
/// (not even its primary key is left).
async fn cell_ttls(store: &CqlStore, keyspace: &str, id: &RecordId) -> Option<Vec<Option<i32>>> {
    let text = format!(
        "SELECT key, TTL(status), TTL(version), TTL(dedup_hits), TTL(expires_at) \
         FROM {keyspace}.records WHERE tenant = ? AND namespace = ? AND key = ?"
    );
    let rows = store
        .session()
        .query_unpaged(text, codec::key_values(id).to_vec())
        .await
        .unwrap()
        .into_rows_result()
        .unwrap();
    let row = rows
        .maybe_first_row::<(String, Option<i32>, Option<i32>, Option<i32>, Option<i32>)>()
        .unwrap()?;
    Some(vec![row.1, row.2, row.3, row.4])
}

/// An unsettled at-most-once record is stored without TTL (and with no row marker of its own
/// that could outlive it); the write that settles it gives every cell the record's retention, and
/// after that nothing of the record is left.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_record_kept_until_it_settles_has_no_ttl_and_leaves_no_row_behind() {
    let (store, keyspace) = fresh_store().await;
    let now = now_ms();
    let rec = new_kept_record(now, 2_000);
    assert_eq!(rec.expires_at, None);
    assert_eq!(
        store.insert_if_absent(&rec, now).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(
        cell_ttls(&store, &keyspace, &rec.id).await,
        Some(vec![None; 4]),
        "no TTL on any cell"
    );
    // The batch's failed condition answers with the record, like a plain insert.
    let mut other = new_kept_record(now, 2_000);
    other.id = rec.id.clone();
    assert_eq!(
        store.insert_if_absent(&other, now).await.unwrap(),
        Cas::Conflict(Some(rec.clone()))
    );
    // Its row marker's short TTL ran out; the cells keep the record, far past its retention.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let later = now + 1_000 * 2_000;
    assert_eq!(store.get(&rec.id, later).await.unwrap(), Some(rec.clone()));
    let mut hit = rec.clone();
    hit.version += 1;
    hit.dedup_hits += 1;
    let write = store.replace_if_version(&hit, rec.version, false, later);
    assert_eq!(write.await.unwrap(), Cas::Applied);
    assert_eq!(
        cell_ttls(&store, &keyspace, &rec.id).await,
        Some(vec![None; 4])
    );

    // Settled: every cell expires with the record, and nothing of the row is left after.
    let settled = now_ms();
    let done = oncekey_ledger::complete(Some(&hit), 1, &OpResult::default(), settled).unwrap();
    let done = done.record.unwrap();
    assert_eq!(done.expires_at, Some(settled + 2_000));
    let write = store.replace_if_version(&done, hit.version, true, settled);
    assert_eq!(write.await.unwrap(), Cas::Applied);
    let ttls = cell_ttls(&store, &keyspace, &rec.id).await.unwrap();
    assert!(
        ttls.iter().all(|t| matches!(t, Some(1..=2))),
        "every cell expires with the record: {ttls:?}"
    );
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    // Nothing of the record is left; earlier writes' nonces (`codec::WRITE_MARKS`) may keep the
    // row's key for at most ten minutes more, and such a row reads as absent.
    let left = cell_ttls(&store, &keyspace, &rec.id).await;
    assert!(
        left.as_ref()
            .is_none_or(|cells| cells.iter().all(Option::is_none)),
        "every cell of the record is gone: {left:?}"
    );
    assert_eq!(store.get(&rec.id, now_ms()).await.unwrap(), None);
    let mut again = new_kept_record(now_ms(), 2_000);
    again.id = rec.id.clone();
    assert_eq!(
        store.insert_if_absent(&again, now_ms()).await.unwrap(),
        Cas::Applied
    );
}
