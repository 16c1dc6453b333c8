//! Tests of the CQL store against a real node, never a mock: the shared store suite plus the
//! CQL-specific paths (row markers, settling uncertain writes, migrate, startup errors).
//!
//! The node is `$ONCEKEY_TEST_CQL_NODES` when set, else started once per test process with
//! `scripts/cassandra start` (a no-op when it runs already); if it cannot start, every test fails
//! with the script's output: nothing is skipped. A plain `cargo test` lists these tests as
//! ignored: `scripts/test cql` runs them. On a cluster (`scripts/test cluster`)
//! `$ONCEKEY_TEST_CQL_NODES` lists several contact points, comma-separated, and
//! `$ONCEKEY_TEST_CQL_REPLICATION` (e.g. `SimpleStrategy:3`) says how the test keyspaces
//! replicate.
//! Each test gets its own keyspace, so tests run in parallel and need no teardown; keyspaces that
//! earlier runs left behind are dropped once they are ten minutes old (a node holding hundreds of
//! tables slows down).

use super::*;
use migrate::MigrateConfig;
use oncekey_ledger::{OpError, OpResult, ParentRef, Semantics};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The shared test node (the harness starts it if the test command did not).
fn node() -> &'static str {
    oncekey_tests::cql_node()
}

pub(super) fn cql_args(keyspace: &str) -> CqlConfig {
    let nodes: Vec<&str> = node().split(',').collect();
    CqlConfig::new(&nodes, keyspace)
}

pub(super) fn migrate_args(keyspace: &str) -> MigrateConfig {
    MigrateConfig {
        cql: cql_args(keyspace),
        replication: Some(
            migrate::parse_replication(&oncekey_tests::cql::test_replication()).unwrap(),
        ),
    }
}

/// A keyspace name no other test uses (the harness's one generator).
pub(super) fn fresh_keyspace() -> String {
    oncekey_tests::cql::keyspace_name()
}

/// Drops the test keyspaces earlier runs left behind (once per process; no test runs that long).
async fn drop_stale_keyspaces(session: &Session) {
    static ONCE: OnceLock<()> = OnceLock::new();
    if ONCE.set(()).is_err() {
        return;
    }
    let Ok(result) = session
        .query_unpaged("SELECT keyspace_name FROM system_schema.keyspaces", ())
        .await
    else {
        return;
    };
    let Ok(rows) = result.into_rows_result() else {
        return;
    };
    let names: Vec<String> = rows
        .rows::<(String,)>()
        .map(|it| it.filter_map(Result::ok).map(|(n,)| n).collect())
        .unwrap_or_default();
    for name in names {
        if oncekey_tests::cql::is_stale_keyspace(&name) {
            let _ = session
                .query_unpaged(format!("DROP KEYSPACE IF EXISTS {name}"), ())
                .await;
        }
    }
}

/// A migrated fresh keyspace and a store on it.
pub(super) async fn fresh_store() -> (CqlStore, String) {
    let keyspace = fresh_keyspace();
    migrate::run(&migrate_args(&keyspace))
        .await
        .unwrap_or_else(|e| panic!("migrate {keyspace}: {e}"));
    let store = CqlStore::connect(&cql_args(&keyspace))
        .await
        .unwrap_or_else(|e| panic!("connect {keyspace}: {e}"));
    drop_stale_keyspaces(&store.session()).await;
    (store, keyspace)
}

oncekey_engine::store_suite!(
    #[ignore = "needs Cassandra: scripts/test cql runs it"]
    cql,
    async { fresh_store().await }
);

