//! The data directory's small files and how they change: each is replaced whole (written beside
//! it, synced, renamed over it, the directory synced), so a crash leaves the old or the new one,
//! never a mix; files set aside after accepted data loss get a name that says when.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Makes `dir`'s entries (a new or renamed file) survive a crash.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `dir/name` with `bytes` atomically and returns the new file, open for writing. When
/// `aside` is given, the old file (if any) is renamed to it first.
pub(crate) fn replace(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    aside: Option<&Path>,
) -> std::io::Result<File> {
    let path = dir.join(name);
    let new = dir.join(format!("{name}.new"));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&new)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    if let Some(aside) = aside {
        match std::fs::rename(&path, aside) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    std::fs::rename(&new, &path)?;
    sync_dir(dir)?;
    Ok(file)
}

/// Where `dir/name` goes when it is set aside: `NAME.discarded-<unix ms>`.
pub(crate) fn aside_name(dir: &Path, name: &str) -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    dir.join(format!("{name}.discarded-{now}"))
}

/// The size of `path`, or `None` when it does not exist.
pub(crate) fn size(path: &Path) -> std::io::Result<Option<u64>> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some(meta.len())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replaced_file_holds_the_new_bytes_and_the_old_one_can_be_kept() {
        let dir = tempfile::tempdir().unwrap();
        replace(dir.path(), "f", b"one", None).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"one");
        let aside = aside_name(dir.path(), "f");
        replace(dir.path(), "f", b"two", Some(&aside)).unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"two");
        assert_eq!(std::fs::read(&aside).unwrap(), b"one");
        assert!(!dir.path().join("f.new").exists());
        assert_eq!(size(&dir.path().join("f")).unwrap(), Some(3));
        assert_eq!(size(&dir.path().join("none")).unwrap(), None);
    }
}
