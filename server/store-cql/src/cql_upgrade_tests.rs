//! Migration 0002 against a real node: a keyspace where it stopped half-way migrates again, and
//! rows written before it (by a server that knew only 0001) read as records without a gate, a cap
//! or a decision.

use super::cql_tests::{cql_args, fresh_keyspace, fresh_store, migrate_args, now_ms};
use super::*;
use oncekey_ledger::Status;
use std::time::Duration;

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_migration_stopped_half_way_runs_again() {
    let keyspace = fresh_keyspace();
    migrate::run(&migrate_args(&keyspace)).await.unwrap();
    // As if the migrator had stopped after adding the columns but before recording 0002: the
    // claim is gone, and the next migrator runs the file again over columns that exist.
    let store = CqlStore::connect(&cql_args(&keyspace)).await.unwrap();
    store
        .session()
        .query_unpaged(
            format!("DELETE FROM {keyspace}.schema_migrations WHERE version = 2 IF EXISTS"),
            (),
        )
        .await
        .unwrap();
    let again = migrate::run(&migrate_args(&keyspace)).await.unwrap();
    // Only 0002 runs again; every other migration stays applied.
    assert!(
        again.iter().any(|o| o.name == "0002_operations"),
        "{again:?}"
    );
    for o in &again {
        assert_eq!(o.applied_now, o.name == "0002_operations", "{again:?}");
    }
    CqlStore::connect(&cql_args(&keyspace)).await.unwrap();
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn rows_written_before_0002_read_without_gate_cap_or_decision() {
    let (store, keyspace) = fresh_store().await;
    let now = now_ms();
    let id = RecordId::new("t", "cql.ns", format!("old-{}", rand::random::<u64>()));
    // What a server that knew only migration 0001 wrote: none of the 0002 columns.
    let text = format!(
        "INSERT INTO {keyspace}.records (tenant, namespace, key, version, status, fingerprint, \
         semantics, fencing_token, attempt, dedup_hits, lease_owner, lease_expires_at, \
         created_at, updated_at, expires_at, retention_ms, history) \
         VALUES (?, ?, ?, 3, 'RETRY', ?, 'AT_LEAST_ONCE', 2, 2, 0, 'old', null, ?, ?, ?, 60000, \
         0x) IF NOT EXISTS USING TTL 60"
    );
    let mut values = codec::key_values(&id).to_vec();
    values.push(Some(CqlValue::Blob(vec![7; 32])));
    values.push(Some(codec::timestamp(now)));
    values.push(Some(codec::timestamp(now)));
    values.push(Some(codec::timestamp(now + 60_000)));
    store.session().query_unpaged(text, values).await.unwrap();
    let record = store.get(&id, now).await.unwrap().expect("the old row");
    assert_eq!((record.status, record.attempt), (Status::Retry, 2));
    assert!(!record.require_approval);
    assert_eq!((record.max_attempts, record.reconciliations), (0, 0));
    assert_eq!(record.approval, None);
}

/// A migrator whose claim statement timed out proposes it again; when the re-proposal finds the
/// row taken, the row may be its own earlier copy's. It must recognise itself as the owner and
/// run the migration, not wait for its own claim to grow stale (two minutes) and take it over.
#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_claim_whose_earlier_copy_applied_is_recognised() {
    let keyspace = fresh_keyspace();
    migrate::run(&migrate_args(&keyspace)).await.unwrap();
    let store = CqlStore::connect(&cql_args(&keyspace)).await.unwrap();
    // As if this migrator's claim of the last migration had applied while its answer was lost.
    let last = migrate::MIGRATIONS.last().unwrap();
    store
        .session()
        .query_unpaged(
            format!(
                "UPDATE {keyspace}.schema_migrations SET applied_at = null, owner = 'me', \
                 started_at = toTimestamp(now()) WHERE version = {} IF EXISTS",
                last.version
            ),
            (),
        )
        .await
        .unwrap();
    let applied = tokio::time::timeout(
        Duration::from_secs(60),
        migrate::apply_claimed_by(&store.session(), &keyspace, last, "me"),
    )
    .await
    .expect("the migrator recognises its own claim instead of waiting for it to grow stale")
    .unwrap();
    assert!(applied, "this migrator applied it");
    migrate::check_applied(&store.session(), &keyspace)
        .await
        .unwrap();
}
