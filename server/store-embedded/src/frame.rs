//! The write-ahead log's on-disk format: frames, the header frame that names the log's store and
//! generation, and the mark frames that say how far the log was durably written. Pure encoding
//! and decoding; reading the log file and deciding what a damaged one means live in `wal` and
//! `scan`.
//!
//! A frame is magic "OKW1" (4) + sequence number (8) + payload length (4) + checksum (8), then
//! the payload: the batch's effects. The checksum is the first 8 bytes of SHA-256 over the
//! store's log id, the sequence number and the payload, so a frame of another store never
//! verifies. Batches are numbered from 1. A payload is at most `MAX_PAYLOAD` bytes (what the
//! length field holds): encoding a larger one is refused, never written with a wrapped length;
//! the writer bounds its batches far below it. The header frame is frame number 0 at the start
//! of the log: its one effect removes the outcome of a key no record can have and carries the
//! log's generation, so a version that predates headers reads it as an already-applied frame and
//! passes over it. Mark frames are numbered 0 too, of a fixed size (`MARK_LEN`), built the same
//! way with another such key: each carries the generation and a sequence number up to which the
//! log durably held every frame.

use sha2::{Digest, Sha256};

/// "OKW1": the start of every frame.
const MAGIC: u32 = 0x4F4B_5731;
/// magic (4) + sequence (8) + payload length (4) + checksum (8).
pub(crate) const HEADER: usize = 24;
const PUT: u8 = 1;
const REMOVE: u8 = 2;
const PUT_OUTCOME: u8 = 3;
const REMOVE_OUTCOME: u8 = 4;
/// The key of the header frame's effect (followed by the generation, 8 bytes little-endian). A
/// record key starts with its tenant's length as two bytes; no tenant is 0xff6f bytes long.
const HEADER_KEY: &[u8] = b"\xffoncekey-wal-header:";
/// The key of a mark frame's effect (followed by the generation and the mark, 8 bytes each,
/// little-endian).
const MARK_KEY: &[u8] = b"\xffoncekey-wal-mark:";
/// The bytes of a mark frame.
pub(crate) const MARK_LEN: usize = HEADER + 1 + 4 + MARK_KEY.len() + 16;
/// The largest payload a frame's length field can say.
pub(crate) const MAX_PAYLOAD: usize = u32::MAX as usize;

/// A batch whose effects are too large for one frame; nothing was encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a log frame of {bytes} bytes of effects is over the limit of {max}")]
pub(crate) struct TooLarge {
    /// The payload the effects would take.
    pub bytes: usize,
    /// The most a frame holds.
    pub max: usize,
}

/// One change to the records and outcomes tables, as the log stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
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
    pub(crate) fn key(&self) -> &[u8] {
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
pub(crate) struct Frame {
    pub seq: u64,
    pub effects: Vec<Effect>,
}

impl Frame {
    /// The generation this frame names, if it is a log header.
    pub(crate) fn generation(&self) -> Option<u64> {
        match (self.seq, self.effects.as_slice()) {
            (0, [Effect::RemoveOutcome { key }]) => {
                let tail = key.strip_prefix(HEADER_KEY)?;
                Some(u64::from_le_bytes(tail.try_into().ok()?))
            }
            _ => None,
        }
    }

    /// The generation and the mark this frame carries, if it is a mark frame.
    pub(crate) fn mark(&self) -> Option<(u64, u64)> {
        match (self.seq, self.effects.as_slice()) {
            (0, [Effect::RemoveOutcome { key }]) => {
                let tail = key.strip_prefix(MARK_KEY)?;
                let (generation, mark) = tail.split_at_checked(8)?;
                Some((
                    u64::from_le_bytes(generation.try_into().ok()?),
                    u64::from_le_bytes(mark.try_into().ok()?),
                ))
            }
            _ => None,
        }
    }
}

/// Why the bytes at some offset are not a frame of this store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Defect {
    /// They do not start with a frame's magic number.
    NoFrame,
    /// A frame starts there but its header or payload runs past the end of the log.
    Incomplete,
    /// A whole frame whose checksum fails: damaged, or written for another store.
    Checksum { seq: u64 },
    /// The checksum holds but the payload does not decode (a bug, not damage).
    Undecodable { seq: u64 },
}