pub(super) fn now_ms() -> Millis {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A new at-least-once record (it expires: its row has a TTL).
pub(super) fn new_record(now: Millis, retention: Millis) -> Record {
    claimed(now, retention, Semantics::AtLeastOnce)
}

/// A new at-most-once record (kept until it settles: no TTL).
pub(super) fn new_kept_record(now: Millis, retention: Millis) -> Record {
    claimed(now, retention, Semantics::AtMostOnce)
}

pub(super) fn claimed(now: Millis, retention: Millis, semantics: Semantics) -> Record {
    let id = RecordId::new("t", "cql.ns", format!("k-{}", rand::random::<u64>()));
    let args = oncekey_ledger::ClaimArgs {
        fingerprint: [7; 32],
        lease_ttl: 1_000,
        retention,
        semantics,
        owner: "worker-1".into(),
        parent: Some(ParentRef {
            namespace: "parent.ns".into(),
            key: "parent-key".into(),
        }),
        reconcile: false,
        require_approval: false,
        max_attempts: 0,
        // Every column round-trips, the run budget's blob too.
        budget: Some(oncekey_ledger::Budget::new(
            3,
            [("email.send".to_owned(), 1)].into(),
        )),
    };
    oncekey_ledger::claim(&id, None, &args, now)
        .unwrap()
        .record()
        .clone()
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn every_field_round_trips() {
    let (store, _) = fresh_store().await;
    let now = now_ms();
    let mut rec = new_kept_record(now, 60_000);
    assert_eq!(rec.expires_at, None);
    assert_eq!(
        store.insert_if_absent(&rec, now).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&rec.id, now).await.unwrap(), Some(rec.clone()));
    let mut next = rec.clone();
    next.version = 2;
    next.status = oncekey_ledger::Status::Succeeded;
    next.lease_expires_at = None;
    next.result = Some(OpResult {
        code: 201,
        body: vec![0, 1, 2, 255],
        content_type: "application/octet-stream".into(),
        metadata: [
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), String::new()),
        ]
        .into(),
    });
    next.error = Some(OpError {
        code: 503,
        message: "earlier attempt failed".into(),
        details: vec![9; 10],
    });
    next.dedup_hits = u64::from(u32::MAX) + 5;
    next.expires_at = Some(now + 60_000);
    assert_eq!(
        store.replace_if_version(&next, 1, true, now).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&next.id, now).await.unwrap(), Some(next.clone()));
    // Empty values survive too (empty body, no metadata, empty owner).
    rec.version = 3;
    rec.lease_owner = String::new();
    rec.result = Some(OpResult::default());
    rec.parent = None;
    assert_eq!(
        store.replace_if_version(&rec, 2, true, now).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(store.get(&rec.id, now).await.unwrap(), Some(rec));
}

/// A write that shortens the row's TTL leaves the INSERT's row marker alive after every cell
/// expired: such a row must read as absent and be claimable again.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn row_marker_outliving_its_cells_counts_as_absent() {
    let (store, _) = fresh_store().await;
    let now = now_ms();
    let rec = new_record(now, 3_600_000);
    assert_eq!(
        store.insert_if_absent(&rec, now).await.unwrap(),
        Cas::Applied
    );
    let mut short = rec.clone();
    short.version = 2;
    short.expires_at = Some(now + 1_000);
    assert_eq!(
        store
            .replace_if_version(&short, 1, true, now)
            .await
            .unwrap(),
        Cas::Applied
    );
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let later = now_ms();
    assert_eq!(store.get(&rec.id, later).await.unwrap(), None);
    let found = store.read_serial(&rec.id).await.unwrap();
    assert_eq!((found.version, found.record), (None, None), "cells expired");
    let mut again = new_record(later, 60_000);
    again.id = rec.id.clone();
    assert_eq!(
        store.insert_if_absent(&again, later).await.unwrap(),
        Cas::Applied
    );
    assert_eq!(
        store.get(&rec.id, later).await.unwrap(),
        Some(again.clone())
    );
    assert_eq!(
        store.delete_if_version(&rec.id, 7, later).await.unwrap(),
        Cas::Conflict(Some(again))
    );
}

/// A row still present in the table but past its expires_at is replaced by an insert.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn insert_overwrites_an_expired_row_once() {
    let (store, _) = fresh_store().await;
    let now = now_ms();
    let rec = new_record(now, 60_000);
    store.insert_if_absent(&rec, now).await.unwrap();
    let later = rec.expires_at.unwrap();
    let mut again = new_record(later, 60_000);
    again.id = rec.id.clone();
    assert_eq!(
        store.insert_if_absent(&again, later).await.unwrap(),
        Cas::Applied
    );
    let stored = store.read_serial(&rec.id).await.unwrap();
    assert_eq!(stored.record, Some(again.clone()));
    // A second insert meets the live record.
    assert_eq!(
        store.insert_if_absent(&rec, later).await.unwrap(),
        Cas::Conflict(Some(again))
    );
}

