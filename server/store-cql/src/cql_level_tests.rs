//! The consistency levels the `--cql-*` settings give the store, checked on the prepared
//! statements and the session's execution profile of a store opened on the real test node (a
//! single node in datacenter `datacenter1`; ignored by a plain `cargo test`, `scripts/test cql`
//! runs them), and the combinations of settings that are refused (no node needed).

use super::cql_tests::{cql_args, fresh_keyspace, migrate_args};
use super::*;
use oncekey_ledger::Millis;
use scylla::statement::{Consistency, SerialConsistency};

/// The test node's datacenter (Cassandra's SimpleSnitch names it so).
const DC: &str = "datacenter1";

async fn store_with(configure: impl FnOnce(&mut CqlConfig)) -> CqlStore {
    let keyspace = fresh_keyspace();
    migrate::run(&migrate_args(&keyspace))
        .await
        .unwrap_or_else(|e| panic!("migrate {keyspace}: {e}"));
    let mut args = cql_args(&keyspace);
    configure(&mut args);
    CqlStore::connect(&args)
        .await
        .unwrap_or_else(|e| panic!("connect {keyspace}: {e}"))
}

/// A statement's (consistency, serial consistency).
type StatementLevels = (Option<Consistency>, Option<SerialConsistency>);

/// Every statement's levels, and the read_serial's consistency.
fn levels_of(store: &CqlStore) -> (Vec<StatementLevels>, Option<Consistency>) {
    let s = &store.statements;
    let mut all: Vec<StatementLevels> = [&s.read, &s.delete]
        .iter()
        .map(|p| (p.get_consistency(), p.get_serial_consistency()))
        .collect();
    let batches = [
        &s.insert,
        &s.insert_kept,
        &s.replace,
        &s.replace_hits,
        &s.overwrite,
    ];
    for batch in batches {
        all.push((batch.get_consistency(), batch.get_serial_consistency()));
    }
    (all, s.read_serial.get_consistency())
}

fn profile_serial(store: &CqlStore) -> Option<SerialConsistency> {
    store
        .session()
        .get_default_execution_profile_handle()
        .to_profile()
        .get_serial_consistency()
}

/// A conditional write and a serial read go through with these levels.
async fn works(store: &CqlStore) {
    let now = Millis::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let id = RecordId::new("t", "levels.ns", format!("k-{}", rand::random::<u64>()));
    let args = oncekey_ledger::ClaimArgs::for_test(
        [1; 32],
        oncekey_ledger::Semantics::AtLeastOnce,
        30_000,
        86_400_000,
        "w",
    );
    let decision = oncekey_ledger::claim(&id, None, &args, now).unwrap();
    let record = decision.record();
    assert_eq!(
        store.insert_if_absent(record, now).await.unwrap(),
        Cas::Applied
    );
    let found = store.read_serial(&record.id).await.unwrap();
    assert_eq!(found.version, Some(record.version));
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn a_local_dc_keeps_paxos_serial_by_default() {
    let store = store_with(|a| a.local_dc = Some(DC.into())).await;
    let (statements, read_serial) = levels_of(&store);
    for levels in statements {
        assert_eq!(
            levels,
            (
                Some(Consistency::LocalQuorum),
                Some(SerialConsistency::Serial)
            )
        );
    }
    assert_eq!(read_serial, Some(Consistency::Serial));
    assert_eq!(profile_serial(&store), Some(SerialConsistency::Serial));
    works(&store).await;
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn without_a_local_dc_everything_is_cluster_wide() {
    let store = store_with(|_| {}).await;
    let (statements, read_serial) = levels_of(&store);
    for levels in statements {
        assert_eq!(
            levels,
            (Some(Consistency::Quorum), Some(SerialConsistency::Serial))
        );
    }
    assert_eq!(read_serial, Some(Consistency::Serial));
    assert_eq!(profile_serial(&store), Some(SerialConsistency::Serial));
}

#[tokio::test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn local_serial_when_asked_for_with_pinned_keys() {
    let store = store_with(|a| {
        a.local_dc = Some(DC.into());
        a.serial_consistency = SerialLevel::LocalSerial;
        a.keys_dc_pinned = true;
    })
    .await;
    let (statements, read_serial) = levels_of(&store);
    for levels in statements {
        assert_eq!(
            levels,
            (
                Some(Consistency::LocalQuorum),
                Some(SerialConsistency::LocalSerial)
            )
        );
    }
    assert_eq!(read_serial, Some(Consistency::LocalSerial));
    assert_eq!(profile_serial(&store), Some(SerialConsistency::LocalSerial));
    works(&store).await;
}

#[tokio::test]
async fn local_serial_is_refused_unless_keys_are_pinned_to_the_local_dc() {
    // Refused before connecting: no node is needed, none is contacted.
    let mut args = CqlConfig::new(&["127.0.0.1:1"], "oncekey_unused");
    args.serial_consistency = SerialLevel::LocalSerial;
    args.local_dc = Some(DC.into());
    let err = CqlStore::connect(&args).await.err().expect("refused");
    assert!(matches!(err, ConnectError::Flag(_)), "{err}");
    assert!(err.to_string().contains("--cql-keys-dc-pinned"), "{err}");

    args.keys_dc_pinned = true;
    args.local_dc = None;
    let err = CqlStore::connect(&args).await.err().expect("refused");
    assert!(err.to_string().contains("needs --cql-local-dc"), "{err}");
}
