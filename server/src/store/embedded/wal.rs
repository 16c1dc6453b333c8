//! The embedded store's write-ahead log: what makes a write durable before its RPC answers.
//!
//! The writer applies a batch in a redb transaction, appends the batch's effects (records and
//! outcomes put or removed) to this log as one checksummed frame, syncs the log (one small
//! sequential `fdatasync`), and only then commits the redb transaction without an fsync of its
//! own. A checkpoint — a durable redb commit, every 50 ms or so — makes the log's frames
//! redundant, and the log starts over at offset 0.
//!
//! Every frame carries the batch's sequence number, and every redb transaction records the last
//! sequence number it contains. Frame checksums are keyed with the database's log id (made when
//! the database is created), so a log left beside a restored backup of another database is
//! never replayed into it. On open, frames after the sequence number redb holds are replayed
//! in order (they put or remove whole rows, so replaying one that redb already has is harmless);
//! replay stops at the first frame that is torn, corrupt, or out of sequence — which is where the
//! last writes that were never acknowledged ended. The log is overwritten in place, so leftovers of
//! an earlier generation sit after the live frames: they fail the sequence check.

use crate::store::StoreError;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The log's file name inside the data directory.
pub const WAL_FILE: &str = "oncekey.wal";

/// "OKW1": the start of every frame.
const MAGIC: u32 = 0x4F4B_5731;
/// magic (4) + sequence (8) + payload length (4) + checksum (8).
const HEADER: usize = 24;
const PUT: u8 = 1;
const REMOVE: u8 = 2;
const PUT_OUTCOME: u8 = 3;
const REMOVE_OUTCOME: u8 = 4;

/// One change to the records and outcomes tables, as the log stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The record stored under `key` is now `value`.
    Put { key: Vec<u8>, value: Vec<u8> },
    /// No record is stored under `key` (nor its outcome).
    Remove { key: Vec<u8> },
    /// The outcome stored apart for the record under `key` is now `value`.
    PutOutcome { key: Vec<u8>, value: Vec<u8> },
    /// No outcome is stored apart for the record under `key`.
    RemoveOutcome { key: Vec<u8> },
}

impl Effect {
    /// The key the effect changes.
    pub fn key(&self) -> &[u8] {
        match self {
            Effect::Put { key, .. }
            | Effect::Remove { key }
            | Effect::PutOutcome { key, .. }
            | Effect::RemoveOutcome { key } => key,
        }
    }
}

/// A frame read back: a batch's sequence number and its effects.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    pub seq: u64,
    pub effects: Vec<Effect>,
}

/// The open log.
pub struct Wal {
    file: File,
    /// The database's log id: part of every frame's checksum.
    id: u64,
    /// Where the next frame goes.
    offset: u64,
    /// Bytes written since the last sync.
    unsynced: bool,
    buf: Vec<u8>,
}

fn io(what: &str, e: std::io::Error) -> StoreError {
    StoreError::Internal(format!("write-ahead log: {what}: {e}"))
}

impl Wal {
    /// Opens (creating if needed) the log in `dir` of the database with log id `id` and returns it
    /// with the frames that follow sequence number `applied`, in order. New frames are written
    /// from offset 0.
    pub fn open(dir: &Path, id: u64, applied: u64) -> Result<(Self, Vec<Frame>), StoreError> {
        let path = dir.join(WAL_FILE);
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io("open", e))?;
        if !existed {
            // The file's directory entry must outlive a crash, or so would the frames in it.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io("sync the data directory", e))?;
        }
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &file, &mut bytes).map_err(|e| io("read", e))?;
        let frames = replayable(&bytes, id, applied);
        let wal = Self {
            file,
            id,
            offset: 0,
            unsynced: false,
            buf: Vec::new(),
        };
        Ok((wal, frames))
    }

    /// Appends batch `seq`'s effects as one frame (not yet synced).
    pub fn append(&mut self, seq: u64, effects: &[Effect]) -> Result<(), StoreError> {
        self.buf.clear();
        encode_frame(&mut self.buf, self.id, seq, effects);
        self.file
            .write_all_at(&self.buf, self.offset)
            .map_err(|e| io("write", e))?;
        self.offset += self.buf.len() as u64;
        self.unsynced = true;
        Ok(())
    }

    /// Whether frames were written since the last sync.
    pub fn unsynced(&self) -> bool {
        self.unsynced
    }

    /// Makes every frame written so far durable.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data().map_err(|e| io("sync", e))?;
        self.unsynced = false;
        Ok(())
    }

    /// Bytes of frames since the last reset.
    pub fn len(&self) -> u64 {
        self.offset
    }

    /// Starts over at offset 0; call only once redb durably holds every frame written so far.
    pub fn reset(&mut self) {
        self.offset = 0;
        self.unsynced = false;
    }
}

