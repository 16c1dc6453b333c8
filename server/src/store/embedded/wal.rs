//! The embedded store's write-ahead log: what makes a write durable before its RPC answers.
//!
//! The writer applies a batch in a redb transaction, appends the batch's effects (records and
//! outcomes put or removed) to this log as one checksummed frame (`frame`), syncs the log (one
//! small sequential `fdatasync`), and only then commits the redb transaction without an fsync of
//! its own. A checkpoint — a durable redb commit, every 50 ms or so — makes the log's frames
//! redundant, and the log starts over right after its header.
//!
//! Every frame carries the batch's sequence number, and every redb transaction records the last
//! sequence number it contains. Frame checksums are keyed with the store's id, so a log left
//! beside another store's database is never replayed into it. Each time the store opens, after
//! replaying what the log held, the log is replaced by a new one whose header names a new
//! generation, recorded in redb in the same breath (see `recovery`): a log kept beside a database
//! restored from a backup is then recognisably not that database's log. What the frames mean on
//! open, torn or damaged, is `scan`'s business.

use super::files;
use super::frame;
use crate::store::StoreError;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

pub use frame::Effect;

/// The log's file name inside the data directory.
pub const WAL_FILE: &str = "oncekey.wal";

/// The open log.
pub struct Wal {
    file: File,
    /// The store's id: part of every frame's checksum.
    id: u64,
    /// Where the first frame after the header goes.
    start: u64,
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
    /// The bytes of the log in `dir`, or `None` when there is none. Changes nothing.
    pub fn read(dir: &Path) -> Result<Option<Vec<u8>>, StoreError> {
        match std::fs::read(dir.join(WAL_FILE)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io("read", e)),
        }
    }

    /// Replaces the log in `dir` by an empty one of store `id` and `generation` (atomically; the
    /// old one is renamed to `aside` first when given) and opens it for appending.
    pub fn create(
        dir: &Path,
        id: u64,
        generation: u64,
        aside: Option<&Path>,
    ) -> Result<Self, StoreError> {
        let mut header = Vec::new();
        frame::encode_header(&mut header, id, generation);
        let file = files::replace(dir, WAL_FILE, &header, aside).map_err(|e| io("create", e))?;
        let start = header.len() as u64;
        Ok(Self {
            file,
            id,
            start,
            offset: start,
            unsynced: false,
            buf: Vec::new(),
        })
    }

    /// Appends batch `seq`'s effects as one frame (not yet synced).
    pub fn append(&mut self, seq: u64, effects: &[Effect]) -> Result<(), StoreError> {
        self.buf.clear();
        frame::encode(&mut self.buf, self.id, seq, effects);
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
        self.offset - self.start
    }

    /// Starts over after the header; call only once redb durably holds every frame written so far.
    pub fn reset(&mut self) {
        self.offset = self.start;
        self.unsynced = false;
    }
}

#[cfg(test)]
mod tests {
    use super::super::scan::{self, End, Header};
    use super::*;

    const ID: u64 = 7;

    #[test]
    fn the_log_reads_back_what_was_appended_after_its_header() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Wal::read(dir.path()).unwrap().is_none());
        let mut wal = Wal::create(dir.path(), ID, 1, None).unwrap();
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
        let scan = scan::scan(&bytes, ID, 0, &[1]);
        assert_eq!(scan.header, Header::Generation(1));
        assert_eq!(scan.frames.len(), 2);
        assert_eq!(scan.frames[0].effects, vec![put]);
        assert_eq!(scan.end, End::Clean);
        // After a reset the next frame overwrites the first; the second is a leftover.
        wal.reset();
        wal.append(3, &[]).unwrap();
        let bytes = Wal::read(dir.path()).unwrap().unwrap();
        let seqs = |s: scan::Scan| s.frames.iter().map(|f| f.seq).collect::<Vec<_>>();
        assert_eq!(seqs(scan::scan(&bytes, ID, 2, &[1])), [3]);
        // A new generation replaces the log, keeping the old one aside when asked.
        let aside = dir.path().join("old");
        drop(wal);
        Wal::create(dir.path(), ID, 2, Some(&aside)).unwrap();
        let bytes = Wal::read(dir.path()).unwrap().unwrap();
        assert_eq!(scan::scan(&bytes, ID, 0, &[2]).frames.len(), 0);
        let old = std::fs::read(aside).unwrap();
        assert_eq!(scan::scan(&old, ID, 2, &[1]).frames.len(), 1);
    }
}
