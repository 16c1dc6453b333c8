//! Opening a data directory whose log lost acknowledged writes without being damaged: cut short
//! at a frame boundary or to its header, or an older copy of it put back. Each is refused with a
//! message that says what and changes nothing on disk, or accepted with `accept_data_loss`; what
//! cannot be told from a crash (the last sync's frames cut off) opens as a crash would leave it.

use super::recovery_tests::*;
use super::refusal::Problem;
use super::*;

/// A copy of the live store in `live` as a crash would leave it right after its last checkpoint
/// (its database and identity as they are now), with `log` as its log.
fn image(live: &Path, log: &[u8]) -> tempfile::TempDir {
    let image = tempfile::tempdir().unwrap();
    for file in [DB_FILE, ID_FILE] {
        std::fs::copy(live.join(file), image.path().join(file)).unwrap();
    }
    std::fs::write(image.path().join(WAL_FILE), log).unwrap();
    image
}

#[tokio::test]
async fn a_log_cut_short_at_a_frame_boundary_is_refused_until_accepted() {
    // Records 0..6 in frames 1..=6, each synced: the last sync marked the log as holding 1..=5.
    let (dir, frames) = crashed(6).await;
    edit_log(dir.path(), |log| log.truncate(frames[4]));
    let before = snapshot(dir.path(), false);
    let (problem, message) = refused(dir.path()).await;
    assert_eq!(problem, Problem::LogCutShort { last: 4, mark: 5 });
    for needle in [
        "oncekey.wal was cut short: it ends with the writes of sequence number 4",
        "durably held them up to 5",
        "oncekey.redb together with the oncekey.wal copied with it",
    ] {
        assert!(message.contains(needle), "no {needle:?} in {message}");
    }
    assert!(!message.contains('\n'), "not one line: {message}");
    assert_eq!(
        snapshot(dir.path(), false),
        before,
        "a refused open changed it"
    );

    // Accepted: what the log still holds is replayed, the log kept aside.
    let store = open(dir.path(), true).await.unwrap();
    assert_eq!(present(&store, 6).await, [0, 1, 2, 3]);
    assert_eq!(discarded(dir.path(), WAL_FILE), 1);
    store.close().await.unwrap();
    drop(store);
    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(present(&store, 6).await, [0, 1, 2, 3]);
}

#[tokio::test]
async fn a_log_truncated_to_its_header_is_refused() {
    // The header and the marks kept, every frame gone.
    let (dir, frames) = crashed(3).await;
    edit_log(dir.path(), |log| log.truncate(frames[0]));
    assert_eq!(
        refused(dir.path()).await.0,
        Problem::LogCutShort { last: 0, mark: 2 }
    );
    // The header frame alone: the marks are gone too.
    edit_log(dir.path(), |log| {
        log.truncate(frames[0] - 2 * frame::MARK_LEN)
    });
    let (problem, message) = refused(dir.path()).await;
    assert_eq!(problem, Problem::LogMarksLost { cut: true });
    assert!(message.contains("ends inside its header"), "{message}");
    let store = open(dir.path(), true).await.unwrap();
    assert!(present(&store, 3).await.is_empty());
}

#[tokio::test]
async fn the_last_syncs_frames_cut_off_cannot_be_told_from_a_crash() {
    // The mark lags one sync: without the last frame the log looks like a crash before it.
    let (dir, frames) = crashed(3).await;
    edit_log(dir.path(), |log| log.truncate(frames[2]));
    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(present(&store, 3).await, [0, 1]);
}

#[tokio::test]
async fn an_older_copy_of_the_log_is_refused_until_accepted() {
    let live = tempfile::tempdir().unwrap();
    let store = open(live.path(), false).await.unwrap();
    for i in 0..3 {
        insert(&store, i).await;
    }
    let old = std::fs::read(live.path().join(WAL_FILE)).unwrap();
    for i in 3..6 {
        insert(&store, i).await;
    }
    // A checkpoint, then writes that only the current log holds when the crash comes.
    store.flush().await.unwrap();
    let crashed = image(live.path(), &old);
    for i in 6..8 {
        insert(&store, i).await;
    }
    drop(store);

    let before = snapshot(crashed.path(), false);
    let (problem, message) = refused(crashed.path()).await;
    // The old copy marks frames up to 2; the checkpoint saw the log mark up to 5.
    assert_eq!(
        problem,
        Problem::LogOlder {
            log_mark: Some(2),
            checkpoint: 5
        }
    );
    assert!(message.contains("is older than oncekey.redb"), "{message}");
    assert_eq!(snapshot(crashed.path(), false), before);
    // Accepted: oncekey.redb as of its checkpoint; the writes after it are lost.
    let store = open(crashed.path(), true).await.unwrap();
    assert_eq!(present(&store, 8).await, [0, 1, 2, 3, 4, 5]);
    assert_eq!(discarded(crashed.path(), WAL_FILE), 1);
}

#[tokio::test]
async fn the_previous_runs_log_is_refused_once_the_database_moved_past_it() {
    let dir = stopped(2).await;
    let first_run = std::fs::read(dir.path().join(WAL_FILE)).unwrap();
    let store = open(dir.path(), false).await.unwrap();
    store.flush().await.unwrap();
    // A crash right after the open recorded the new log's generation, before it replaced the
    // log: the previous run's log is all there is, and the database needs nothing from it.
    let just_opened = image(dir.path(), &first_run);
    insert(&store, 2).await;
    store.flush().await.unwrap();
    // Once the database holds writes of the new log, the previous run's log is an old copy.
    let moved_on = image(dir.path(), &first_run);
    drop(store);

    let store = open(just_opened.path(), false).await.unwrap();
    assert_eq!(present(&store, 3).await, [0, 1]);
    let (problem, message) = refused(moved_on.path()).await;
    assert_eq!(
        problem,
        Problem::LogOlder {
            log_mark: None,
            checkpoint: 3
        }
    );
    assert!(message.contains("is the previous run's log"), "{message}");
}

#[tokio::test]
async fn a_log_without_marks_from_the_version_before_them_is_replayed() {
    // What a crash of a version with log headers but without marks leaves: the header, then
    // the frames; its database has no record of marks.
    let (dir, frames) = crashed(4).await;
    edit_log(dir.path(), |log| {
        log.drain(frames[0] - 2 * frame::MARK_LEN..frames[0]);
    });
    let db = Database::open(dir.path().join(DB_FILE)).unwrap();
    let txn = db.begin_write().unwrap();
    {
        let mut table = txn
            .open_table(TableDefinition::<&str, u64>::new("meta"))
            .unwrap();
        for key in ["wal_marked_generation", "wal_start", "wal_mark"] {
            table.remove(key).unwrap();
        }
    }
    txn.commit().unwrap();
    drop(db);
    let store = open(dir.path(), false).await.unwrap();
    assert_eq!(present(&store, 4).await, [0, 1, 2, 3]);
}
