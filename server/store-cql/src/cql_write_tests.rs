//! Tests of the CQL store's conditional writes against a real node (see `tests` for the node):
//! uncertain outcomes settled truthfully, and dedup-hit writes that never touch the outcome.

use super::cql_tests::*;
use super::*;
use errors::Failure;
use oncekey_ledger::OpResult;
use scylla::statement::batch::Batch;
use scylla::value::Row;
use std::time::Duration;

/// `store` with a driver that gives up on the first copy of each conditional write after
/// `timeout` (re-proposals wait as long as ever).
fn impatient(store: &CqlStore, timeout: Duration) -> CqlStore {
    let st = &store.statements;
    let cut_batch = |b: &Batch| {
        let mut b = b.clone();
        b.set_request_timeout(Some(timeout));
        b
    };
    CqlStore {
        sessions: store.sessions.clone(),
        statements: Arc::new(Statements {
            read: st.read.clone(),
            read_serial: st.read_serial.clone(),
            insert: cut_batch(&st.insert),
            insert_kept: cut_batch(&st.insert_kept),
            replace: cut_batch(&st.replace),
            replace_hits: cut_batch(&st.replace_hits),
            overwrite: cut_batch(&st.overwrite),
            delete: {
                let mut delete = st.delete.clone();
                delete.set_request_timeout(Some(timeout));
                delete
            },
            scan_from: st.scan_from.clone(),
            scan_after: st.scan_after.clone(),
        }),
        index: store.index.clone(),
        page_token_key: store.page_token_key,
    }
}

/// Real uncertain outcomes: the driver gives up on conditional writes at once (timeout 0: the
/// request may or may not have left) or after 1 ms (it usually reached the node, which goes on
/// with it). The store proposes them again; whatever it answers must be the truth, for good.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn uncertain_writes_are_settled_truthfully() {
    let (store, _) = fresh_store().await;
    let impatient = |timeout| impatient(&store, timeout);
    let stores = [
        impatient(Duration::ZERO),
        impatient(Duration::from_millis(1)),
    ];
    let now = now_ms();
    // The setup really produces unknown outcomes.
    let rec = new_record(now, 60_000);
    let mut values = codec::key_values(&rec.id).to_vec();
    values.extend(codec::column_values(&rec, [0; 16]));
    values.push(Some(CqlValue::Int(60)));
    let mark = codec::mark_values(&rec, [0; 16], 60);
    let answer = stores[0]
        .session()
        .batch(&stores[0].statements.insert, vec![values, mark])
        .await;
    let e = answer.expect_err("a write with timeout 0 times out");
    assert!(matches!(errors::classify(&e), Failure::MaybeRan(_)), "{e}");

    let settle = || tokio::time::sleep(Duration::from_millis(200));
    let (mut applied, mut unknown) = (0, 0);
    for i in 0..12 {
        let flaky = &stores[i % 2];
        // Both kinds of insert: the plain one and the batch of a record kept until it settles.
        let rec = match i % 4 < 2 {
            true => new_record(now, 60_000),
            false => new_kept_record(now, 60_000),
        };
        match flaky.insert_if_absent(&rec, now).await {
            Ok(Cas::Applied) => {}
            Ok(Cas::Conflict(found)) => panic!("nobody else writes this key: {found:?}"),
            Err(StoreError::Unavailable(_)) => {
                unknown += 1;
                continue;
            }
            Err(e) => panic!("{e}"),
        }
        let mut next = rec.clone();
        next.version = 2;
        next.dedup_hits = 1;
        let expected = match flaky.replace_if_version(&next, 1, true, now).await {
            Ok(Cas::Applied) => {
                applied += 1;
                next
            }
            Ok(Cas::Conflict(current)) => panic!("nobody else writes this key: {current:?}"),
            Err(StoreError::Unavailable(_)) => {
                unknown += 1;
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        settle().await;
        assert_eq!(store.get(&expected.id, now).await.unwrap(), Some(expected));
    }
    eprintln!("{applied} of 12 uncertain replaces applied, {unknown} unknown");
    assert!(applied >= 6, "re-proposals should mostly get an answer");
}

/// Dedup hits' writes racing on one row, each first sent with a timeout that leaves its outcome
/// unknown: the store settles every one (`Patience::Settled`), so an error means the write did not
/// apply, and the stored counter is exactly the number of writes answered `Applied` — the engine's
/// flush writes hits again after an error, and an unknown outcome reported as an error counted
/// them twice (two servers' flushes on a busy three-node cluster did). Every writer's first copy
/// is cut, so none races ahead through the slots of `codec::WRITE_MARKS` while another settles.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn racing_hit_writes_with_unknown_outcomes_count_exactly() {
    let (store, _) = fresh_store().await;
    let now = now_ms();
    let rec = new_record(now, 60_000);
    store.insert_if_absent(&rec, now).await.unwrap();
    let writers = [(); 8].map(|_| {
        let flaky = impatient(&store, Duration::ZERO);
        let id = rec.id.clone();
        tokio::spawn(async move {
            let (mut applied, mut failed) = (0u64, 0u64);
            while applied < 6 {
                // A serial read is a Paxos round too, and times out as often under the race.
                let Ok(found) = flaky.read_serial(&id).await else {
                    continue;
                };
                let current = found.live(now).expect("the record lives");
                let mut next = current.clone();
                next.version += 1;
                next.dedup_hits += 1;
                match flaky
                    .replace_if_version(&next, current.version, false, now)
                    .await
                {
                    Ok(Cas::Applied) => applied += 1,
                    Ok(Cas::Conflict(_)) => {}
                    Err(StoreError::Unavailable(_)) => failed += 1,
                    Err(e) => panic!("{e}"),
                }
            }
            (applied, failed)
        })
    });
    let (mut applied, mut failed) = (0, 0);
    for writer in writers {
        let (a, f) = writer.await.unwrap();
        (applied, failed) = (applied + a, failed + f);
    }
    let stored = store.read_serial(&rec.id).await.unwrap().record.unwrap();
    eprintln!("{applied} hit writes applied, {failed} failed");
    assert_eq!(
        (stored.dedup_hits, stored.version),
        (applied, rec.version + applied)
    );
}