/// When a write finds its condition failed, the store tells whether an earlier copy of the same
/// write (same `write_id`) is what applied.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_reproposal_recognises_its_earlier_copy() {
    let (store, _) = fresh_store().await;
    let now = now_ms();
    let rec = new_record(now, 60_000);
    store.insert_if_absent(&rec, now).await.unwrap();
    let mut next = rec.clone();
    next.version = 2;
    let write_id = [42; 16];
    let replace = || {
        store.propose(
            store.replacing(&next, 1, true, write_id, now),
            Patience::Bounded,
        )
    };
    let first = replace().await.unwrap();
    let mine = Mine::Write(write_id);
    assert_eq!(
        store.answer(first, &rec.id, mine, now).await.unwrap(),
        Cas::Applied
    );
    // The same proposal again: its condition fails because of its own earlier copy, which is
    // recognised by its `write_id` whether or not the store knows it re-proposed (Cassandra
    // answers so on its own when a retried Paxos round completed the write's proposal first).
    let again = replace().await.unwrap();
    assert_eq!(
        store.answer(again, &rec.id, mine, now).await.unwrap(),
        Cas::Applied
    );
    let mut again = replace().await.unwrap();
    again.resent = true;
    assert_eq!(
        store.answer(again, &rec.id, mine, now).await.unwrap(),
        Cas::Applied
    );
    // Another writer's proposal is not mistaken for ours.
    let mut again = replace().await.unwrap();
    again.resent = true;
    let theirs = Mine::Write([7; 16]);
    assert_eq!(
        store.answer(again, &rec.id, theirs, now).await.unwrap(),
        Cas::Conflict(Some(next.clone()))
    );

    // A delete re-proposed after its first copy applied: the record is gone, as proposed.
    let delete = |version: u64| {
        let mut v = codec::key_values(&rec.id).to_vec();
        v.push(codec::big(version));
        v.push(Some(codec::timestamp(now)));
        v
    };
    let mut gone = store
        .write(&store.statements.delete, delete(1))
        .await
        .unwrap();
    gone.resent = true;
    assert_eq!(
        store
            .answer(gone, &rec.id, Mine::Delete, now)
            .await
            .unwrap(),
        Cas::Conflict(Some(next))
    );
    let first = store
        .write(&store.statements.delete, delete(2))
        .await
        .unwrap();
    assert_eq!(
        store
            .answer(first, &rec.id, Mine::Delete, now)
            .await
            .unwrap(),
        Cas::Applied
    );
    let mut again = store
        .write(&store.statements.delete, delete(2))
        .await
        .unwrap();
    again.resent = true;
    assert_eq!(
        store
            .answer(again, &rec.id, Mine::Delete, now)
            .await
            .unwrap(),
        Cas::Applied
    );
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn migrate_twice_is_a_no_op() {
    let keyspace = fresh_keyspace();
    let first = migrate::run(&migrate_args(&keyspace)).await.unwrap();
    assert!(first.iter().all(|o| o.applied_now), "{first:?}");
    let second = migrate::run(&migrate_args(&keyspace)).await.unwrap();
    assert_eq!(second.len(), migrate::MIGRATIONS.len());
    assert!(second.iter().all(|o| !o.applied_now), "{second:?}");
    // Once the keyspace exists, replication is not needed.
    let mut no_replication = migrate_args(&keyspace);
    no_replication.replication = None;
    migrate::run(&no_replication).await.unwrap();
    CqlStore::connect(&cql_args(&keyspace)).await.unwrap();
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn concurrent_migrators_apply_each_version_once() {
    let keyspace = fresh_keyspace();
    let (args_a, args_b) = (migrate_args(&keyspace), migrate_args(&keyspace));
    let (a, b) = tokio::join!(migrate::run(&args_a), migrate::run(&args_b));
    let (a, b) = (a.unwrap(), b.unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.name, y.name);
        assert!(
            x.applied_now ^ y.applied_now,
            "exactly one applied {}: {a:?} {b:?}",
            x.name
        );
    }
    let store = CqlStore::connect(&cql_args(&keyspace)).await.unwrap();
    store.check_ready().await.unwrap();
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn startup_errors_say_what_to_do() {
    let missing = fresh_keyspace();
    let err = CqlStore::connect(&cql_args(&missing)).await.err().unwrap();
    assert_eq!(
        err.to_string(),
        format!("keyspace {missing} has no ledger tables: run `oncekey migrate`")
    );
    let mut no_replication = migrate_args(&missing);
    no_replication.replication = None;
    let err = migrate::run(&no_replication).await.unwrap_err();
    assert!(
        err.is_config() && err.to_string().contains("--cql-replication"),
        "{err}"
    );

    let mut unreachable = cql_args("oncekey");
    unreachable.nodes = vec!["127.0.0.1:1".into()];
    let err = CqlStore::connect(&unreachable).await.err().unwrap();
    assert!(
        err.to_string().starts_with("--cql-nodes 127.0.0.1:1: "),
        "{err}"
    );
}
