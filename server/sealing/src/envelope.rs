//! Sealing one field: the envelope format of docs/api.md#encryption-at-rest.
//!
//! Binary envelope (bytes fields): `\0okseal\x01` (8 bytes) | algorithm (1 = AES-256-GCM,
//! 2 = ChaCha20-Poly1305) | id length (1 byte) | id | nonce (12 random bytes) | ciphertext and
//! tag. Text envelope (string fields, metadata): `~sealed:` + base64url without padding of the
//! binary envelope. The associated data binds the ciphertext to its record and field
//! (`Aad`), so one moved elsewhere does not open.
//!
//! A value without the magic (or the text prefix) is clear and passes through: records written
//! before a primary key was configured stay readable. A clear value that itself starts like an
//! envelope (a caller's body beginning with the magic, written while no key is primary) is
//! stored *wrapped*: the magic, algorithm byte 0 (none) and the value as it is, so that it is
//! read back as written instead of being taken for a damaged envelope (`wrap_clear`). This module knows nothing of records
//! beyond their identity (`fields` says which fields are sealed and how).

use crate::algorithm::Algorithm;
use crate::keyring::{Key, KeyRing};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use oncekey_ledger::RecordId;
use oncekey_store::{StoreError, Unreadable};
use ring::aead::{Aad as RingAad, Nonce, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// The first bytes of every binary envelope.
pub const MAGIC: &[u8; 8] = b"\0okseal\x01";
/// The start of every text envelope.
pub const TEXT_PREFIX: &str = "~sealed:";
/// The associated data of every field starts with this.
const AAD_DOMAIN: &[u8] = b"oncekey/v1\0";
/// Bytes of an AEAD tag (both algorithms).
const TAG_LEN: usize = 16;

/// The associated data of one record's fields: `oncekey/v1` NUL tenant NUL namespace NUL key
/// NUL, then the field's name.
pub(crate) struct Aad {
    prefix: Vec<u8>,
}

impl Aad {
    /// The associated data of the record `id`'s fields.
    pub(crate) fn of(id: &RecordId) -> Self {
        let mut prefix = Vec::with_capacity(
            AAD_DOMAIN.len() + id.tenant.len() + id.namespace.len() + id.key.len() + 3,
        );
        prefix.extend_from_slice(AAD_DOMAIN);
        for part in [&id.tenant, &id.namespace, &id.key] {
            prefix.extend_from_slice(part.as_bytes());
            prefix.push(0);
        }
        Self { prefix }
    }

    /// The associated data of the field `name` (e.g. `result.body`).
    pub(crate) fn field(&self, name: &str) -> Vec<u8> {
        let mut aad = Vec::with_capacity(self.prefix.len() + name.len());
        aad.extend_from_slice(&self.prefix);
        aad.extend_from_slice(name.as_bytes());
        aad
    }
}

/// The algorithm byte of a wrapped clear value (`wrap_clear`).
const CLEAR: u8 = 0;

/// `plain` wrapped in clear: the magic, algorithm byte 0, then `plain` unchanged. For a clear
/// value that starts like an envelope, stored while no key is primary.
pub(crate) fn wrap_clear(plain: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 1 + plain.len());
    out.extend_from_slice(MAGIC);
    out.push(CLEAR);
    out.extend_from_slice(plain);
    out
}

/// The text form of `wrap_clear`.
pub(crate) fn wrap_clear_text(plain: &[u8]) -> String {
    let mut out = String::from(TEXT_PREFIX);
    URL_SAFE_NO_PAD.encode_string(wrap_clear(plain), &mut out);
    out
}

/// The value a wrapped clear value holds (`None`: not one).
fn unwrap_clear(stored: &[u8]) -> Option<&[u8]> {
    match stored.strip_prefix(MAGIC.as_slice())? {
        [CLEAR, plain @ ..] => Some(plain),
        _ => None,
    }
}

/// The binary envelope of `plain` sealed with `key`.
pub(crate) fn seal(key: &Key, aad: &[u8], plain: &[u8]) -> Vec<u8> {
    let mut nonce = [0u8; NONCE_LEN];
    // The system generator failing is not an error a write could recover from, and a fixed
    // nonce would be a catastrophe: stop here.
    SystemRandom::new()
        .fill(&mut nonce)
        .expect("the system random generator failed");
    let id = key.id.as_bytes();
    let mut out =
        Vec::with_capacity(MAGIC.len() + 2 + id.len() + NONCE_LEN + plain.len() + TAG_LEN);
    out.extend_from_slice(MAGIC);
    out.push(key.algorithm.code());
    // Ids are 1..=64 bytes (`keyring::valid_id`).
    out.push(id.len() as u8);
    out.extend_from_slice(id);
    out.extend_from_slice(&nonce);
    let header = out.len();
    out.extend_from_slice(plain);
    let tag = key
        .aead(key.algorithm)
        .seal_in_place_separate_tag(
            Nonce::assume_unique_for_key(nonce),
            RingAad::from(aad),
            &mut out[header..],
        )
        .expect("sealing fits in memory");
    out.extend_from_slice(tag.as_ref());
    out
}

/// The text envelope of `plain` sealed with `key`.
pub(crate) fn seal_text(key: &Key, aad: &[u8], plain: &[u8]) -> String {
    let envelope = seal(key, aad, plain);
    let mut out = String::with_capacity(TEXT_PREFIX.len() + envelope.len() * 4 / 3 + 4);
    out.push_str(TEXT_PREFIX);
    URL_SAFE_NO_PAD.encode_string(envelope, &mut out);
    out
}

