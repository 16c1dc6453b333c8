//! A write-ahead log that lost acknowledged writes without being damaged — cut short at a frame
//! boundary or to its header, an older copy of it put back, another data directory's log — stops
//! `oncekey serve` with exit code 65 and a one-line message saying what and how to proceed,
//! changing nothing; a plain `kill -9` still starts with every acknowledged write.

use super::*;
use std::path::PathBuf;

/// How many checkpoints the server has made.
async fn checkpoints(server: &Server) -> f64 {
    let (code, text) = http_get(&server.admin, "/metrics").await;
    assert_eq!(code, 200, "{text}");
    metric(&text, "oncekey_embedded_checkpoints_total").expect("the checkpoint counter")
}

/// Waits until the server has made more than `seen` checkpoints (one comes within 50 ms of a
/// write at the default interval).
async fn checkpoint_after(server: &Server, seen: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while checkpoints(server).await <= seen {
        assert!(Instant::now() < deadline, "no checkpoint came");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `oncekey serve` on `data`, which must refuse with exit code 65 and one line of stderr
/// naming each of `needles`, and leave the log and the identity file as they were.
fn refused(data: &Path, needles: &[&str]) {
    let before = files(data);
    let (code, stderr) = serve_to_exit(data, &[], &[]);
    assert_eq!(code, EXIT_DATA, "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("was not opened"))
        .unwrap_or_else(|| panic!("no refusal in:\n{stderr}"));
    for needle in needles.iter().chain(&["--accept-data-loss", "oncekey.wal"]) {
        assert!(line.contains(needle), "no {needle:?} in:\n{line}");
    }
    let after = files(data);
    for file in ["oncekey.wal", "oncekey.id"] {
        assert_eq!(
            after.get(file),
            before.get(file),
            "a refused start changed {file}"
        );
    }
}

fn log_of(data: &Path) -> (PathBuf, Vec<u8>) {
    let path = data.join("oncekey.wal");
    let log = std::fs::read(&path).unwrap();
    (path, log)
}

#[tokio::test]
async fn a_log_cut_at_a_frame_boundary_is_refused() {
    // Five keys claimed and completed: ten synced frames, the last two k4's.
    let (_dir, data) = crashed(5).await;
    let (path, mut log) = log_of(&data);
    let offsets = frames(&log);
    assert!(offsets.len() >= 10, "{} frames", offsets.len());
    log.truncate(offsets[offsets.len() - 2]);
    std::fs::write(&path, &log).unwrap();
    refused(
        &data,
        &["oncekey.wal was cut short", "oncekey.redb lacks them"],
    );

    // Accepted: k4 is lost, and can be claimed again.
    let server = Server::start_with_env(&data, &["--accept-data-loss"], &KEEP_LOG);
    assert_eq!(settled(&server, 5).await, [0, 1, 2, 3]);
    let mut c = server.client("acme").await;
    let again = c.claim(claim(NS, "k4", "{}")).await.unwrap().into_inner();
    assert_eq!(outcome(&again), ClaimOutcome::Acquired);
}

#[tokio::test]
async fn a_log_truncated_to_its_header_is_refused() {
    let (_dir, data) = crashed(3).await;
    let (path, mut log) = log_of(&data);
    log.truncate(frame_len(&log, 0));
    std::fs::write(&path, &log).unwrap();
    refused(&data, &["ends inside its header"]);
}

#[tokio::test]
async fn an_older_copy_of_the_log_put_back_is_refused() {
    // At the default checkpoint interval.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start_on(&data, &[]);
    settle(&server, 3).await;
    let (path, old) = log_of(&data);
    settle_keys(&server, 3..6).await;
    let seen = checkpoints(&server).await;
    checkpoint_after(&server, seen).await;
    // Written after the checkpoint: only the current log holds these.
    settle_keys(&server, 6..8).await;
    server.kill9();
    std::fs::write(&path, &old).unwrap();
    refused(&data, &["is older than oncekey.redb", "put back"]);

    // Accepted: what the checkpoint holds (k6 and k7 may be in any earlier state: a later
    // checkpoint may have caught one between its Claim and its Complete).
    let server = Server::start_on(&data, &["--accept-data-loss"]);
    assert_eq!(settled(&server, 6).await, [0, 1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn a_log_from_another_data_directory_is_refused() {
    let (_ours, data) = crashed(3).await;
    let (_theirs, other) = crashed(3).await;
    let (path, _) = log_of(&data);
    std::fs::copy(other.join("oncekey.wal"), &path).unwrap();
    refused(&data, &["does not start with this store's header"]);
}

#[tokio::test]
async fn a_kill_9_starts_with_every_acknowledged_write() {
    // At the default checkpoint interval, killed at once after the last answer, three times.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for round in 1..=3 {
        let mut server = Server::start_on(&data, &[]);
        assert_eq!(settled(&server, 10 * round).await.len(), 10 * (round - 1));
        settle_keys(&server, 10 * (round - 1)..10 * round).await;
        server.kill9();
    }
    let server = Server::start_on(&data, &[]);
    assert_eq!(settled(&server, 30).await, (0..30).collect::<Vec<_>>());
    assert!(!server.stderr().contains("ERROR"), "{}", server.stderr());
}
