//! Tests of the writer thread's batches, driven on the calling thread (the parent module).

use super::*;
use crate::store::embedded::frame;
use crate::store::embedded::identity::{self, Identity};
use crate::store::embedded::recovery;

/// A writer on a fresh store in `dir`, not started: the test calls it directly.
fn writer(dir: &std::path::Path) -> Writer {
    let opened = recovery::open(dir, &redb::Builder::new(), false).unwrap_or_else(|_| panic!());
    Writer {
        db: Arc::new(opened.db),
        wal: opened.wal,
        seq: opened.seq,
        stats: Arc::new(Stats::default()),
        cache: Arc::new(Cache::new(1 << 20)),
        pending: Arc::default(),
        expiring: Default::default(),
        tick: 0,
        tick_at: Instant::now(),
        broken: None,
        clean: false,
        last_checkpoint: Instant::now(),
        checkpoint_every: Duration::from_secs(3600),
    }
}

fn record(key: &str) -> Record {
    let args = crate::store::embedded::tests::claim_args();
    let id = RecordId::new("t", "ns", key);
    let claimed = crate::ledger::claim(&id, None, &args, 1).unwrap();
    claimed.record().clone()
}

/// A request for `op`, and where its answer arrives.
fn request(op: Op) -> (Request, oneshot::Receiver<Result<Done, StoreError>>) {
    let (reply, answer) = oneshot::channel();
    (Request { op, reply }, answer)
}

fn applied(answer: &mut oneshot::Receiver<Result<Done, StoreError>>) -> bool {
    matches!(answer.try_recv(), Ok(Ok(Done::Cas(Cas::Applied))))
}

/// The keys of each frame in the log of the store in `dir`, in log order.
fn frames(dir: &std::path::Path) -> Vec<Vec<Vec<u8>>> {
    let Identity::Store(id) = identity::read(dir).unwrap() else {
        panic!("no store id")
    };
    let bytes = Wal::read(dir).unwrap().expect("a log");
    let mut header = Vec::new();
    frame::encode_header(&mut header, id, 0);
    let (mut at, mut keys) = (header.len(), Vec::new());
    while at < bytes.len() {
        let (frame, len) = frame::decode(&bytes[at..], id).unwrap_or_else(|_| panic!("bad frame"));
        keys.push(frame.effects.iter().map(|e| e.key().to_vec()).collect());
        at += len;
    }
    keys
}

/// A dedup-hit write taken in the same batch as a Claim's insert goes after it, in a frame of
/// its own that is not synced: the Claim's answer waits neither for it nor for its bytes.
#[test]
fn counter_only_writes_go_after_the_others_and_sync_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(dir.path());
    let hot = record("hot");
    let (insert, mut first) = request(Op::Insert {
        put: Put::new(&hot),
        now: 1,
    });
    writer.commit_batch(vec![insert]);
    assert!(applied(&mut first));
    let synced = writer.stats.fsyncs.load(Ordering::Relaxed);

    let mut counted = hot.clone();
    counted.version += 1;
    counted.dedup_hits += 1;
    let (hit, mut hit_answer) = request(Op::Replace {
        put: Put::new(&counted),
        expected_version: hot.version,
        durable: false,
        now: 2,
    });
    let fresh = record("fresh");
    let (claim, mut claim_answer) = request(Op::Insert {
        put: Put::new(&fresh),
        now: 2,
    });
    // The hit was queued first.
    writer.commit_batch(vec![hit, claim]);
    assert!(applied(&mut hit_answer) && applied(&mut claim_answer));
    let key = |r: &Record| codec::encode_id(&r.id);
    assert_eq!(
        frames(dir.path()),
        vec![vec![key(&hot)], vec![key(&fresh)], vec![key(&hot)]],
        "one frame per group, the Claim's first"
    );
    assert_eq!(
        writer.stats.fsyncs.load(Ordering::Relaxed),
        synced + 1,
        "only the Claim's frame is synced"
    );
    assert!(
        writer.wal.unsynced(),
        "the hit's frame waits for the next sync"
    );
}