/// A binary envelope taken apart (not opened).
struct Parsed<'a> {
    algorithm: u8,
    id: &'a str,
    nonce: [u8; NONCE_LEN],
    sealed: &'a [u8],
}

/// `stored` taken apart: `None` when it is not an envelope (clear), `Err` (the key id, or "")
/// when it starts like one but is malformed.
fn parse(stored: &[u8]) -> Option<Result<Parsed<'_>, StoreError>> {
    if unwrap_clear(stored).is_some() {
        return None;
    }
    let rest = stored.strip_prefix(MAGIC.as_slice())?;
    Some(parse_after_magic(rest))
}

fn parse_after_magic(rest: &[u8]) -> Result<Parsed<'_>, StoreError> {
    let malformed = || tampered("");
    let (&algorithm, rest) = rest.split_first().ok_or_else(malformed)?;
    let (&id_len, rest) = rest.split_first().ok_or_else(malformed)?;
    let id_len = usize::from(id_len);
    if rest.len() < id_len {
        return Err(malformed());
    }
    let (id, rest) = rest.split_at(id_len);
    let id = std::str::from_utf8(id)
        .ok()
        .filter(|id| crate::keyring::valid_id(id))
        .ok_or_else(malformed)?;
    let (nonce, sealed) = rest
        .split_first_chunk::<NONCE_LEN>()
        .ok_or_else(|| tampered(id))?;
    if sealed.len() < TAG_LEN {
        return Err(tampered(id));
    }
    Ok(Parsed {
        algorithm,
        id,
        nonce: *nonce,
        sealed,
    })
}

/// `StoreError::Unreadable` with cause `Tampered`.
pub(crate) fn tampered(key_id: &str) -> StoreError {
    StoreError::Unreadable {
        key_id: key_id.to_owned(),
        cause: Unreadable::Tampered,
    }
}

/// Opens a binary envelope: `Ok(None)` when `stored` is clear.
pub(crate) fn open(
    ring: &KeyRing,
    aad: &[u8],
    stored: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    if let Some(plain) = unwrap_clear(stored) {
        return Ok(Some(plain.to_vec()));
    }
    let Some(parsed) = parse(stored) else {
        return Ok(None);
    };
    open_parsed(ring, aad, parsed?).map(Some)
}

/// Opens a text envelope: `Ok(None)` when `stored` is clear. The plaintext is bytes: a text
/// field checks it is UTF-8.
pub(crate) fn open_text(
    ring: &KeyRing,
    aad: &[u8],
    stored: &str,
) -> Result<Option<Vec<u8>>, StoreError> {
    let Some(encoded) = stored.strip_prefix(TEXT_PREFIX) else {
        return Ok(None);
    };
    let envelope = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| tampered(""))?;
    if let Some(plain) = unwrap_clear(&envelope) {
        return Ok(Some(plain.to_vec()));
    }
    let parsed = parse(&envelope).unwrap_or_else(|| Err(tampered("")))?;
    open_parsed(ring, aad, parsed).map(Some)
}

fn open_parsed(ring: &KeyRing, aad: &[u8], parsed: Parsed<'_>) -> Result<Vec<u8>, StoreError> {
    let Some(key) = ring.key(parsed.id) else {
        return Err(StoreError::Unreadable {
            key_id: parsed.id.to_owned(),
            cause: Unreadable::MissingKey,
        });
    };
    let algorithm = Algorithm::from_code(parsed.algorithm).ok_or_else(|| tampered(parsed.id))?;
    let mut buffer = parsed.sealed.to_vec();
    let plain_len = key
        .aead(algorithm)
        .open_in_place(
            Nonce::assume_unique_for_key(parsed.nonce),
            RingAad::from(aad),
            &mut buffer,
        )
        .map_err(|_| tampered(parsed.id))?
        .len();
    buffer.truncate(plain_len);
    Ok(buffer)
}

/// Which key a stored bytes field is sealed with: `None` when clear, `Some("")` when it is a
/// malformed envelope.
pub(crate) fn key_id(stored: &[u8]) -> Option<String> {
    parse(stored).map(|parsed| parsed.map(|p| p.id.to_owned()).unwrap_or_default())
}

/// Which key a stored text field is sealed with: `None` when clear, `Some("")` when it is a
/// malformed envelope.
pub(crate) fn text_key_id(stored: &str) -> Option<String> {
    let encoded = stored.strip_prefix(TEXT_PREFIX)?;
    // Only the header is needed: decode a prefix long enough for the longest one (a multiple of
    // 4 characters decodes to whole bytes).
    const HEADER_CHARS: usize = (MAGIC.len() + 2 + crate::keyring::MAX_ID_LEN).div_ceil(3) * 4;
    let head = &encoded.as_bytes()[..encoded.len().min(HEADER_CHARS)];
    let Ok(envelope) = URL_SAFE_NO_PAD.decode(head) else {
        return Some(String::new());
    };
    let Some(rest) = envelope.strip_prefix(MAGIC.as_slice()) else {
        return Some(String::new());
    };
    let id = match rest {
        [CLEAR, ..] => return None,
        [_algorithm, len, rest @ ..] if rest.len() >= usize::from(*len) => {
            std::str::from_utf8(&rest[..usize::from(*len)]).ok()
        }
        _ => None,
    };
    Some(
        id.filter(|id| crate::keyring::valid_id(id))
            .unwrap_or_default()
            .to_owned(),
    )
}
