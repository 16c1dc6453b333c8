//! The embedded store's write-ahead log: what makes a write durable before its RPC answers.
//!
//! The writer applies a batch in a redb transaction, appends the batch's effects (records and
//! outcomes put or removed) to this log as one checksummed frame (`frame`), syncs the log (one
//! small sequential `fdatasync`), and only then commits the redb transaction without an fsync of
//! its own. A checkpoint — a durable redb commit, every 50 ms or so — makes the log's frames
//! redundant, and the log starts over right after its header and marks.
//!
//! Every frame carries the batch's sequence number, and every redb transaction records the last
//! sequence number it contains. Frame checksums are keyed with the store's id, so a log left
//! beside another store's database is never replayed into it. Each time the store opens, after
//! replaying what the log held, the log is replaced by a new one whose header names a new
//! generation, recorded in redb in the same breath (see `recovery`): a log kept beside a database
//! restored from a backup is then recognisably not that database's log.
//!
//! Two mark frames follow the header: each sync first writes, into one of them in turn, the last
//! sequence number the sync before it covered — a high-water mark the log is known to hold
//! durably. A log cut short (truncated at a frame boundary, to its header) then ends before its
//! own mark, and a checkpoint records the mark in redb, so an older copy of the log put back is
//! behind the database's. The mark lags one sync, so that a crash in the middle of a sync is never
//! mistaken for a cut: only the frames of the last sync before a crash can be cut off unseen.
//! Two slots, so that a torn mark write leaves the other one whole. What the frames mean on open,
//! torn or damaged, is `scan`'s business.

use super::files;
use super::frame;
use oncekey_store::StoreError;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub(crate) use frame::Effect;

/// The log's file name inside the data directory.
pub const WAL_FILE: &str = "oncekey.wal";

/// The open log.
pub(crate) struct Wal {
    file: File,
    /// The store's id: part of every frame's checksum.
    id: u64,
    /// The log's generation, which its marks name.
    generation: u64,
    /// Where the first mark slot is.
    marks_at: u64,
    /// The slot the next mark goes in (0 or 1).
    slot: u64,
    /// Where the first frame after the header and the marks goes.
    start: u64,
    /// Where the next frame goes.
    offset: u64,
    /// Bytes written since the last sync.
    unsynced: bool,
    buf: Vec<u8>,
    /// The last frame appended.
    appended: u64,
    /// The last frame a completed sync covered.
    synced: u64,
    /// The mark last written into a slot, and the one the log durably holds.
    written: u64,
    marked: u64,
}

fn io(what: &str, e: std::io::Error) -> StoreError {
    StoreError::Internal(format!("write-ahead log: {what}: {e}"))
}

impl Wal {
    /// The bytes of the log in `dir`, or `None` when there is none. Changes nothing.
    pub(crate) fn read(dir: &Path) -> Result<Option<Vec<u8>>, StoreError> {
        match std::fs::read(dir.join(WAL_FILE)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("read", e)),
        }
    }

    /// Replaces the log in `dir` by an empty one of store `id` and `generation`, continuing a
    /// database that holds every frame up to `seq` (atomically; the old one is renamed to `aside`
    /// first when given) and opens it for appending.
    pub(crate) fn create(
        dir: &Path,
        id: u64,
        generation: u64,
        seq: u64,
        aside: Option<&Path>,
    ) -> Result<Self, StoreError> {
        let mut header = Vec::new();
        frame::encode_header(&mut header, id, generation);
        let marks_at = header.len() as u64;
        for _ in 0..2 {
            frame::encode_mark(&mut header, id, generation, seq);
        }
        let file = files::replace(dir, WAL_FILE, &header, aside).map_err(|e| io("create", e))?;
        let start = header.len() as u64;
        Ok(Self {
            file,
            id,
            generation,
            marks_at,
            slot: 0,
            start,
            offset: start,
            unsynced: false,
            buf: Vec::new(),
            appended: seq,
            synced: seq,
            written: seq,
            marked: seq,
        })
    }

    /// Appends batch `seq`'s effects as one frame (not yet synced).
    pub(crate) fn append(&mut self, seq: u64, effects: &[Effect]) -> Result<(), StoreError> {
        self.buf.clear();
        frame::encode(&mut self.buf, self.id, seq, effects)
            .map_err(|e| StoreError::Internal(format!("write-ahead log: {e}")))?;
        self.file
            .write_all_at(&self.buf, self.offset)
            .map_err(|e| io("write", e))?;
        self.offset += self.buf.len() as u64;
        self.appended = seq;
        self.unsynced = true;
        Ok(())
    }

    /// Whether frames were written since the last sync.
    pub(crate) fn unsynced(&self) -> bool {
        self.unsynced
    }

    /// Makes every frame written so far durable, and with them the mark of the last sync.
    pub(crate) fn sync(&mut self) -> Result<(), StoreError> {
        if self.synced > self.written {
            self.buf.clear();
            frame::encode_mark(&mut self.buf, self.id, self.generation, self.synced);
            let at = self.marks_at + self.slot * frame::MARK_LEN as u64;
            self.file
                .write_all_at(&self.buf, at)
                .map_err(|e| io("write", e))?;
            self.slot ^= 1;
            self.written = self.synced;
        }
        self.file.sync_data().map_err(|e| io("sync", e))?;
        self.marked = self.written;
        self.synced = self.appended;
        self.unsynced = false;
        Ok(())
    }

    /// The mark the log durably holds: every frame up to it is in the log (or, once
    /// checkpointed, in redb).
    pub(crate) fn marked(&self) -> u64 {
        self.marked
    }

    /// Bytes of frames since the last reset.
    pub(crate) fn len(&self) -> u64 {
        self.offset - self.start
    }

    /// Starts over after the header and the marks; call only once redb durably holds every frame
    /// written so far.
    pub(crate) fn reset(&mut self) {
        self.offset = self.start;
        self.unsynced = false;
    }
}

