//! Crash trials: workers run claim → effect → complete loops through the Rust client while the
//! harness SIGKILLs the server at random moments and restarts it on the same data (embedded: the
//! same data dir; CQL: the same keyspace) and the same port. The verdict comes from the external
//! effect file and final Lookups (see tests/src/faults/workload.rs).
//!
//! `ONCEKEY_CRASH_TRIALS` kill/restart trials per store (default 12); the full run is
//! `ONCEKEY_CRASH_TRIALS=200 cargo test -p oncekey-tests --release --test crash_trials -- --nocapture`.
//! `ONCEKEY_FAULT_SEED` replays a run's random choices (the seed is printed).
//!
//! On the embedded store the listing index must also have survived every kill: each status's
//! ListRecords holds exactly the records the unfiltered listing (read from the records
//! themselves) reports in that status.
//!
//! Every trial runs with encryption at rest and key privacy on.

use oncekey_api::v1::{self, RecordStatus};
use oncekey_client::{Client, LedgerRpc};
use oncekey_tests::cql;
use oncekey_tests::faults::workload::{self, Workload};
use oncekey_tests::faults::{host_port, Rng};
use oncekey_tests::Server;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const WORKERS: u32 = 8;

fn trials() -> u32 {
    std::env::var("ONCEKEY_CRASH_TRIALS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

/// Starts the server, blocking this worker thread only.
fn start(data_dir: &Path, flags: &[String]) -> Server {
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    tokio::task::block_in_place(|| Server::start_on(data_dir, &flags))
}

/// The trials run with encryption at rest and key privacy on (docs/api.md#data-protection):
/// results are sealed and keys hashed in every write the kills interrupt.
fn with_encryption(mut flags: Vec<String>, dir: &Path) -> Vec<String> {
    let ring = dir.join("keyring");
    let mut lines = String::new();
    for args in [["--id", "k1", "--primary"], ["--id", "names", "--hmac"]] {
        let (code, stdout, stderr) = oncekey_tests::run_cli(&[&["new-key"][..], &args].concat());
        assert_eq!(code, 0, "new-key: {stderr}");
        lines.push_str(&stdout);
    }
    std::fs::write(&ring, lines).unwrap();
    flags.extend([
        "--encryption-keys".into(),
        ring.display().to_string(),
        "--key-privacy".into(),
        "hmac".into(),
    ]);
    flags
}

async fn crash_trials(store: &str, store_flags: Vec<String>) {
    let seed = Rng::seed();
    let mut rng = Rng::new(seed);
    let n = trials();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    let store_flags = with_encryption(store_flags, dir.path());
    let mut server = start(&data_dir, &store_flags);
    // Restarts reuse the ports the first start got.
    let mut flags = store_flags.clone();
    flags.extend([
        "--listen".into(),
        host_port(&server.grpc),
        "--admin-listen".into(),
        host_port(&server.admin),
    ]);
    let endpoint = server.grpc.clone();
    let load = Workload::new("crash.trial", &dir.path().join("effects.log"));
    let workers = load.spawn(WORKERS, std::slice::from_ref(&endpoint), seed);
    let checker = Client::connect(&endpoint, workload::options())
        .await
        .unwrap();
    let started = Instant::now();
    let mut downtime = Duration::ZERO;
    for trial in 1..=n {
        tokio::time::sleep(Duration::from_millis(rng.range(150, 1_200))).await;
        server.kill9();
        let down = Instant::now();
        // Mostly a quick restart; sometimes long enough for 1-2 s leases to run out meanwhile.
        let pause = if rng.chance(0.3) {
            rng.range(1_000, 2_500)
        } else {
            rng.range(0, 300)
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
        server = start(&data_dir, &flags);
        downtime += down.elapsed();
        load.spot_check(&checker, 3, &mut rng).await;
        if trial % 25 == 0 {
            println!(
                "[{store}] {trial}/{n} kills after {:.0?}: {}",
                started.elapsed(),
                load.counts.summary()
            );
        }
    }
    // Let the last incarnation serve a while, then stop the workers.
    tokio::time::sleep(Duration::from_secs(1)).await;
    load.stop();
    for w in workers {
        w.await.expect("a worker panicked");
    }
    let verdict = load.verify(&checker, checker.ledger()).await;
    println!(
        "[{store}] seed={seed} trials={n} (SIGKILL + restart) in {:.0?}, server down {:.1?} in all\n[{store}] workers: {}\n[{store}] verdict: {verdict:#?}",
        started.elapsed(),
        downtime,
        load.counts.summary()
    );
    verdict.assert_clean();
    assert!(
        verdict.effects > 0 && verdict.acked > 0,
        "the workload did nothing"
    );
    if store == "embedded" {
        listing_agrees(&mut checker.ledger()).await;
    }
    drop(server);
}

/// Every listed record of the workload's tenant, (namespace, key) → reported status.
async fn walk(ledger: &mut LedgerRpc, statuses: &[RecordStatus]) -> BTreeMap<String, i32> {
    let mut request = v1::ListRecordsRequest {
        statuses: statuses.iter().map(|s| *s as i32).collect(),
        page_size: 500,
        ..Default::default()
    };
    let mut out = BTreeMap::new();
    loop {
        let page = ledger
            .list_records(request.clone())
            .await
            .unwrap()
            .into_inner();
        for r in page.records {
            let name = format!("{}/{}", r.namespace, r.key);
            assert!(out.insert(name.clone(), r.status).is_none(), "{name} twice");
        }
        if page.next_page_token.is_empty() {
            return out;
        }
        request.page_token = page.next_page_token;
    }
}

/// Each status's listing (the listing index) holds exactly the records the unfiltered listing
/// (the records table) reports in that status.
async fn listing_agrees(ledger: &mut LedgerRpc) {
    // Once every lease of the workload has run out, no reported status
    // changes between the listings.
    tokio::time::sleep(workload::MAX_LEASE + Duration::from_millis(500)).await;
    let all = walk(ledger, &[]).await;
    assert!(!all.is_empty());
    for status in [
        RecordStatus::Processing,
        RecordStatus::Succeeded,
        RecordStatus::Failed,
        RecordStatus::Retry,
        RecordStatus::Unknown,
        RecordStatus::AwaitingApproval,
    ] {
        let expected: BTreeMap<_, _> = all
            .iter()
            .filter(|(_, s)| **s == status as i32)
            .map(|(k, s)| (k.clone(), *s))
            .collect();
        let listed = walk(ledger, &[status]).await;
        let missing: Vec<_> = expected
            .keys()
            .filter(|k| !listed.contains_key(*k))
            .collect();
        let extra: Vec<_> = listed
            .keys()
            .filter(|k| !expected.contains_key(*k))
            .collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "the listing of {status:?} after the kills: missing {missing:?}, extra {extra:?}"
        );
    }
    println!("[embedded] listing index agrees with {} records", all.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embedded_store_survives_sigkill_trials() {
    crash_trials("embedded", Vec::new()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_store_survives_sigkill_trials() {
    let node = cql::node();
    let keyspace = cql::migrated_keyspace(node);
    let flags = ["--store", "cql", "--cql-nodes", node, "--cql-keyspace"]
        .iter()
        .map(|s| s.to_string())
        .chain([keyspace])
        .collect();
    crash_trials("cql", flags).await;
}