impl std::fmt::Display for Defect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Defect::NoFrame => write!(f, "does not start with a frame header"),
            Defect::Incomplete => write!(f, "is incomplete (it runs past the end of the log)"),
            Defect::Checksum { .. } => write!(f, "fails its checksum"),
            Defect::Undecodable { .. } => write!(f, "has a valid checksum but cannot be decoded"),
        }
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

/// The payload `effects` take in a frame.
pub(crate) fn payload_len(effects: &[Effect]) -> usize {
    effects
        .iter()
        .map(|effect| match effect {
            Effect::Put { key, value } | Effect::PutOutcome { key, value } => {
                1 + 4 + key.len() + 4 + value.len()
            }
            Effect::Remove { key } | Effect::RemoveOutcome { key } => 1 + 4 + key.len(),
        })
        .sum()
}

/// Appends one frame to `out`; refused when the effects take more than `MAX_PAYLOAD` bytes.
pub(crate) fn encode(
    out: &mut Vec<u8>,
    id: u64,
    seq: u64,
    effects: &[Effect],
) -> Result<(), TooLarge> {
    encode_within(out, id, seq, effects, MAX_PAYLOAD)
}

/// `encode` with a payload of at most `max` bytes.
fn encode_within(
    out: &mut Vec<u8>,
    id: u64,
    seq: u64,
    effects: &[Effect],
    max: usize,
) -> Result<(), TooLarge> {
    let bytes = payload_len(effects);
    if bytes > max.min(MAX_PAYLOAD) {
        return Err(TooLarge { bytes, max });
    }
    let start = out.len();
    out.reserve(HEADER + bytes);
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
    Ok(())
}

/// Appends the header frame of a log of store `id`, generation `generation`, to `out`.
pub(crate) fn encode_header(out: &mut Vec<u8>, id: u64, generation: u64) {
    let mut key = HEADER_KEY.to_vec();
    key.extend_from_slice(&generation.to_le_bytes());
    encode(out, id, 0, &[Effect::RemoveOutcome { key }]).expect("a small frame");
}

/// Appends a mark frame (`MARK_LEN` bytes) of a log of store `id`, generation `generation`,
/// saying that the log durably held every frame up to sequence number `mark`, to `out`.
pub(crate) fn encode_mark(out: &mut Vec<u8>, id: u64, generation: u64, mark: u64) {
    let mut key = MARK_KEY.to_vec();
    key.extend_from_slice(&generation.to_le_bytes());
    key.extend_from_slice(&mark.to_le_bytes());
    encode(out, id, 0, &[Effect::RemoveOutcome { key }]).expect("a small frame");
}

/// The frame of store `id` at the start of `bytes` and its length.
pub(crate) fn decode(bytes: &[u8], id: u64) -> Result<(Frame, usize), Defect> {
    if bytes.get(..4) != Some(&MAGIC.to_le_bytes()[..]) {
        return Err(match MAGIC.to_le_bytes().starts_with(bytes) {
            true => Defect::Incomplete,
            false => Defect::NoFrame,
        });
    }
    let header = bytes.get(..HEADER).ok_or(Defect::Incomplete)?;
    let seq = u64::from_le_bytes(header[4..12].try_into().expect("8 bytes"));
    let len = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes")) as usize;
    let payload = bytes.get(HEADER..HEADER + len).ok_or(Defect::Incomplete)?;
    if checksum(id, seq, payload) != header[16..24] {
        return Err(Defect::Checksum { seq });
    }
    let effects = decode_effects(payload).ok_or(Defect::Undecodable { seq })?;
    Ok((Frame { seq, effects }, HEADER + len))
}

fn decode_effects(payload: &[u8]) -> Option<Vec<Effect>> {
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
    Some(effects)
}

fn take_bytes(bytes: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let value = bytes.get(4..4usize.checked_add(len)?)?;
    Some((value.to_vec(), &bytes[4 + len..]))
}