#[cfg(test)]
mod tests {
    use super::super::scan::{self, End, Header, Mark};
    use super::*;

    const ID: u64 = 7;

    #[test]
    fn the_log_reads_back_what_was_appended_after_its_header() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Wal::read(dir.path()).unwrap().is_none());
        let mut wal = Wal::create(dir.path(), ID, 1, 0, None).unwrap();
        assert_eq!(wal.len(), 0);
        let put = Effect::Put {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
        };
        wal.append(1, std::slice::from_ref(&put)).unwrap();
        wal.append(2, &[Effect::Remove { key: b"k".to_vec() }])
            .unwrap();
        assert!(wal.unsynced() && wal.len() > 0);
        wal.sync().unwrap();
        let bytes = Wal::read(dir.path()).unwrap().unwrap();
        let scan = scan::scan(&bytes, ID, 0, &[1], Some(1));
        assert_eq!(scan.header, Header::Generation(1));
        assert_eq!(scan.frames.len(), 2);
        assert_eq!(scan.frames[0].effects, vec![put]);
        assert_eq!(scan.end, End::Clean);
        // After a reset the next frame overwrites the first; the second is a leftover.
        wal.reset();
        wal.append(3, &[]).unwrap();
        let bytes = Wal::read(dir.path()).unwrap().unwrap();
        let seqs = |s: scan::Scan| s.frames.iter().map(|f| f.seq).collect::<Vec<_>>();
        assert_eq!(seqs(scan::scan(&bytes, ID, 2, &[1], Some(1))), [3]);
        // A new generation replaces the log, keeping the old one aside when asked.
        let aside = dir.path().join("old");
        drop(wal);
        Wal::create(dir.path(), ID, 2, 0, Some(&aside)).unwrap();
        let bytes = Wal::read(dir.path()).unwrap().unwrap();
        assert_eq!(scan::scan(&bytes, ID, 0, &[2], Some(2)).frames.len(), 0);
        let old = std::fs::read(aside).unwrap();
        assert_eq!(scan::scan(&old, ID, 2, &[1], Some(1)).frames.len(), 1);
    }

    #[test]
    fn each_sync_marks_what_the_sync_before_it_covered() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::create(dir.path(), ID, 1, 10, None).unwrap();
        let mark = || {
            let bytes = Wal::read(dir.path()).unwrap().unwrap();
            scan::scan(&bytes, ID, 10, &[1], Some(1)).mark
        };
        assert_eq!((mark(), wal.marked()), (Mark::At(10), 10));
        wal.append(11, &[]).unwrap();
        wal.append(12, &[]).unwrap();
        wal.sync().unwrap();
        // Nothing synced before this sync: the mark stays.
        assert_eq!((mark(), wal.marked()), (Mark::At(10), 10));
        wal.append(13, &[]).unwrap();
        wal.sync().unwrap();
        assert_eq!((mark(), wal.marked()), (Mark::At(12), 12));
        wal.append(14, &[]).unwrap();
        wal.sync().unwrap();
        assert_eq!((mark(), wal.marked()), (Mark::At(13), 13));
        // Both slots are in use, one at a time.
        let bytes = Wal::read(dir.path()).unwrap().unwrap();
        let start = frame::decode(&bytes, ID).unwrap().1;
        let slot = |i: usize| {
            let at = start + i * frame::MARK_LEN;
            frame::decode(&bytes[at..], ID).unwrap().0.mark().unwrap().1
        };
        assert_eq!((slot(0), slot(1)), (12, 13));
        // A reset starts the frames over, not the marks.
        wal.reset();
        wal.append(15, &[]).unwrap();
        wal.sync().unwrap();
        assert_eq!(mark(), Mark::At(14));
    }
}
