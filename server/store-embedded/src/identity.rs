//! The data directory's identity file, `oncekey.id`: written once, when the directory first holds
//! a store, and naming that store's id (the id `oncekey.redb` and the log's frames carry too).
//!
//! It is what tells a new data directory from one that lost its ledger: without it a missing or
//! emptied `oncekey.redb` would look like a fresh start, and every key could be claimed again.
//! A small text file of `name=value` lines (`#` comments, unknown names ignored, so later versions
//! may add some); it is replaced atomically and never edited in place.

use super::files;
use std::path::Path;

/// The identity file's name inside the data directory.
pub const ID_FILE: &str = "oncekey.id";

/// What the identity file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Identity {
    /// There is none: a new data directory, or one a version without identity files wrote.
    Absent,
    /// The directory holds the store with this id.
    Store(u64),
    /// The file exists but cannot be read as one (the reason).
    Damaged(String),
}

/// A store id as it is written: 16 hex digits.
pub(crate) fn show(id: u64) -> String {
    format!("{id:016x}")
}

/// Reads the identity file of `dir` (never changes it).
pub(crate) fn read(dir: &Path) -> std::io::Result<Identity> {
    let text = match std::fs::read(dir.join(ID_FILE)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Identity::Absent),
        Err(e) => return Err(e),
    };
    Ok(parse(&text))
}

fn parse(bytes: &[u8]) -> Identity {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Identity::Damaged("it is not text".into());
    };
    let value = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .find_map(|line| line.strip_prefix("store_id="));
    match value.map(str::trim) {
        None if bytes.is_empty() => Identity::Damaged("it is empty (0 bytes)".into()),
        None => Identity::Damaged("it has no store_id line".into()),
        Some(hex) => match u64::from_str_radix(hex, 16) {
            Ok(id) if hex.len() == 16 => Identity::Store(id),
            _ => Identity::Damaged(format!("its store_id {hex:?} is not 16 hex digits")),
        },
    }
}

/// Writes (or replaces) the identity file of `dir` for store `id`.
pub(crate) fn write(dir: &Path, id: u64) -> std::io::Result<()> {
    let text = format!(
        "# Oncekey embedded store: this data directory holds the store below (oncekey.redb and its\n\
         # write-ahead log oncekey.wal carry the same id). Do not delete or edit this file: without\n\
         # it a lost oncekey.redb could not be told from a new data directory. See docs/operations.md.\n\
         store_id={}\n\
         written_by=oncekey {}\n",
        show(id),
        env!("CARGO_PKG_VERSION")
    );
    files::replace(dir, ID_FILE, text.as_bytes(), None).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), Identity::Absent);
        write(dir.path(), 0x0123_4567_89ab_cdef).unwrap();
        assert_eq!(
            read(dir.path()).unwrap(),
            Identity::Store(0x0123_4567_89ab_cdef)
        );
        assert_eq!(show(5), "0000000000000005");
    }

    #[test]
    fn a_damaged_identity_says_why() {
        let damaged = |text: &[u8]| match parse(text) {
            Identity::Damaged(why) => why,
            other => panic!("{other:?}"),
        };
        assert!(damaged(b"").contains("empty"));
        assert!(damaged(b"# only a comment\n").contains("no store_id"));
        assert!(damaged(b"store_id=12\n").contains("16 hex"));
        assert!(damaged(b"store_id=zz23456789abcdef\n").contains("16 hex"));
        assert!(damaged(&[0xff, 0xfe]).contains("not text"));
        // Unknown lines are ignored.
        assert_eq!(
            parse(b"later=1\nstore_id=00000000000000ff\n"),
            Identity::Store(255)
        );
    }
}
