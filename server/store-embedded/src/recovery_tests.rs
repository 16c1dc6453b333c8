//! Opening a data directory that lost something: each case is refused with a message that says
//! what and changes nothing on disk, or accepted with `accept_data_loss`; a torn log tail and an
//! earlier version's directory open as they are.

use super::identity::Identity;
use super::refusal::Problem;
use super::scan::Damage;
use super::*;
use oncekey_engine::Clock;
use oncekey_ledger::{ClaimArgs, Semantics};
use std::collections::BTreeMap;
use std::time::Duration;

pub(super) fn options(accept_data_loss: bool) -> OpenOptions {
    OpenOptions {
        accept_data_loss,
        // No timed checkpoint: the log keeps every write, as a crash right after them leaves it.
        checkpoint_every: Duration::from_secs(3600),
        ..OpenOptions::default()
    }
}

/// Opens `dir`, waiting for a dropped store's writer thread to let go of the file.
pub(super) async fn open(dir: &Path, accept: bool) -> Result<EmbeddedStore, OpenError> {
    for _ in 0..100 {
        match EmbeddedStore::open_with_options(dir, options(accept)) {
            Err(OpenError::Store(e)) if e.to_string().contains("already open") => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
    EmbeddedStore::open_with_options(dir, options(accept))
}

/// The problem a refused open names.
pub(super) async fn refused(dir: &Path) -> (Problem, String) {
    match open(dir, false).await {
        Err(OpenError::Refused(refusal)) => {
            let message = refusal.to_string();
            assert!(message.contains("--accept-data-loss"), "{message}");
            assert!(message.contains("Nothing on disk was changed"), "{message}");
            (refusal.problem, message)
        }
        Err(e) => panic!("failed otherwise: {e}"),
        Ok(_) => panic!("opened"),
    }
}

pub(super) fn id(i: usize) -> RecordId {
    RecordId::new("t", "ns", format!("k{i}"))
}

pub(super) async fn insert(store: &EmbeddedStore, i: usize) {
    let args = ClaimArgs::for_test([1; 32], Semantics::AtLeastOnce, 30_000, 3_600_000, "t");
    let now = Clock::System.now();
    let record = oncekey_ledger::claim(&id(i), None, &args, now).unwrap();
    let cas = store.insert_if_absent(record.record(), now).await.unwrap();
    assert!(matches!(cas, Cas::Applied));
}

/// Which of records `0..n` `store` holds.
pub(super) async fn present(store: &EmbeddedStore, n: usize) -> Vec<usize> {
    let now = Clock::System.now();
    let mut found = Vec::new();
    for i in 0..n {
        if store.get(&id(i), now).await.unwrap().is_some() {
            found.push(i);
        }
    }
    found
}

/// Every file of `dir` and a hash of its bytes; redb's file only by name unless `with_db` (redb
/// recovers its own file from a crash when it opens it).
pub(super) fn snapshot(dir: &Path, with_db: bool) -> BTreeMap<String, Vec<u8>> {
    use sha2::Digest;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            let name = e.file_name().into_string().unwrap();
            let hash = match with_db || name != DB_FILE {
                true => sha2::Sha256::digest(std::fs::read(e.path()).unwrap()).to_vec(),
                false => Vec::new(),
            };
            (name, hash)
        })
        .collect()
}

pub(super) fn discarded(dir: &Path, name: &str) -> usize {
    let prefix = format!("{name}.discarded-");
    snapshot(dir, false)
        .keys()
        .filter(|f| f.starts_with(&prefix))
        .count()
}

/// A data directory with records `0..n`, stopped cleanly.
pub(super) async fn stopped(n: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), false).await.unwrap();
    for i in 0..n {
        insert(&store, i).await;
    }
    store.close().await.unwrap();
    dir
}

/// What a crash leaves: redb's file as of its last durable commit and the log holding records
/// `0..n`, one frame each (frame 1 holds record 0). Returns the directory and each frame's offset.
pub(super) async fn crashed(n: usize) -> (tempfile::TempDir, Vec<usize>) {
    let (live, image) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = open(live.path(), false).await.unwrap();
    store.flush().await.unwrap();
    for file in [DB_FILE, ID_FILE] {
        std::fs::copy(live.path().join(file), image.path().join(file)).unwrap();
    }
    for i in 0..n {
        insert(&store, i).await;
    }
    std::fs::copy(live.path().join(WAL_FILE), image.path().join(WAL_FILE)).unwrap();
    let log = std::fs::read(image.path().join(WAL_FILE)).unwrap();
    (image, frame_offsets(&log))
}

/// The offset of each frame after the header and the marks (which are numbered 0).
pub(super) fn frame_offsets(log: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at + frame::HEADER <= log.len() && log[at..at + 4] == *b"1WKO" {
        if log[at + 4..at + 12] != [0; 8] {
            offsets.push(at);
        }
        at +=
            frame::HEADER + u32::from_le_bytes(log[at + 12..at + 16].try_into().unwrap()) as usize;
    }
    offsets
}

pub(super) fn edit_log(dir: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let path = dir.join(WAL_FILE);
    let mut log = std::fs::read(&path).unwrap();
    edit(&mut log);
    std::fs::write(path, log).unwrap();
}

