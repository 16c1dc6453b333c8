//! Data at rest (docs/api.md#data-protection), end to end through the real `oncekey serve`: a
//! marker in result bodies, metadata, error messages and details, and keys, is in no file under
//! the embedded data directory (while serving and after a clean stop) nor in a Cassandra node's
//! files after its memtables are flushed — while the same writes without a key ring leave it
//! there; a removed key is named and nothing is replayed; rotation by a file change, then
//! `oncekey rekey`, under load, loses nothing; a ciphertext moved to another record or tenant,
//! or altered, is refused; clear records stay readable when encryption is turned on, and a
//! dev-mode `oncekey rekey` seals every tenant's; retention ceilings lower what a Claim asks.

use oncekey_api::v1;
use oncekey_client::LedgerRpc;
use oncekey_tests::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_types::StatusExt;

const NS: &str = "private.data";
const PATIENCE: Duration = Duration::from_secs(60);

/// A key ring line from `oncekey new-key`.
fn key_line(id: &str, flags: &[&str]) -> String {
    let mut args = vec!["new-key", "--id", id];
    args.extend_from_slice(flags);
    let (code, stdout, stderr) = run_cli(&args);
    assert_eq!(code, 0, "new-key: {stderr}");
    let line = stdout.trim().to_owned();
    assert!(line.starts_with(id), "{line}");
    line
}

fn write_ring(path: &Path, lines: &[&str]) {
    // Written aside and renamed, as an editor or the kubelet does: never half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, lines.join("\n") + "\n").unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Every file under `dir` whose bytes contain `marker`.
fn files_containing(dir: &Path, marker: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                if let Ok(bytes) = std::fs::read(&path) {
                    if bytes.windows(marker.len()).any(|w| w == marker.as_bytes()) {
                        found.push(path);
                    }
                }
            }
        }
    }
    found
}

fn marker(what: &str) -> String {
    format!("MARKER-{what}-{:016x}", rand::random::<u64>())
}

/// Writes the marker into every sealed field and, under key privacy, the key: a completed
/// record (body and metadata) and a failed one (message and details). Returns their keys.
async fn write_markers(ledger: &mut LedgerRpc, ns: &str, marker: &str) -> (String, String) {
    let done = format!("{marker}-done");
    let failed = format!("{marker}-failed");
    let token = acquire(ledger, ns, &done).await;
    let mut res = result(200, format!("{{\"charge\":\"{marker}\"}}").as_bytes());
    res.metadata = HashMap::from([("receipt".to_owned(), marker.to_owned())]);
    ledger
        .complete(complete(ns, &done, token, res))
        .await
        .expect("complete");
    let token = acquire(ledger, ns, &failed).await;
    let mut req = fail(ns, &failed, token, v1::Disposition::Final, "");
    req.error = Some(v1::OperationError {
        code: 402,
        message: format!("card declined for {marker}"),
        details: marker.as_bytes().to_vec(),
    });
    ledger.fail(req).await.expect("fail");
    (done, failed)
}

async fn acquire(ledger: &mut LedgerRpc, ns: &str, key: &str) -> u64 {
    let r = ledger
        .claim(claim(ns, key, "{}"))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(outcome(&r), v1::ClaimOutcome::Acquired, "{r:?}");
    r.lease.expect("lease").token
}

async fn looked_up(
    ledger: &mut LedgerRpc,
    ns: &str,
    key: &str,
) -> Result<v1::Record, tonic::Status> {
    ledger
        .lookup(lookup(ns, key))
        .await
        .map(|r| r.into_inner().record.expect("record"))
}

/// The ErrorInfo metadata of an `UNREADABLE_RECORD` refusal (asserting code and reason).
fn unreadable(status: &tonic::Status) -> HashMap<String, String> {
    assert_eq!(status.code(), Code::DataLoss, "{status:?}");
    assert_eq!(reason(status), "UNREADABLE_RECORD", "{status:?}");
    status.get_details_error_info().expect("ErrorInfo").metadata
}

