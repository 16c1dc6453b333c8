//! Which fields of a record are sealed, and how: `result.body` and `error.details` as binary
//! envelopes, `error.message` as a text envelope, and `result.metadata` (when not empty) as the
//! one entry `~sealed` whose value is the text envelope of the map's encoding (`encode_metadata`).
//! Empty values are never sealed. Everything else — codes, `content_type`, status, times,
//! history, the parent — stays in clear (docs/security.md#data-at-rest says why).
//!
//! Pure functions over a `Record` and a `KeyRing`: no I/O, no metrics (the `Sealed` store counts).

use crate::envelope::{self, Aad};
use crate::keyring::KeyRing;
use oncekey_ledger::Record;
use oncekey_store::StoreError;
use std::collections::BTreeMap;

/// The associated-data name of the result body.
pub const RESULT_BODY: &str = "result.body";
/// The associated-data name of the result metadata.
pub const RESULT_METADATA: &str = "result.metadata";
/// The associated-data name of the error message.
pub const ERROR_MESSAGE: &str = "error.message";
/// The associated-data name of the error details.
pub const ERROR_DETAILS: &str = "error.details";
/// The one metadata entry of a sealed map.
pub const SEALED_METADATA: &str = "~sealed";

/// Seals the record's sealable fields with the ring's primary key; without a primary key the
/// record is left as it is (new writes are stored in clear). Every non-empty field is sealed,
/// whatever it holds: opening gives back exactly what was sealed.
pub fn seal_record(ring: &KeyRing, record: &mut Record) {
    let Some(key) = ring.primary() else {
        if looks_sealed(record) {
            wrap_record(record);
        }
        return;
    };
    let aad = Aad::of(&record.id);
    if let Some(result) = &mut record.result {
        if !result.body.is_empty() {
            result.body = envelope::seal(key, &aad.field(RESULT_BODY), &result.body);
        }
        if !result.metadata.is_empty() {
            let plain = encode_metadata(&result.metadata);
            let sealed = envelope::seal_text(key, &aad.field(RESULT_METADATA), &plain);
            result.metadata = BTreeMap::from([(SEALED_METADATA.to_owned(), sealed)]);
        }
    }
    if let Some(error) = &mut record.error {
        if !error.message.is_empty() {
            let aad = aad.field(ERROR_MESSAGE);
            error.message = envelope::seal_text(key, &aad, error.message.as_bytes());
        }
        if !error.details.is_empty() {
            error.details = envelope::seal(key, &aad.field(ERROR_DETAILS), &error.details);
        }
    }
}

/// Without a primary key: wraps every field that starts like an envelope (a caller's value that
/// happens to) in clear, so that it reads back as written (`envelope::wrap_clear`).
fn wrap_record(record: &mut Record) {
    if let Some(result) = &mut record.result {
        if result.body.starts_with(envelope::MAGIC) {
            result.body = envelope::wrap_clear(&result.body);
        }
        if sealed_metadata(&result.metadata).is_some() {
            let wrapped = envelope::wrap_clear_text(&encode_metadata(&result.metadata));
            result.metadata = BTreeMap::from([(SEALED_METADATA.to_owned(), wrapped)]);
        }
    }
    if let Some(error) = &mut record.error {
        if error.message.starts_with(envelope::TEXT_PREFIX) {
            error.message = envelope::wrap_clear_text(error.message.as_bytes());
        }
        if error.details.starts_with(envelope::MAGIC) {
            error.details = envelope::wrap_clear(&error.details);
        }
    }
}