#[tokio::test]
async fn a_new_directory_records_its_identity_and_reopens() {
    let dir = stopped(3).await;
    let Identity::Store(store_id) = identity::read(dir.path()).unwrap() else {
        panic!("no identity file")
    };
    let db = Database::open(dir.path().join(DB_FILE)).unwrap();
    assert_eq!(meta::read(&db).unwrap().id, Some(store_id));
    drop(db);
    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(present(&store, 3).await, [0, 1, 2]);
}

#[tokio::test]
async fn a_lost_database_file_is_refused_until_accepted() {
    for empty in [false, true] {
        let dir = stopped(3).await;
        let path = dir.path().join(DB_FILE);
        match empty {
            true => std::fs::write(&path, b"").unwrap(),
            false => std::fs::remove_file(&path).unwrap(),
        }
        let before = snapshot(dir.path(), true);
        let (problem, message) = refused(dir.path()).await;
        assert!(
            matches!(problem, Problem::DatabaseLost { empty: e, known: Some(_), .. } if e == empty),
            "{problem:?}"
        );
        let state = if empty {
            "is empty (0 bytes)"
        } else {
            "is missing"
        };
        assert!(
            message.contains(&format!("oncekey.redb {state}")),
            "{message}"
        );
        assert_eq!(
            snapshot(dir.path(), true),
            before,
            "a refused open changed the directory"
        );

        let Identity::Store(old_id) = identity::read(dir.path()).unwrap() else {
            panic!()
        };
        let store = open(dir.path(), true).await.unwrap();
        assert!(present(&store, 3).await.is_empty());
        assert_ne!(identity::read(dir.path()).unwrap(), Identity::Store(old_id));
        assert_eq!(discarded(dir.path(), WAL_FILE), 1);
    }
}

#[tokio::test]
async fn a_database_lost_beside_its_log_is_refused_without_an_identity_file() {
    // A directory of a version without identity files: the log shows that it held a store.
    let dir = stopped(1).await;
    std::fs::remove_file(dir.path().join(ID_FILE)).unwrap();
    std::fs::remove_file(dir.path().join(DB_FILE)).unwrap();
    let (problem, message) = refused(dir.path()).await;
    assert!(matches!(
        problem,
        Problem::DatabaseLost {
            known: None,
            log_bytes: Some(_),
            ..
        }
    ));
    assert!(message.contains("oncekey.wal"), "{message}");
    // With nothing but an empty file left by a crash during the very first start: a new store.
    std::fs::remove_file(dir.path().join(WAL_FILE)).unwrap();
    std::fs::write(dir.path().join(DB_FILE), b"").unwrap();
    open(dir.path(), false).await.unwrap();
}

#[tokio::test]
async fn another_stores_database_file_is_refused_until_accepted() {
    let ours = stopped(2).await;
    let theirs = tempfile::tempdir().unwrap();
    let store = open(theirs.path(), false).await.unwrap();
    insert(&store, 5).await;
    store.close().await.unwrap();
    drop(store);
    std::fs::copy(theirs.path().join(DB_FILE), ours.path().join(DB_FILE)).unwrap();
    let (problem, message) = refused(ours.path()).await;
    assert!(matches!(
        problem,
        Problem::DatabaseOfAnotherStore { found: Some(_), .. }
    ));
    assert!(message.contains("belongs to store"), "{message}");
    let store = open(ours.path(), true).await.unwrap();
    assert_eq!(present(&store, 6).await, [5]);
    assert_eq!(
        identity::read(ours.path()).unwrap(),
        identity::read(theirs.path()).unwrap()
    );
}

#[tokio::test]
async fn a_damaged_identity_file_is_refused_until_accepted() {
    let dir = stopped(1).await;
    let Identity::Store(store_id) = identity::read(dir.path()).unwrap() else {
        panic!()
    };
    std::fs::write(dir.path().join(ID_FILE), b"store_id=\n").unwrap();
    let (problem, _) = refused(dir.path()).await;
    assert!(matches!(problem, Problem::IdentityDamaged { .. }));
    let store = open(dir.path(), true).await.unwrap();
    assert_eq!(present(&store, 1).await, [0]);
    assert_eq!(
        identity::read(dir.path()).unwrap(),
        Identity::Store(store_id)
    );
}

