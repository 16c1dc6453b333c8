//! The key ring: the keys `--encryption-keys` names, parsed from the file format of
//! docs/api.md#key-ring (`ID SECRET [FLAGS]` per line, `#` comments, blank lines).
//!
//! Parsing checks everything once (ids, secrets, flags, at most one `primary` and one `hmac`)
//! and prepares each key's AEAD and HMAC state, so sealing never parses or fails on a key. A
//! secret never leaves this module in any text: errors name the line and the problem, `Debug`
//! names ids, algorithms and flags only. It does no I/O beyond reading the file in `load`.

use crate::algorithm::Algorithm;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use ring::aead::{LessSafeKey, UnboundKey};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// Bytes of every secret.
pub const SECRET_LEN: usize = 32;
/// Longest key id.
pub const MAX_ID_LEN: usize = 64;

/// One key of the ring, ready to use.
pub(crate) struct Key {
    pub(crate) id: String,
    pub(crate) algorithm: Algorithm,
    secret: [u8; SECRET_LEN],
    aead: LessSafeKey,
}

impl Key {
    fn new(id: &str, algorithm: Algorithm, secret: [u8; SECRET_LEN]) -> Self {
        Self {
            id: id.to_owned(),
            algorithm,
            aead: aead_key(algorithm, &secret),
            secret,
        }
    }

    /// The AEAD key for `algorithm`: the prepared one, or one made from the secret for an
    /// envelope sealed before the key's algorithm flag changed.
    pub(crate) fn aead(&self, algorithm: Algorithm) -> Cow<'_, LessSafeKey> {
        if algorithm == self.algorithm {
            Cow::Borrowed(&self.aead)
        } else {
            Cow::Owned(aead_key(algorithm, &self.secret))
        }
    }
}

fn aead_key(algorithm: Algorithm, secret: &[u8; SECRET_LEN]) -> LessSafeKey {
    // Both algorithms take 32-byte keys: this cannot fail.
    let unbound = UnboundKey::new(algorithm.aead(), secret).expect("a 32-byte AEAD key");
    LessSafeKey::new(unbound)
}

/// The keys of `--encryption-keys`: at most one `primary` (new writes are sealed with it), at
/// most one `hmac` (key privacy hashes with it), any number of others (still open what they
/// sealed).
pub struct KeyRing {
    /// In file order.
    keys: Vec<Key>,
    /// Index in `keys`.
    primary: Option<usize>,
    /// Index in `keys`, and the HMAC key made from its secret.
    hmac: Option<(usize, hmac::Key)>,
}

/// Why a key ring did not load. The message names the line (and the file) and the problem,
/// never a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// A line of the ring is wrong.
    #[error("line {line}: {problem}")]
    Line {
        /// 1-based.
        line: usize,
        /// What is wrong with it.
        problem: String,
    },
    /// The file `load` read does not parse.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        source: Box<RingError>,
    },
    /// The file cannot be read.
    #[error("cannot read {}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// `KeyRing::new_key_line` was asked for an impossible key.
    #[error("{0}")]
    Invalid(String),
}

impl RingError {
    /// The 1-based line the error is about, if it is about one.
    pub fn line(&self) -> Option<usize> {
        match self {
            RingError::Line { line, .. } => Some(*line),
            RingError::File { source, .. } => source.line(),
            RingError::Read { .. } | RingError::Invalid(_) => None,
        }
    }
}

/// Whether `id` is a valid key id: 1..=64 of `A-Z a-z 0-9 . _ -`.
pub fn valid_id(id: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

const BAD_ID: &str = "the key id must be 1 to 64 of A-Z a-z 0-9 . _ -";

/// The flags of one line.
#[derive(Default)]
struct Flags {
    primary: bool,
    hmac: bool,
    algorithm: Option<Algorithm>,
}

impl Flags {
    fn parse<'a>(tokens: impl Iterator<Item = &'a str>) -> Result<Self, String> {
        let mut flags = Flags::default();
        for flag in tokens {
            let seen = match flag {
                "primary" => std::mem::replace(&mut flags.primary, true),
                "hmac" => std::mem::replace(&mut flags.hmac, true),
                _ => match Algorithm::from_name(flag) {
                    Some(algorithm) => {
                        if flags.algorithm.is_some_and(|a| a != algorithm) {
                            return Err("more than one algorithm flag".into());
                        }
                        flags.algorithm.replace(algorithm).is_some()
                    }
                    None => return Err(unknown_flag(flag)),
                },
            };
            if seen {
                return Err(format!("flag {flag} given twice"));
            }
        }
        if flags.primary && flags.hmac {
            return Err("a key cannot be both primary and hmac (use two keys)".into());
        }
        Ok(flags)
    }
}

/// The message for an unknown flag, which names it only when it cannot be a misplaced secret.
fn unknown_flag(flag: &str) -> String {
    const EXPECTED: &str = "expected primary, hmac, aes-256-gcm or chacha20-poly1305";
    let shown = flag.len() <= 24
        && flag
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    match shown {
        true => format!("unknown flag {flag:?}, {EXPECTED}"),
        false => format!("an unknown flag (not shown), {EXPECTED}"),
    }
}

fn decode_secret(text: &str) -> Option<[u8; SECRET_LEN]> {
    STANDARD.decode(text).ok()?.try_into().ok()
}

impl KeyRing {
    /// A ring without keys: nothing is sealed, sealed records cannot be opened, no key privacy.
    pub fn empty() -> KeyRing {
        KeyRing {
            keys: Vec::new(),
            primary: None,
            hmac: None,
        }
    }