/// Opens every sealed field of a stored record; clear fields pass through. A field that cannot
/// be opened fails the whole record (`StoreError::Unreadable`, the first such field's).
pub fn open_record(ring: &KeyRing, record: &mut Record) -> Result<(), StoreError> {
    match open_record_lenient(ring, record) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Opens what can be opened of a stored record, for a listing: a field that cannot be opened is
/// emptied. Returns the first such field's error, if any.
pub fn open_record_lenient(ring: &KeyRing, record: &mut Record) -> Option<StoreError> {
    if !looks_sealed(record) {
        // The common case without a primary key: nothing to open, nothing to allocate.
        return None;
    }
    let aad = Aad::of(&record.id);
    let mut errors = Vec::new();
    if let Some(result) = &mut record.result {
        if let Err(e) = open_bytes(ring, &aad.field(RESULT_BODY), &mut result.body) {
            result.body.clear();
            errors.push(e);
        }
        if let Err(e) = open_metadata(ring, &aad.field(RESULT_METADATA), &mut result.metadata) {
            result.metadata.clear();
            errors.push(e);
        }
    }
    if let Some(error) = &mut record.error {
        if let Err(e) = open_string(ring, &aad.field(ERROR_MESSAGE), &mut error.message) {
            error.message.clear();
            errors.push(e);
        }
        if let Err(e) = open_bytes(ring, &aad.field(ERROR_DETAILS), &mut error.details) {
            error.details.clear();
            errors.push(e);
        }
    }
    errors.into_iter().next()
}

fn open_bytes(ring: &KeyRing, aad: &[u8], value: &mut Vec<u8>) -> Result<(), StoreError> {
    if let Some(plain) = envelope::open(ring, aad, value)? {
        *value = plain;
    }
    Ok(())
}

fn open_string(ring: &KeyRing, aad: &[u8], value: &mut String) -> Result<(), StoreError> {
    if let Some(plain) = envelope::open_text(ring, aad, value)? {
        // Only a UTF-8 message is ever sealed here; anything else was not sealed by us.
        *value = String::from_utf8(plain).map_err(|_| envelope::tampered(&key_id_of(value)))?;
    }
    Ok(())
}

fn open_metadata(
    ring: &KeyRing,
    aad: &[u8],
    map: &mut BTreeMap<String, String>,
) -> Result<(), StoreError> {
    let Some(sealed) = sealed_metadata(map) else {
        return Ok(());
    };
    if let Some(plain) = envelope::open_text(ring, aad, sealed)? {
        *map = decode_metadata(&plain).ok_or_else(|| envelope::tampered(&key_id_of(sealed)))?;
    }
    Ok(())
}

fn key_id_of(text: &str) -> String {
    envelope::text_key_id(text).unwrap_or_default()
}

/// Whether any field of a stored record starts like an envelope.
fn looks_sealed(record: &Record) -> bool {
    let result = record.result.as_ref().is_some_and(|r| {
        r.body.starts_with(envelope::MAGIC) || sealed_metadata(&r.metadata).is_some()
    });
    let error = record.error.as_ref().is_some_and(|e| {
        e.message.starts_with(envelope::TEXT_PREFIX) || e.details.starts_with(envelope::MAGIC)
    });
    result || error
}

/// The text envelope of a sealed metadata map: its one entry `~sealed`, when the value is a text
/// envelope (any other map is clear).
fn sealed_metadata(map: &BTreeMap<String, String>) -> Option<&str> {
    match map.len() {
        1 => map
            .get(SEALED_METADATA)
            .map(String::as_str)
            .filter(|v| v.starts_with(envelope::TEXT_PREFIX)),
        _ => None,
    }
}

/// The key each non-empty sealable field of a stored record is sealed with, in the order
/// `result.body`, `result.metadata`, `error.message`, `error.details`: `Some(id)` (`""` for a
/// malformed envelope), or `None` for a field in clear. Empty fields are left out.
pub fn sealed_with(record: &Record) -> Vec<Option<String>> {
    let mut used = Vec::new();
    if let Some(result) = &record.result {
        if !result.body.is_empty() {
            used.push(envelope::key_id(&result.body));
        }
        if !result.metadata.is_empty() {
            used.push(sealed_metadata(&result.metadata).and_then(envelope::text_key_id));
        }
    }
    if let Some(error) = &record.error {
        if !error.message.is_empty() {
            used.push(envelope::text_key_id(&error.message));
        }
        if !error.details.is_empty() {
            used.push(envelope::key_id(&error.details));
        }
    }
    used
}

/// The plaintext of a sealed metadata map: the number of entries, then each name and value in
/// the map's (sorted) order, each as a 4-byte big-endian length and its UTF-8 bytes. One map has
/// one encoding.
pub fn encode_metadata(map: &BTreeMap<String, String>) -> Vec<u8> {
    let size: usize = map.iter().map(|(k, v)| 8 + k.len() + v.len()).sum();
    let mut out = Vec::with_capacity(4 + size);
    // Metadata is bounded far below 4 GiB by the API.
    out.extend_from_slice(&(map.len() as u32).to_be_bytes());
    for text in map.iter().flat_map(|(k, v)| [k, v]) {
        out.extend_from_slice(&(text.len() as u32).to_be_bytes());
        out.extend_from_slice(text.as_bytes());
    }
    out
}

/// The map `encode_metadata` encoded; `None` when `bytes` is not such an encoding (trailing
/// bytes, a repeated name, text that is not UTF-8).
pub fn decode_metadata(bytes: &[u8]) -> Option<BTreeMap<String, String>> {
    let mut reader = Reader(bytes);
    let count = reader.u32()?;
    let mut map = BTreeMap::new();
    for _ in 0..count {
        let name = reader.text()?;
        let value = reader.text()?;
        map.insert(name, value);
    }
    (reader.0.is_empty() && map.len() == count).then_some(map)
}

/// Reads an `encode_metadata` encoding.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u32(&mut self) -> Option<usize> {
        let (raw, rest) = self.0.split_first_chunk::<4>()?;
        self.0 = rest;
        Some(u32::from_be_bytes(*raw) as usize)
    }

    fn text(&mut self) -> Option<String> {
        let len = self.u32()?;
        if self.0.len() < len {
            return None;
        }
        let (text, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8(text.to_vec()).ok()
    }
}