/// A dedup hit's write (`durable == false`) sets only the hit's columns: the stored result is not
/// written again (its write time stays), while the counter's moves on.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_hit_write_leaves_the_outcome_alone() {
    let (store, keyspace) = fresh_store().await;
    let now = now_ms();
    let mut rec = new_record(now, 60_000);
    rec.result = Some(OpResult {
        code: 200,
        body: vec![5; 100_000],
        ..OpResult::default()
    });
    store.insert_if_absent(&rec, now).await.unwrap();
    let write_times = || async {
        let text = format!(
            "SELECT WRITETIME(result_body), WRITETIME(dedup_hits) FROM {keyspace}.records \
             WHERE tenant = ? AND namespace = ? AND key = ?"
        );
        let result = store
            .session()
            .query_unpaged(text, codec::key_values(&rec.id).to_vec())
            .await
            .unwrap()
            .into_rows_result()
            .unwrap();
        let (body, hits) = result.first_row::<(i64, i64)>().unwrap();
        (body, hits)
    };
    let (body_before, hits_before) = write_times().await;
    let mut hit = rec.clone();
    hit.version += 1;
    hit.dedup_hits += 3;
    let write = store.replace_if_version(&hit, rec.version, false, now);
    assert_eq!(write.await.unwrap(), Cas::Applied);
    let (body_after, hits_after) = write_times().await;
    assert_eq!(body_after, body_before, "the result was written again");
    assert!(hits_after > hits_before, "{hits_after} <= {hits_before}");
    assert_eq!(store.get(&rec.id, now).await.unwrap(), Some(hit));
}

/// The cells of a full write and of a later dedup hit's write expire up to a second apart: a row
/// that kept only the hit's columns is an expired record — absent, and claimable again — never a
/// corrupt one.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_row_left_with_only_hit_columns_counts_as_absent() {
    let (store, _) = fresh_store().await;
    // The record lives two seconds, and the hit's write must land within them: on a loaded
    // cluster an LWT can take longer (its cells are gone by then: `Conflict(None)`, truthfully),
    // so the scenario is tried again with a fresh key.
    let mut tries = 0;
    let (rec, hit) = loop {
        tries += 1;
        let now = now_ms();
        let mut rec = new_record(now, 60_000);
        rec.expires_at = Some(now + 2_000);
        store.insert_if_absent(&rec, now).await.unwrap();
        // The hit's cells outlive the record's (by up to a second in real life; by eight here,
        // so that the second-granular TTLs leave no doubt which cells are gone after the sleep).
        let mut hit = rec.clone();
        hit.version += 1;
        hit.dedup_hits += 1;
        hit.expires_at = Some(now + 10_000);
        match store
            .replace_if_version(&hit, rec.version, false, now)
            .await
        {
            Ok(Cas::Applied) => break (rec, hit),
            Ok(Cas::Conflict(None)) if tries < 3 && now_ms() > now + 1_000 => {
                eprintln!("the hit's write took over a second: trying again");
            }
            other => panic!("{other:?}"),
        }
    };
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    let later = now_ms();
    let found = store.read_serial(&rec.id).await.unwrap();
    assert_eq!(
        found.version,
        Some(hit.version),
        "the hit's cells are still there"
    );
    assert_eq!(found.record, None);
    assert_eq!(store.get(&rec.id, later).await.unwrap(), None);
    let mut again = new_record(later, 60_000);
    again.id = rec.id.clone();
    assert_eq!(
        store.insert_if_absent(&again, later).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&rec.id, later).await.unwrap(), Some(again));
}