fn sighup(server: &Server) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until `check` holds, polling.
async fn until<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {PATIENCE:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until the server seals new writes with `primary` (Rekey of an empty page says which).
async fn until_primary(ledger: &mut LedgerRpc, primary: &str) {
    until(&format!("primary key {primary}"), async || {
        let r = ledger
            .rekey(v1::RekeyRequest {
                page_size: 1,
                ..Default::default()
            })
            .await
            .expect("rekey")
            .into_inner();
        (r.primary_key_id == primary).then_some(())
    })
    .await
}

/// `oncekey rekey` against the dev-mode `server` with `flags` (no `--tenant`: every tenant's
/// records): its JSON totals (asserting exit 0).
fn rekey_cli(server: &Server, flags: &[&str]) -> serde_json::Value {
    let mut args = vec!["rekey", "--server", &server.grpc];
    args.extend_from_slice(flags);
    let (code, stdout, stderr) = run_cli(&args);
    assert_eq!(code, 0, "rekey:\n{stdout}\n{stderr}");
    assert!(
        stderr.contains("rekey: page 1:"),
        "no progress line: {stderr}"
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_marker_in_results_errors_and_keys_is_in_no_file_of_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("keyring");
    let k1 = key_line("k1", &["--primary"]);
    let names = key_line("names", &["--hmac"]);
    write_ring(&ring, &[&k1, &names]);
    let secret = marker("sealed");
    let data = dir.path().join("sealed");
    let mut server = Server::start_on(
        &data,
        &[
            "--encryption-keys",
            ring.to_str().unwrap(),
            "--key-privacy",
            "hmac",
        ],
    );
    let mut ledger = server.client("acme").await;
    let (done, failed) = write_markers(&mut ledger, NS, &secret).await;

    // Readable through the API, under the key as written.
    let record = looked_up(&mut ledger, NS, &done).await.unwrap();
    assert_eq!(record.key, done);
    let res = record.result.expect("result");
    assert!(String::from_utf8_lossy(&res.body).contains(&secret));
    assert_eq!(res.metadata.get("receipt"), Some(&secret));
    let err = looked_up(&mut ledger, NS, &failed)
        .await
        .unwrap()
        .error
        .unwrap();
    assert!(err.message.contains(&secret) && err.details == secret.as_bytes());
    // Listings show the hashed key, and a Lookup of that form finds the record.
    let page = ledger
        .list_records(v1::ListRecordsRequest {
            namespace: NS.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(page.records.len(), 2);
    for r in &page.records {
        assert!(r.key.starts_with("~h:") && r.key.len() == 46, "{}", r.key);
        assert!(!r.key.contains(&secret));
        assert_eq!(looked_up(&mut ledger, NS, &r.key).await.unwrap().key, r.key);
    }

    let leaks = files_containing(&data, &secret);
    assert!(leaks.is_empty(), "the marker is in {leaks:?} while serving");
    assert!(server.terminate(PATIENCE).success());
    let leaks = files_containing(&data, &secret);
    assert!(
        leaks.is_empty(),
        "the marker is in {leaks:?} after a clean stop"
    );

    // The same writes without a key ring leave the marker on disk: the check can fail.
    let clear = marker("clear");
    let data = dir.path().join("clear");
    let mut server = Server::start_on(&data, &[]);
    write_markers(&mut server.client("acme").await, NS, &clear).await;
    assert!(server.terminate(PATIENCE).success());
    assert!(!files_containing(&data, &clear).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_key_is_named_and_nothing_is_replayed_until_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("keyring");
    let k1 = key_line("k1", &["--primary"]);
    let k2 = key_line("k2", &["--primary"]);
    let k1_retired = k1.replace(" primary", "");
    write_ring(&ring, &[&k1]);
    let server = Server::start(&["--encryption-keys", ring.to_str().unwrap()]);
    let mut ledger = server.client("acme").await;
    let token = acquire(&mut ledger, NS, "order-1").await;
    ledger
        .complete(complete(NS, "order-1", token, result(201, b"charge ch_1")))
        .await
        .unwrap();
    let token = acquire(&mut ledger, NS, "order-3").await;
    ledger
        .complete(complete(NS, "order-3", token, result(201, b"charge ch_3")))
        .await
        .unwrap();

    write_ring(&ring, &[&k2]);
    sighup(&server);
    let status = until("k1 gone", async || {
        looked_up(&mut ledger, NS, "order-1").await.err()
    })
    .await;
    let meta = unreadable(&status);
    assert_eq!(meta.get("key_id").map(String::as_str), Some("k1"));
    assert_eq!(meta.get("cause").map(String::as_str), Some("missing_key"));
    assert!(status.message().contains("\"k1\""), "{status:?}");
    // A retry of the operation is refused the same way: neither a replay without the result nor
    // a second run.
    let status = ledger
        .claim(claim(NS, "order-1", "{}"))
        .await
        .expect_err("a Claim of an unreadable record");
    assert_eq!(unreadable(&status).get("key_id").unwrap(), "k1");
    // New operations go on, sealed with k2.
    acquire(&mut ledger, NS, "order-2").await;
    // An operator may purge a record whose key is lost: Purge keeps none of its sealed fields.
    ledger
        .purge(v1::PurgeRequest {
            namespace: NS.into(),
            key: "order-3".into(),
            force: false,
        })
        .await
        .expect("purge of an unreadable record");
    let gone = looked_up(&mut ledger, NS, "order-3").await.unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);

    write_ring(&ring, &[&k2, &k1_retired]);
    sighup(&server);
    let record = until("k1 back", async || {
        looked_up(&mut ledger, NS, "order-1").await.ok()
    })
    .await;
    assert_eq!(record.result.unwrap().body, b"charge ch_1");
    let metrics = http_get(&server.admin, "/metrics").await.1;
    assert!(
        metrics.contains("oncekey_unreadable_records_total{cause=\"missing_key\"}"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotation_by_a_file_change_then_rekey_under_load_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("keyring");
    let k1 = key_line("k1", &["--primary"]);
    let k2 = key_line("k2", &["--primary"]);
    write_ring(&ring, &[&k1]);
    let server = Server::start(&[
        "--encryption-keys",
        ring.to_str().unwrap(),
        "--reload-check-interval",
        "200ms",
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(Mutex::new(Vec::<(String, Vec<u8>)>::new()));
    let mut workers = Vec::new();
    for w in 0..4 {
        let mut ledger = server.client("acme").await;
        let (stop, written) = (stop.clone(), written.clone());
        workers.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("w{w}-{i}");
                let body = format!("result of {key}").into_bytes();
                let token = acquire(&mut ledger, NS, &key).await;
                ledger
                    .complete(complete(NS, &key, token, result(200, &body)))
                    .await
                    .expect("complete under rotation");
                written.lock().unwrap().push((key, body));
                i += 1;
            }
        }));
    }
    let mut ledger = server.client("acme").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Rotation: k2 becomes primary, k1 stays to read; picked up from the file alone.
    let k1_retired = k1.replace(" primary", "");
    write_ring(&ring, &[&k2, &k1_retired]);
    until_primary(&mut ledger, "k2").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let first = rekey_cli(&server, &["--tenant", "acme"]);
    assert_eq!(first["unreadable"], 0, "{first}");
    assert!(first["resealed"].as_u64().unwrap() > 0, "{first}");
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.await.expect("a worker failed");
    }
    // Everything written since the reload was sealed with k2 already.
    let second = rekey_cli(&server, &["--tenant", "acme"]);
    assert_eq!(second["resealed"], 0, "{second}");
    assert_eq!(second["primary_key_id"], "k2", "{second}");

    // k1 retired for good: every record still opens.
    write_ring(&ring, &[&k2]);
    sighup(&server);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let written = written.lock().unwrap().clone();
    assert!(
        written.len() > 10,
        "the load wrote {} records",
        written.len()
    );
    for (key, body) in &written {
        let record = looked_up(&mut ledger, NS, key)
            .await
            .unwrap_or_else(|e| panic!("{key}: {e:?}"));
        assert_eq!(&record.result.unwrap().body, body, "{key}");
    }
}

/// Completes records `{prefix}-0` .. `{prefix}-{n-1}`, each with its key as result body.
async fn write_clear(ledger: &mut LedgerRpc, prefix: &str, n: usize) {
    for i in 0..n {
        let key = format!("{prefix}-{i}");
        let token = acquire(ledger, NS, &key).await;
        ledger
            .complete(complete(NS, &key, token, result(200, key.as_bytes())))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_records_stay_readable_when_encryption_is_turned_on_and_rekey_seals_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ring = dir.path().join("keyring");
    write_ring(&ring, &[&key_line("k1", &["--primary"])]);
    let mut server = Server::start_on(&data, &[]);
    write_clear(&mut server.client("acme").await, "old", 5).await;
    assert!(server.terminate(PATIENCE).success());
    let server = Server::start_on(&data, &["--encryption-keys", ring.to_str().unwrap()]);
    let mut ledger = server.client("acme").await;
    for i in 0..5 {
        let key = format!("old-{i}");
        let record = looked_up(&mut ledger, NS, &key).await.unwrap();
        assert_eq!(record.result.unwrap().body, key.as_bytes());
    }
    let first = rekey_cli(&server, &["--tenant", "acme"]);
    assert_eq!(first["resealed"], 5, "{first}");
    let second = rekey_cli(&server, &["--tenant", "acme"]);
    assert_eq!(
        (second["resealed"].clone(), second["current"].clone()),
        (0.into(), 5.into()),
        "{second}"
    );
    let record = looked_up(&mut ledger, NS, "old-3").await.unwrap();
    assert_eq!(record.result.unwrap().body, b"old-3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_dev_mode_rekey_without_a_tenant_seals_every_tenants_records() {
    let dir = tempfile::tempdir().unwrap();
    let (data, ring) = (dir.path().join("data"), dir.path().join("keyring"));
    write_ring(&ring, &[&key_line("k1", &["--primary"])]);
    let mut server = Server::start_on(&data, &[]);
    let tenants = [("acme", 3), ("globex", 4)];
    for (tenant, n) in tenants {
        write_clear(&mut server.client(tenant).await, tenant, n).await;
    }
    assert!(server.terminate(PATIENCE).success());
    let server = Server::start_on(&data, &["--encryption-keys", ring.to_str().unwrap()]);
    // No --tenant (the default tenant's header, which has no records), pages of 2: 2+2+2+1.
    let first = rekey_cli(&server, &["--page-size", "2"]);
    let done = [&first["examined"], &first["resealed"], &first["pages"]];
    assert_eq!(done, [7, 7, 4], "{first}");
    let second = rekey_cli(&server, &[]);
    assert_eq!(
        [&second["resealed"], &second["current"]],
        [0, 7],
        "{second}"
    );
    for (tenant, n) in tenants {
        let key = format!("{tenant}-{}", n - 1);
        let record = looked_up(&mut server.client(tenant).await, NS, &key).await;
        assert_eq!(record.unwrap().result.unwrap().body, key.as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retention_ceiling_lowers_what_a_claim_asks() {
    let server = Server::start(&["--retention-ceiling", "payments.*=7d"]);
    let mut ledger = server.client("acme").await;
    let day = 86_400_000;
    for (ns, expected) in [("payments.charge", 7 * day), ("email.send", 30 * day)] {
        let mut req = claim(ns, "k", "{}");
        req.retention = Some(ms(30 * day));
        let r = ledger.claim(req).await.unwrap().into_inner();
        assert_eq!(outcome(&r), v1::ClaimOutcome::Acquired);
        let record = r.record.unwrap();
        // An acquired record expires `retention` after its lease end (30 s by default).
        let kept = (record.expires_at.unwrap().seconds - record.created_at.unwrap().seconds) * 1000;
        assert!(
            (expected..=expected + 31_000).contains(&kept),
            "{ns}: kept {kept} ms, expected {expected} ms plus the lease"
        );
    }
}

/// Copies a column of one record's row into another's, as someone who can write the keyspace.
async fn copy_cell(node: &str, keyspace: &str, column: &str, from: [&str; 3], to: [&str; 3]) {
    let session = scylla::client::session_builder::SessionBuilder::new()
        .known_node(node)
        .use_keyspace(keyspace, false)
        .build()
        .await
        .expect("connect to the test node");
    let read =
        format!("SELECT {column} FROM records WHERE tenant = ? AND namespace = ? AND key = ?");
    let (value,): (Vec<u8>,) = session
        .query_unpaged(read, (from[0], from[1], from[2]))
        .await
        .unwrap()
        .into_rows_result()
        .unwrap()
        .first_row::<(Vec<u8>,)>()
        .unwrap();
    let write =
        format!("UPDATE records SET {column} = ? WHERE tenant = ? AND namespace = ? AND key = ?");
    session
        .query_unpaged(write, (value, to[0], to[1], to[2]))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_a_ciphertext_moved_to_another_record_or_tenant_is_refused() {
    let node = cql::node();
    let keyspace = cql::migrated_keyspace(node);
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("keyring");
    write_ring(&ring, &[&key_line("k1", &["--primary"])]);
    let server = Server::start(&[
        "--store",
        "cql",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
        "--encryption-keys",
        ring.to_str().unwrap(),
    ]);
    for (tenant, key, body) in [
        ("acme", "source", "acme's secret"),
        ("acme", "target", "acme's other"),
        ("globex", "target", "globex's"),
    ] {
        let mut ledger = server.client(tenant).await;
        let token = acquire(&mut ledger, NS, key).await;
        ledger
            .complete(complete(NS, key, token, result(200, body.as_bytes())))
            .await
            .unwrap();
    }
    let source = ["acme", NS, "source"];
    for target in [["acme", NS, "target"], ["globex", NS, "target"]] {
        copy_cell(node, &keyspace, "result_body", source, target).await;
    }
    for tenant in ["acme", "globex"] {
        let mut ledger = server.client(tenant).await;
        let status = looked_up(&mut ledger, NS, "target")
            .await
            .expect_err(tenant);
        let meta = unreadable(&status);
        let named = [&meta["cause"], &meta["key_id"]];
        assert_eq!(named, ["tampered", "k1"], "{tenant}");
        let status = ledger
            .claim(claim(NS, "target", "{}"))
            .await
            .expect_err(tenant);
        unreadable(&status);
    }
    // The source itself still opens.
    let mut acme = server.client("acme").await;
    let record = looked_up(&mut acme, NS, "source").await.unwrap();
    assert_eq!(record.result.unwrap().body, b"acme's secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_a_marker_is_in_no_file_of_the_node_after_a_flush() {
    let node = tokio::task::block_in_place(cql::DedicatedNode::start);
    let keyspace = cql::migrated_keyspace(&node.addr);
    let dir = tempfile::tempdir().unwrap();
    let ring = dir.path().join("keyring");
    write_ring(
        &ring,
        &[
            &key_line("k1", &["--primary"]),
            &key_line("names", &["--hmac"]),
        ],
    );
    let store = [
        "--store",
        "cql",
        "--cql-nodes",
        &node.addr,
        "--cql-keyspace",
        &keyspace,
    ];
    let secret = marker("sealed");
    let mut flags = store.to_vec();
    flags.extend([
        "--encryption-keys",
        ring.to_str().unwrap(),
        "--key-privacy",
        "hmac",
    ]);
    let mut sealed = Server::start(&flags);
    write_markers(&mut sealed.client("acme").await, NS, &secret).await;
    assert!(sealed.terminate(PATIENCE).success());
    // The control: the same writes by a server without a key ring, in another namespace.
    let clear = marker("clear");
    let mut plain = Server::start(&store);
    write_markers(&mut plain.client("acme").await, "clear.data", &clear).await;
    assert!(plain.terminate(PATIENCE).success());
    // Stopping the node drains it: memtables are flushed to SSTables.
    tokio::task::block_in_place(|| node.stop());
    let port = node.addr.rsplit(':').next().unwrap().to_owned();
    let run = std::env::var("ONCEKEY_FAULT_CASSANDRA_RUN")
        .unwrap_or_else(|_| format!("/tmp/oncekey-cassandra-{port}"));
    let run = Path::new(&run);
    assert!(
        !files_containing(run, &clear).is_empty(),
        "the control marker is in no file under {run:?}: wrong directory, or nothing flushed"
    );
    let leaks = files_containing(run, &secret);
    assert!(leaks.is_empty(), "the marker is in {leaks:?}");
}