/// The next offset at or after `from` where a frame's magic number starts.
pub(crate) fn next_magic(bytes: &[u8], from: usize) -> Option<usize> {
    let magic = MAGIC.to_le_bytes();
    bytes
        .get(from..)?
        .windows(magic.len())
        .position(|w| w == magic)
        .map(|p| from + p)
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

    #[test]
    fn every_effect_round_trips() {
        let effects = vec![
            put("a", "1"),
            Effect::PutOutcome {
                key: b"a".to_vec(),
                value: b"big".to_vec(),
            },
            Effect::Remove { key: b"b".to_vec() },
            Effect::RemoveOutcome { key: b"c".to_vec() },
        ];
        let mut bytes = Vec::new();
        encode(&mut bytes, ID, 5, &effects).unwrap();
        assert_eq!(bytes.len(), HEADER + payload_len(&effects));
        let (frame, len) = decode(&bytes, ID).unwrap();
        assert_eq!((frame.seq, frame.effects, len), (5, effects, bytes.len()));
    }

    #[test]
    fn the_header_names_its_generation_and_is_frame_zero() {
        let mut bytes = Vec::new();
        encode_header(&mut bytes, ID, 0xdead_beef);
        let (frame, _) = decode(&bytes, ID).unwrap();
        assert_eq!(frame.seq, 0);
        assert_eq!(frame.generation(), Some(0xdead_beef));
        // An ordinary frame names none, nor does a removal of a look-alike key in a batch.
        let mut other = Vec::new();
        encode(&mut other, ID, 3, &[put("a", "1")]).unwrap();
        assert_eq!(decode(&other, ID).unwrap().0.generation(), None);
        assert_eq!(frame.mark(), None);
    }

    #[test]
    fn a_mark_names_its_generation_and_mark_in_a_fixed_size() {
        let mut bytes = Vec::new();
        encode_mark(&mut bytes, ID, 0xdead_beef, 12);
        assert_eq!(bytes.len(), MARK_LEN);
        encode_mark(&mut bytes, ID, 1, u64::MAX);
        assert_eq!(bytes.len(), 2 * MARK_LEN);
        let (frame, len) = decode(&bytes, ID).unwrap();
        assert_eq!((frame.seq, len), (0, MARK_LEN));
        assert_eq!(frame.mark(), Some((0xdead_beef, 12)));
        assert_eq!(frame.generation(), None);
        let (frame, _) = decode(&bytes[MARK_LEN..], ID).unwrap();
        assert_eq!(frame.mark(), Some((1, u64::MAX)));
    }

    #[test]
    fn a_frame_over_the_limit_is_refused_and_writes_nothing() {
        let effects = [put("k", &"v".repeat(100))];
        let bytes = payload_len(&effects);
        let mut out = b"before".to_vec();
        assert_eq!(
            encode_within(&mut out, ID, 1, &effects, bytes - 1),
            Err(TooLarge {
                bytes,
                max: bytes - 1
            })
        );
        assert_eq!(out, b"before");
        encode_within(&mut out, ID, 1, &effects, bytes).unwrap();
        assert_eq!(decode(&out[6..], ID).unwrap().0.effects, effects);
    }

    #[test]
    fn each_defect_is_told_apart() {
        let mut bytes = Vec::new();
        encode(&mut bytes, ID, 9, &[put("k", "v")]).unwrap();
        assert_eq!(
            decode(&bytes, ID + 1).unwrap_err(),
            Defect::Checksum { seq: 9 }
        );
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(
            decode(&flipped, ID).unwrap_err(),
            Defect::Checksum { seq: 9 }
        );
        for cut in [2, 10, bytes.len() - 1] {
            assert_eq!(decode(&bytes[..cut], ID).unwrap_err(), Defect::Incomplete);
        }
        assert_eq!(decode(&[0; 40], ID).unwrap_err(), Defect::NoFrame);
        assert_eq!(decode(&[], ID).unwrap_err(), Defect::Incomplete);
        assert_eq!(next_magic(&bytes, 0), Some(0));
        assert_eq!(next_magic(&bytes, 1), None);
    }
}
