//! The side-effect ledger: an append-only file with one line per performed effect
//! (`key token worker attempt unix-millis`), written by the workers at the moment they perform
//! their effect, outside the service. Duplicates and losses are counted from it.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// One performed effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    /// The operation's key.
    pub key: String,
    /// The fencing token of the lease it ran under.
    pub token: u64,
    /// The worker that performed it.
    pub worker: u32,
    /// The acquisition number of the lease.
    pub attempt: u32,
    /// When (worker clock, Unix millis).
    pub at_ms: u64,
}

/// The append-only effect file.
#[derive(Debug)]
pub struct EffectLog {
    path: PathBuf,
    file: Mutex<std::fs::File>,
}

impl EffectLog {
    /// Creates (truncates) the file at `path`.
    pub fn create(path: &Path) -> EffectLog {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .expect("effect file");
        drop(file);
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .expect("effect file");
        EffectLog {
            path: path.to_owned(),
            file: Mutex::new(file),
        }
    }

    /// Appends one effect, in a single write (O_APPEND), flushed before returning.
    pub fn append(&self, key: &str, token: u64, worker: u32, attempt: u32) {
        let at = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis();
        let line = format!("{key} {token} {worker} {attempt} {at}\n");
        let mut file = self.file.lock().unwrap();
        file.write_all(line.as_bytes()).expect("append effect");
        file.flush().expect("flush effect");
    }

    /// Every effect in file order.
    pub fn read(&self) -> Vec<Effect> {
        let text = std::fs::read_to_string(&self.path).expect("read effect file");
        text.lines()
            .map(|line| {
                let f: Vec<&str> = line.split(' ').collect();
                assert_eq!(f.len(), 5, "torn effect line {line:?}");
                Effect {
                    key: f[0].to_owned(),
                    token: f[1].parse().unwrap(),
                    worker: f[2].parse().unwrap(),
                    attempt: f[3].parse().unwrap(),
                    at_ms: f[4].parse().unwrap(),
                }
            })
            .collect()
    }

    /// Effects grouped by key, each group in file order.
    pub fn by_key(&self) -> BTreeMap<String, Vec<Effect>> {
        let mut map: BTreeMap<String, Vec<Effect>> = BTreeMap::new();
        for e in self.read() {
            map.entry(e.key.clone()).or_default().push(e);
        }
        map
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
