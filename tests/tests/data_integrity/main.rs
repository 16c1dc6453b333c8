//! The embedded store's data directory after losses, against the real binary: a lost or emptied
//! `oncekey.redb` and a write-ahead log damaged before intact frames stop `oncekey serve` with
//! exit code 65 and a message saying what and how to proceed, changing nothing; with
//! `--accept-data-loss` it starts. A torn log tail and an earlier version's data directory start
//! as they are, with every acknowledged write. A log cut short or put back older: `log_cut`.

mod log_cut;

use oncekey_api::v1::{ClaimOutcome, RecordStatus};
use oncekey_tests::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tonic::Code;

const NS: &str = "payments.charge";
/// sysexits' EX_DATAERR, what `oncekey serve` exits with over lost data.
const EXIT_DATA: i32 = 65;
/// No timed checkpoint: the log keeps every write until the server is killed.
const KEEP_LOG: [(&str, &str); 1] = [("ONCEKEY_TEST_EMBEDDED_CHECKPOINT_INTERVAL", "1h")];

/// Runs `oncekey serve` on `data_dir`, which must exit on its own: (exit code, stderr).
fn serve_to_exit(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let stderr = data_dir.with_extension("refused-stderr");
    let mut child = Command::new(binary())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .args(extra)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "oncekey serve started instead of refusing; stderr:\n{}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (code, std::fs::read_to_string(&stderr).unwrap())
}

/// Each file of `dir` and its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Claims and completes keys `k0..kN` (each a durable write to the log).
async fn settle(server: &Server, n: usize) {
    settle_keys(server, 0..n).await
}

/// Claims and completes keys `k{i}` for each `i` of `keys`.
async fn settle_keys(server: &Server, keys: std::ops::Range<usize>) {
    let mut c = server.client("acme").await;
    for i in keys {
        let key = format!("k{i}");
        let claimed = c.claim(claim(NS, &key, "{}")).await.unwrap().into_inner();
        assert_eq!(outcome(&claimed), ClaimOutcome::Acquired);
        let body = format!("charged {i}");
        c.complete(complete(NS, &key, 1, result(200, body.as_bytes())))
            .await
            .unwrap();
    }
}

/// Which of keys `k0..kN` the server holds settled.
async fn settled(server: &Server, n: usize) -> Vec<usize> {
    let mut c = server.client("acme").await;
    let mut found = Vec::new();
    for i in 0..n {
        match c.lookup(lookup(NS, &format!("k{i}"))).await {
            Ok(reply) => {
                let record = reply.into_inner().record.unwrap();
                assert_eq!(status(&record), RecordStatus::Succeeded);
                assert_eq!(
                    record.result.unwrap().body,
                    format!("charged {i}").as_bytes()
                );
                found.push(i);
            }
            Err(status) => assert_eq!(status.code(), Code::NotFound),
        }
    }
    found
}

/// The offsets of the log's frames after its header and marks, which are numbered 0 (each frame:
/// magic "OKW1" little-endian, sequence number, payload length, checksum, payload).
fn frames(log: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at + 24 <= log.len() && log[at..at + 4] == *b"1WKO" {
        if log[at + 4..at + 12] != [0; 8] {
            offsets.push(at);
        }
        at += frame_len(log, at);
    }
    offsets
}

/// The length of the frame at `at` of `log`.
fn frame_len(log: &[u8], at: usize) -> usize {
    24 + u32::from_le_bytes(log[at + 12..at + 16].try_into().unwrap()) as usize
}

/// A data directory whose server settled `k0..kN` and was then killed with `kill -9`.
async fn crashed(n: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start_with_env(&data, &[], &KEEP_LOG);
    settle(&server, n).await;
    server.kill9();
    (dir, data)
}

#[tokio::test]
async fn a_lost_or_emptied_store_file_refuses_to_start_until_data_loss_is_accepted() {
    for emptied in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut server = Server::start_on(&data, &[]);
        settle(&server, 3).await;
        assert!(server.terminate(Duration::from_secs(30)).success());
        let db = data.join("oncekey.redb");
        match emptied {
            true => std::fs::write(&db, b"").unwrap(),
            false => std::fs::remove_file(&db).unwrap(),
        }
        let before = files(&data);
        let (code, stderr) = serve_to_exit(&data, &[], &[]);
        assert_eq!(code, EXIT_DATA, "{stderr}");
        let found = if emptied {
            "is empty (0 bytes)"
        } else {
            "is missing"
        };
        for needle in [
            format!("oncekey.redb {found}"),
            "oncekey.id says this data directory holds store".into(),
            "--accept-data-loss".into(),
            "ONCEKEY_ACCEPT_DATA_LOSS".into(),
            "restore the data directory from a backup".into(),
        ] {
            assert!(stderr.contains(&needle), "no {needle:?} in:\n{stderr}");
        }
        assert_eq!(
            files(&data),
            before,
            "a refused start changed the data directory"
        );

        // Accepting the loss (here through the environment) starts an empty ledger.
        let server = Server::start_with_env(&data, &[], &[("ONCEKEY_ACCEPT_DATA_LOSS", "true")]);
        assert!(settled(&server, 3).await.is_empty());
        assert!(server.stderr().contains("ERROR"), "{}", server.stderr());
        let mut c = server.client("acme").await;
        let again = c.claim(claim(NS, "k0", "{}")).await.unwrap().into_inner();
        assert_eq!(outcome(&again), ClaimOutcome::Acquired);
    }
}