#[tokio::test]
async fn a_damaged_frame_before_intact_ones_is_refused_until_accepted() {
    let (dir, frames) = crashed(10).await;
    assert_eq!(frames.len(), 10);
    // A flipped bit in the frame of record 4.
    let at = frames[4];
    edit_log(dir.path(), |log| log[at + frame::HEADER + 2] ^= 0x04);
    let before = snapshot(dir.path(), false);
    let (problem, message) = refused(dir.path()).await;
    let Problem::LogDamaged {
        frame,
        at: found_at,
        damage,
        intact,
        replayable,
    } = problem
    else {
        panic!("{problem:?}")
    };
    assert_eq!((frame, found_at, replayable), (5, at, 4));
    assert!(matches!(
        damage,
        Damage::Defect(frame::Defect::Checksum { .. })
    ));
    assert_eq!(intact.len(), 5);
    let expected = format!("frame 5 at byte {at} fails its checksum, and 5 intact frames");
    assert!(message.contains(&expected), "{message}");
    assert_eq!(
        snapshot(dir.path(), false),
        before,
        "a refused open changed the directory"
    );
    // Refused again, the same way: it changed nothing the check reads.
    assert_eq!(refused(dir.path()).await.1, message);

    let store = open(dir.path(), true).await.unwrap();
    assert_eq!(present(&store, 10).await, [0, 1, 2, 3]);
    assert_eq!(discarded(dir.path(), WAL_FILE), 1);
    // The damage is behind it: the next start needs no flag.
    store.close().await.unwrap();
    drop(store);
    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(present(&store, 10).await, [0, 1, 2, 3]);
}

#[tokio::test]
async fn a_torn_tail_opens_with_every_acknowledged_write() {
    // A frame cut short after the last acknowledged one.
    let (dir, frames) = crashed(6).await;
    edit_log(dir.path(), |log| {
        let last = log[frames[5]..].to_vec();
        log.extend_from_slice(&last[..last.len() - 7]);
    });
    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(
        store
            .stats()
            .replayed
            .load(std::sync::atomic::Ordering::Relaxed),
        6
    );
    assert_eq!(present(&store, 6).await, [0, 1, 2, 3, 4, 5]);
    assert_eq!(discarded(dir.path(), WAL_FILE), 0);

    // The last frame itself torn or damaged: it was never acknowledged; the rest are kept.
    for cut in [true, false] {
        let (dir, frames) = crashed(6).await;
        edit_log(dir.path(), |log| match cut {
            true => log.truncate(log.len() - 5),
            false => log[frames[5] + frame::HEADER + 1] ^= 1,
        });
        let store = open(dir.path(), false).await.unwrap();
        assert_eq!(present(&store, 6).await, [0, 1, 2, 3, 4]);
    }
}

#[tokio::test]
async fn a_missing_log_is_refused_after_a_crash_but_not_after_a_clean_stop() {
    let (dir, _) = crashed(2).await;
    std::fs::remove_file(dir.path().join(WAL_FILE)).unwrap();
    assert_eq!(refused(dir.path()).await.0, Problem::LogMissing);
    // An emptied log, too.
    std::fs::write(dir.path().join(WAL_FILE), b"").unwrap();
    assert!(matches!(
        refused(dir.path()).await.0,
        Problem::LogHeader { .. }
    ));

    let dir = stopped(2).await;
    std::fs::remove_file(dir.path().join(WAL_FILE)).unwrap();
    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(present(&store, 2).await, [0, 1]);
}

#[tokio::test]
async fn a_database_restored_from_a_backup_ignores_the_newer_log() {
    // A backup taken after a clean stop, then more writes and a crash.
    let (dir, _) = crashed(0).await;
    let store = open(dir.path(), false).await.unwrap();
    store.close().await.unwrap();
    drop(store);
    let backup = std::fs::read(dir.path().join(DB_FILE)).unwrap();
    let store = open(dir.path(), false).await.unwrap();
    for i in 0..3 {
        insert(&store, i).await;
    }
    // The crash: the log holds the writes; restoring the backup puts back the older file.
    let log = std::fs::read(dir.path().join(WAL_FILE)).unwrap();
    drop(store);
    let image = tempfile::tempdir().unwrap();
    std::fs::write(image.path().join(DB_FILE), backup).unwrap();
    std::fs::write(image.path().join(WAL_FILE), log).unwrap();
    std::fs::copy(dir.path().join(ID_FILE), image.path().join(ID_FILE)).unwrap();
    // The newer log's frames would continue the backup's sequence, but are not its log's.
    let store = open(image.path(), false).await.unwrap();
    assert!(present(&store, 3).await.is_empty());
}

#[tokio::test]
async fn an_earlier_versions_directory_is_adopted() {
    // What a crash of a version without identity files, log headers and generations leaves.
    let (dir, frames) = crashed(4).await;
    std::fs::remove_file(dir.path().join(ID_FILE)).unwrap();
    edit_log(dir.path(), |log| *log = log.split_off(frames[0]));
    let db = Database::open(dir.path().join(DB_FILE)).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn
            .open_table(TableDefinition::<&str, u64>::new("meta"))
            .unwrap();
        for key in [
            "wal_generation",
            "wal_previous_generation",
            "clean_shutdown",
        ] {
            table.remove(key).unwrap();
        }
    }
    txn.commit().unwrap();
    let store_id = meta::read(&db).unwrap().id.unwrap();
    drop(db);

    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(present(&store, 4).await, [0, 1, 2, 3]);
    assert_eq!(
        identity::read(dir.path()).unwrap(),
        Identity::Store(store_id)
    );

    // A version from before the log: redb alone, no meta table at all.
    let old = tempfile::tempdir().unwrap();
    Database::create(old.path().join(DB_FILE)).unwrap();
    open(old.path(), false).await.unwrap();
    assert!(matches!(
        identity::read(old.path()).unwrap(),
        Identity::Store(_)
    ));
}