fn checksum(id: u64, seq: u64, payload: &[u8]) -> [u8; 8] {
    let mut hash = Sha256::new();
    hash.update(id.to_le_bytes());
    hash.update(seq.to_le_bytes());
    hash.update(payload);
    let digest = hash.finalize();
    digest[..8].try_into().expect("8 bytes")
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Appends one frame to `out`.
fn encode_frame(out: &mut Vec<u8>, id: u64, seq: u64, effects: &[Effect]) {
    let start = out.len();
    out.resize(start + HEADER, 0);
    for effect in effects {
        let (tag, key, value) = match effect {
            Effect::Put { key, value } => (PUT, key, Some(value)),
            Effect::Remove { key } => (REMOVE, key, None),
            Effect::PutOutcome { key, value } => (PUT_OUTCOME, key, Some(value)),
            Effect::RemoveOutcome { key } => (REMOVE_OUTCOME, key, None),
        };
        out.push(tag);
        put_bytes(out, key);
        if let Some(value) = value {
            put_bytes(out, value);
        }
    }
    let payload_len = out.len() - start - HEADER;
    let sum = checksum(id, seq, &out[start + HEADER..]);
    let header = &mut out[start..start + HEADER];
    header[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    header[4..12].copy_from_slice(&seq.to_le_bytes());
    header[12..16].copy_from_slice(&(payload_len as u32).to_le_bytes());
    header[16..24].copy_from_slice(&sum);
}

/// The frame at the start of `bytes` and its length, if it is whole and its checksum holds.
fn decode_frame(bytes: &[u8], id: u64) -> Option<(Frame, usize)> {
    let header = bytes.get(..HEADER)?;
    if u32::from_le_bytes(header[0..4].try_into().ok()?) != MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(header[4..12].try_into().ok()?);
    let len = u32::from_le_bytes(header[12..16].try_into().ok()?) as usize;
    let payload = bytes.get(HEADER..HEADER.checked_add(len)?)?;
    if checksum(id, seq, payload) != header[16..24] {
        return None;
    }
    let mut effects = Vec::new();
    let mut rest = payload;
    while let Some((&tag, tail)) = rest.split_first() {
        let (key, tail) = take_bytes(tail)?;
        rest = match tag {
            PUT | PUT_OUTCOME => {
                let (value, tail) = take_bytes(tail)?;
                effects.push(if tag == PUT {
                    Effect::Put { key, value }
                } else {
                    Effect::PutOutcome { key, value }
                });
                tail
            }
            REMOVE => {
                effects.push(Effect::Remove { key });
                tail
            }
            REMOVE_OUTCOME => {
                effects.push(Effect::RemoveOutcome { key });
                tail
            }
            _ => return None,
        };
    }
    Some((Frame { seq, effects }, HEADER + len))
}

fn take_bytes(bytes: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let value = bytes.get(4..4usize.checked_add(len)?)?;
    Some((value.to_vec(), &bytes[4 + len..]))
}

/// The frames of `bytes` that continue sequence number `applied` without a gap. Frames of an
/// earlier generation (at or before `applied`) are passed over until the first live one.
fn replayable(bytes: &[u8], id: u64, applied: u64) -> Vec<Frame> {
    let mut frames: Vec<Frame> = Vec::new();
    let mut at = 0;
    while let Some((frame, len)) = decode_frame(&bytes[at..], id) {
        let expected = frames.last().map_or(applied + 1, |f| f.seq + 1);
        if frame.seq == expected {
            frames.push(frame);
        } else if !(frames.is_empty() && frame.seq <= applied) {
            break;
        }
        at += len;
    }
    if at < bytes.len() && !frames.is_empty() {
        tracing::info!(
            frames = frames.len(),
            "write-ahead log: replaying up to the first incomplete frame"
        );
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: u64 = 7;

    fn put(k: &str, v: &str) -> Effect {
        Effect::Put {
            key: k.into(),
            value: v.into(),
        }
    }

    fn log(frames: &[(u64, Vec<Effect>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (seq, effects) in frames {
            encode_frame(&mut out, ID, *seq, effects);
        }
        out
    }

    fn seqs(frames: &[Frame]) -> Vec<u64> {
        frames.iter().map(|f| f.seq).collect()
    }

    #[test]
    fn frames_round_trip_in_order() {
        let remove = Effect::Remove { key: b"b".to_vec() };
        let outcome = Effect::PutOutcome {
            key: b"a".to_vec(),
            value: b"big".to_vec(),
        };
        let no_outcome = Effect::RemoveOutcome { key: b"c".to_vec() };
        let bytes = log(&[
            (5, vec![put("a", "1"), outcome.clone(), remove.clone()]),
            (6, vec![no_outcome.clone()]),
        ]);
        let frames = replayable(&bytes, ID, 4);
        assert_eq!(seqs(&frames), [5, 6]);
        assert_eq!(frames[0].effects, vec![put("a", "1"), outcome, remove]);
        assert_eq!(frames[1].effects, vec![no_outcome]);
    }

    #[test]
    fn frames_redb_already_holds_are_skipped() {
        let bytes = log(&[(5, vec![put("a", "1")]), (6, vec![put("a", "2")])]);
        assert_eq!(seqs(&replayable(&bytes, ID, 5)), [6]);
        assert!(replayable(&bytes, ID, 6).is_empty());
    }

    #[test]
    fn a_torn_or_corrupt_frame_ends_the_log() {
        let bytes = log(&[(1, vec![put("a", "1")]), (2, vec![put("b", "2")])]);
        let torn = &bytes[..bytes.len() - 3];
        assert_eq!(seqs(&replayable(torn, ID, 0)), [1]);
        let mut corrupt = bytes.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        assert_eq!(seqs(&replayable(&corrupt, ID, 0)), [1]);
    }

    #[test]
    fn leftovers_of_an_earlier_generation_are_not_replayed() {
        // Generation 1 wrote 1..=3; redb checkpointed 3; generation 2 overwrote the start with 4.
        let old = log(&[
            (1, vec![put("a", "old")]),
            (2, vec![put("a", "older?")]),
            (3, vec![put("b", "x")]),
        ]);
        let mut bytes = log(&[(4, vec![put("a", "new")])]);
        let tail = old.len().saturating_sub(bytes.len());
        bytes.extend_from_slice(&old[old.len() - tail..]);
        assert_eq!(seqs(&replayable(&bytes, ID, 3)), [4]);
        // A gap (frame 5 lost) stops replay even if a later frame is intact.
        let gap = log(&[(4, vec![]), (6, vec![put("c", "1")])]);
        assert_eq!(seqs(&replayable(&gap, ID, 3)), [4]);
        // Nothing live: only old frames, all already applied.
        assert!(replayable(&old, ID, 3).is_empty());
    }

    #[test]
    fn the_log_reopens_with_what_was_appended() {
        let dir = tempfile::tempdir().unwrap();
        let (mut wal, frames) = Wal::open(dir.path(), ID, 0).unwrap();
        assert!(frames.is_empty());
        wal.append(1, &[put("k", "v")]).unwrap();
        wal.append(2, &[Effect::Remove { key: b"k".to_vec() }])
            .unwrap();
        assert!(wal.unsynced());
        wal.sync().unwrap();
        drop(wal);
        let (_, frames) = Wal::open(dir.path(), ID, 0).unwrap();
        assert_eq!(seqs(&frames), [1, 2]);
        let (_, frames) = Wal::open(dir.path(), ID, 2).unwrap();
        assert!(frames.is_empty());
        // Another database's log is never replayed.
        let (_, frames) = Wal::open(dir.path(), ID + 1, 0).unwrap();
        assert!(frames.is_empty());
    }
}