#[tokio::test]
async fn a_log_damaged_before_intact_frames_refuses_to_start_until_data_loss_is_accepted() {
    let (_dir, data) = crashed(10).await;
    let log_path = data.join("oncekey.wal");
    let mut log = std::fs::read(&log_path).unwrap();
    let offsets = frames(&log);
    assert!(
        offsets.len() >= 20,
        "the log holds {} frames",
        offsets.len()
    );
    // A flipped bit inside the third frame: k1's claim.
    let at = offsets[2];
    log[at + 30] ^= 0x08;
    std::fs::write(&log_path, &log).unwrap();

    let before = files(&data);
    let (code, stderr) = serve_to_exit(&data, &[], &KEEP_LOG);
    assert_eq!(code, EXIT_DATA, "{stderr}");
    let intact = offsets.len() - 3;
    for needle in [
        format!("frame 3 at byte {at} fails its checksum, and {intact} intact frames"),
        "oncekey.wal".into(),
        "--accept-data-loss".into(),
    ] {
        assert!(stderr.contains(&needle), "no {needle:?} in:\n{stderr}");
    }
    assert_eq!(
        files(&data).remove("oncekey.wal"),
        before.get("oncekey.wal").cloned(),
        "a refused start changed the log"
    );

    // Accepted: the frames before the damage are replayed (k0), the rest dropped and kept aside.
    let mut server = Server::start_with_env(&data, &["--accept-data-loss"], &KEEP_LOG);
    assert_eq!(settled(&server, 10).await, [0]);
    let logged = server.stderr();
    assert!(
        logged.contains("ERROR") && logged.contains("frame 3"),
        "{logged}"
    );
    let aside = files(&data)
        .into_keys()
        .filter(|f| f.starts_with("oncekey.wal.discarded-"))
        .count();
    assert_eq!(aside, 1);
    assert!(server.terminate(Duration::from_secs(30)).success());
    // Once accepted, the next start needs no flag.
    let server = Server::start_on(&data, &[]);
    assert_eq!(settled(&server, 10).await, [0]);
}

#[tokio::test]
async fn a_torn_log_tail_starts_with_every_acknowledged_write() {
    let (_dir, data) = crashed(5).await;
    let log_path = data.join("oncekey.wal");
    let mut log = std::fs::read(&log_path).unwrap();
    // Half a frame after the last one: the write a crash interrupted.
    let last = *frames(&log).last().unwrap();
    let partial = log[last..last + (log.len() - last) / 2].to_vec();
    log.extend_from_slice(&partial);
    std::fs::write(&log_path, &log).unwrap();

    let server = Server::start_on(&data, &[]);
    assert_eq!(settled(&server, 5).await, [0, 1, 2, 3, 4]);
    assert!(!server.stderr().contains("ERROR"), "{}", server.stderr());
}

#[tokio::test]
async fn a_data_directory_of_an_earlier_version_starts_and_is_adopted() {
    // What a crash of a version without identity files and log headers leaves behind.
    let (_dir, data) = crashed(4).await;
    std::fs::remove_file(data.join("oncekey.id")).unwrap();
    let log_path = data.join("oncekey.wal");
    let log = std::fs::read(&log_path).unwrap();
    let first = frames(&log)[0];
    std::fs::write(&log_path, &log[first..]).unwrap();

    let mut server = Server::start_on(&data, &[]);
    assert_eq!(settled(&server, 4).await, [0, 1, 2, 3]);
    let identity = std::fs::read_to_string(data.join("oncekey.id")).unwrap();
    assert!(identity.contains("store_id="), "{identity}");
    assert!(server.terminate(Duration::from_secs(30)).success());
    // From then on the directory is watched: losing the store file is refused.
    std::fs::remove_file(data.join("oncekey.redb")).unwrap();
    assert_eq!(serve_to_exit(&data, &[], &[]).0, EXIT_DATA);
}