    /// Parses the key ring file format (docs/api.md#key-ring).
    pub fn parse(text: &str) -> Result<KeyRing, RingError> {
        let mut ring = KeyRing::empty();
        // The line each key, the primary and the hmac key were on.
        let mut lines: Vec<usize> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = index + 1;
            let fail = |problem: String| RingError::Line { line, problem };
            let content = raw.split('#').next().unwrap_or_default();
            let mut tokens = content.split_whitespace();
            let Some(id) = tokens.next() else { continue };
            if !valid_id(id) {
                return Err(fail(BAD_ID.into()));
            }
            if let Some(first) = ring.keys.iter().position(|k| k.id == id) {
                return Err(fail(format!(
                    "key id {id:?} appears twice (first on line {})",
                    lines[first]
                )));
            }
            let Some(secret) = tokens.next() else {
                return Err(fail(format!("key {id:?} has no secret")));
            };
            let Some(secret) = decode_secret(secret) else {
                return Err(fail(format!(
                    "the secret of key {id:?} is not standard base64 of {SECRET_LEN} bytes"
                )));
            };
            let flags = Flags::parse(tokens).map_err(fail)?;
            let index = ring.keys.len();
            if flags.primary {
                if let Some(first) = ring.primary {
                    return Err(fail(format!(
                        "a second primary key (line {} has one)",
                        lines[first]
                    )));
                }
                ring.primary = Some(index);
            }
            if flags.hmac {
                if let Some((first, _)) = ring.hmac {
                    return Err(fail(format!(
                        "a second hmac key (line {} has one)",
                        lines[first]
                    )));
                }
                ring.hmac = Some((index, hmac::Key::new(hmac::HMAC_SHA256, &secret)));
            }
            let algorithm = flags.algorithm.unwrap_or(Algorithm::Aes256Gcm);
            ring.keys.push(Key::new(id, algorithm, secret));
            lines.push(line);
        }
        Ok(ring)
    }

    /// Reads and parses the key ring file at `path`; errors name the path.
    pub fn load(path: &Path) -> Result<KeyRing, RingError> {
        let text = std::fs::read_to_string(path).map_err(|e| RingError::Read {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        KeyRing::parse(&text).map_err(|e| RingError::File {
            path: path.to_owned(),
            source: Box::new(e),
        })
    }

    /// The id of the key new writes are sealed with; `None`: new writes are stored in clear.
    pub fn primary_id(&self) -> Option<&str> {
        self.primary.map(|i| self.keys[i].id.as_str())
    }

    /// The id of the key key privacy hashes with.
    pub fn hmac_id(&self) -> Option<&str> {
        self.hmac.as_ref().map(|(i, _)| self.keys[*i].id.as_str())
    }

    /// Every key id, in file order.
    pub fn ids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.id.as_str()).collect()
    }

    /// Whether the ring holds a key `id`.
    pub fn contains(&self, id: &str) -> bool {
        self.key(id).is_some()
    }

    /// Whether both rings hash keys alike: the same `hmac` key id and secret, or neither has one.
    pub fn same_hmac(&self, other: &KeyRing) -> bool {
        let hmac = |ring: &KeyRing| {
            ring.hmac
                .as_ref()
                .map(|(i, _)| (ring.keys[*i].id.clone(), ring.keys[*i].secret))
        };
        hmac(self) == hmac(other)
    }

    /// A key ring line for a new key `id` with a fresh random secret, e.g.
    /// `k-2027-01 q3Jq…= primary` (`oncekey new-key`). `algorithm` is a flag name
    /// (`aes-256-gcm`, `chacha20-poly1305`); `None` leaves the default.
    pub fn new_key_line(
        id: &str,
        primary: bool,
        hmac: bool,
        algorithm: Option<&str>,
    ) -> Result<String, RingError> {
        if !valid_id(id) {
            return Err(RingError::Invalid(BAD_ID.into()));
        }
        if primary && hmac {
            return Err(RingError::Invalid(
                "a key cannot be both primary and hmac (use two keys)".into(),
            ));
        }
        let algorithm = match algorithm {
            None => None,
            Some(name) => Some(Algorithm::from_name(name).ok_or_else(|| {
                RingError::Invalid(format!(
                    "unknown algorithm {name:?}, expected aes-256-gcm or chacha20-poly1305"
                ))
            })?),
        };
        let mut secret = [0u8; SECRET_LEN];
        SystemRandom::new()
            .fill(&mut secret)
            .map_err(|_| RingError::Invalid("the system random generator failed".into()))?;
        let mut line = format!("{id} {}", STANDARD.encode(secret));
        for (on, flag) in [(primary, "primary"), (hmac, "hmac")] {
            if on {
                line.push(' ');
                line.push_str(flag);
            }
        }
        if let Some(algorithm) = algorithm {
            line.push(' ');
            line.push_str(algorithm.name());
        }
        Ok(line)
    }

    /// The key `id`.
    pub(crate) fn key(&self, id: &str) -> Option<&Key> {
        self.keys.iter().find(|k| k.id == id)
    }

    /// The primary key.
    pub(crate) fn primary(&self) -> Option<&Key> {
        self.primary.map(|i| &self.keys[i])
    }

    /// The HMAC key of key privacy.
    pub(crate) fn hmac_key(&self) -> Option<&hmac::Key> {
        self.hmac.as_ref().map(|(_, key)| key)
    }
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Ids, algorithms and flags: never a secret.
        let keys: Vec<String> = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, key)| {
                let mut text = format!("{} {}", key.id, key.algorithm.name());
                if self.primary == Some(i) {
                    text.push_str(" primary");
                }
                if self.hmac.as_ref().is_some_and(|(h, _)| *h == i) {
                    text.push_str(" hmac");
                }
                text
            })
            .collect();
        f.debug_struct("KeyRing").field("keys", &keys).finish()
    }
}

#[cfg(test)]
#[path = "keyring_tests.rs"]
mod tests;