/// Cassandra can answer a conditional write "not applied" although it applied: another
/// coordinator's Paxos round completed the write's accepted proposal before running its own, and
/// the write's own round, retried, then found the condition failed. By the time the store reads
/// the row, a further write may have followed. Played with real writes: a write applies, another
/// follows, and the identical write proposed again is answered "not applied"; the store must
/// still know it for its own — a dedup hit's write followed by a Complete (else its hits are
/// written twice), a full write followed by a dedup hit's (else the Claim that created a record
/// is answered IN_PROGRESS), and a full write followed by another (else a Fail that applied is
/// answered LEASE_LOST once another server's Claim took the key over).
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_write_followed_by_another_still_knows_it_applied() {
    let (store, _) = fresh_store().await;
    let now = now_ms();
    let rec = new_record(now, 60_000);
    store.insert_if_absent(&rec, now).await.unwrap();
    // The answer to one copy of the write: applied or not, as `applied` says, and then settled.
    let own = |written: Written, applied: bool| {
        assert_eq!(written_applied(&written), applied, "the copy's [applied]");
        store.answer(written, &rec.id, Mine::Write(WRITE), now)
    };
    const WRITE: [u8; 16] = [9; 16];

    // A dedup hit's write, then a full write decided on its version.
    let mut hit = rec.clone();
    hit.version += 1;
    hit.dedup_hits += 1;
    let propose_hit = || {
        store.propose(
            store.replacing(&hit, rec.version, false, WRITE, now),
            Patience::Settled,
        )
    };
    let first = propose_hit().await.unwrap();
    assert_eq!(own(first, true).await.unwrap(), Cas::Applied);
    let mut settled = hit.clone();
    settled.version += 1;
    settled.lease_owner = "after the hit".into();
    let follow = store.replace_if_version(&settled, hit.version, true, now);
    assert_eq!(follow.await.unwrap(), Cas::Applied);
    let again = propose_hit().await.unwrap();
    assert_eq!(
        own(again, false).await.unwrap(),
        Cas::Applied,
        "a hit write followed by a full write is still known as applied"
    );

    // A full write, then a dedup hit's write decided on its version.
    let mut full = settled.clone();
    full.version += 1;
    full.lease_owner = "full".into();
    let propose_full = || {
        store.propose(
            store.replacing(&full, settled.version, true, WRITE, now),
            Patience::Bounded,
        )
    };
    let first = propose_full().await.unwrap();
    assert_eq!(own(first, true).await.unwrap(), Cas::Applied);
    let mut next_hit = full.clone();
    next_hit.version += 1;
    next_hit.dedup_hits += 1;
    let follow = store.replace_if_version(&next_hit, full.version, false, now);
    assert_eq!(follow.await.unwrap(), Cas::Applied);
    let again = propose_full().await.unwrap();
    assert_eq!(
        own(again, false).await.unwrap(),
        Cas::Applied,
        "a full write followed by a hit write is still known as applied"
    );

    // A full write, then another full write decided on its version.
    let mut failed = next_hit.clone();
    failed.version += 1;
    failed.lease_owner = "failed".into();
    let propose_fail = || {
        store.propose(
            store.replacing(&failed, next_hit.version, true, WRITE, now),
            Patience::Bounded,
        )
    };
    let first = propose_fail().await.unwrap();
    assert_eq!(own(first, true).await.unwrap(), Cas::Applied);
    let mut taken_over = failed.clone();
    taken_over.version += 1;
    taken_over.lease_owner = "another server's Claim".into();
    let follow = store.replace_if_version(&taken_over, failed.version, true, now);
    assert_eq!(follow.await.unwrap(), Cas::Applied);
    let again = propose_fail().await.unwrap();
    assert_eq!(
        own(again, false).await.unwrap(),
        Cas::Applied,
        "a full write followed by another full write is still known as applied"
    );
    assert_eq!(store.get(&rec.id, now).await.unwrap(), Some(taken_over));
}

/// Whether a conditional write's answer says it applied.
fn written_applied(written: &Written) -> bool {
    let rows = written.result.clone().into_rows_result().unwrap();
    let (index, _) = rows.column_specs().get_by_name("[applied]").unwrap();
    let row = rows.rows::<Row>().unwrap().next().unwrap().unwrap();
    matches!(row.columns[index], Some(CqlValue::Boolean(true)))
}
