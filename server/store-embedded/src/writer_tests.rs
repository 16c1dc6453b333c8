//! Tests of the writer thread's batches, driven on the calling thread (the parent module).

use super::*;
use crate::frame;
use crate::identity::{self, Identity};
use crate::recovery;

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
        overlay: Arc::default(),
        expiring: Default::default(),
        tick: 0,
        tick_at: Instant::now(),
        broken: None,
        clean: false,
        last_checkpoint: Instant::now(),
        checkpoint_every: Duration::from_secs(3600),
        max_batch_bytes: MAX_BATCH_BYTES,
    }
}

fn record(key: &str) -> Record {
    let args = crate::tests::claim_args();
    let id = RecordId::new("t", "ns", key);
    let claimed = oncekey_ledger::claim(&id, None, &args, 1).unwrap();
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

/// The frames of the log of the store in `dir` after its header and marks, in log order.
fn log_frames(dir: &std::path::Path) -> Vec<frame::Frame> {
    let Identity::Store(id) = identity::read(dir).unwrap() else {
        panic!("no store id")
    };
    let bytes = Wal::read(dir).unwrap().expect("a log");
    let mut header = Vec::new();
    frame::encode_header(&mut header, id, 0);
    let (mut at, mut frames) = (header.len() + 2 * frame::MARK_LEN, Vec::new());
    while at < bytes.len() {
        let (frame, len) = frame::decode(&bytes[at..], id).unwrap_or_else(|_| panic!("bad frame"));
        frames.push(frame);
        at += len;
    }
    frames
}

/// The keys of each frame in the log of the store in `dir`, in log order.
fn frames(dir: &std::path::Path) -> Vec<Vec<Vec<u8>>> {
    let keys = |f: &frame::Frame| f.effects.iter().map(|e| e.key().to_vec()).collect();
    log_frames(dir).iter().map(keys).collect()
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

/// Writes queued together stop filling a batch once they carry `max_batch_bytes`: the rest go in
/// the next batches, so each log frame holds at most the bound plus one write (however many
/// large results are queued, a frame never nears the 4 GiB its length field holds), and every
/// write is applied.
#[test]
fn a_batch_stops_taking_writes_at_its_byte_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(dir.path());
    writer.max_batch_bytes = 10_000;
    let (tx, rx) = mpsc::channel();
    let mut answers = Vec::new();
    let mut largest = 0;
    for i in 0..8 {
        let mut big = record(&format!("big{i}"));
        big.result = Some(oncekey_ledger::OpResult {
            code: 200,
            body: vec![b'x'; 3_000],
            content_type: "text/plain".into(),
            metadata: Default::default(),
        });
        let put = Put::new(&big);
        let (insert, answer) = request(Op::Insert { put, now: 1 });
        largest = largest.max(insert.op.bytes());
        tx.send(insert).unwrap();
        answers.push(answer);
    }
    drop(tx);
    // Takes everything queued, then stops after a final checkpoint.
    writer.run(&rx);
    assert!(answers.iter_mut().all(applied));
    let frames = log_frames(dir.path());
    let written: usize = frames.iter().map(|f| f.effects.len()).sum();
    assert_eq!(written, 8, "every write is in the log");
    assert!(frames.len() >= 2, "{} frames", frames.len());
    for frame in &frames {
        let bytes = frame::payload_len(&frame.effects);
        assert!(bytes < 10_000 + largest, "a frame of {bytes} bytes");
    }
}
