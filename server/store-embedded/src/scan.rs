//! Reading a write-ahead log back when the store opens: which frames continue the database, and
//! what the bytes after them are. Pure: it reads bytes and decides nothing about starting; the
//! open (`recovery`) turns a damaged log into a refusal or, when told to, into accepted loss.
//!
//! The live frames are the ones after the sequence number the database holds (`applied`), each
//! numbered one more than the last. The log is overwritten in place after every checkpoint, so
//! leftovers of frames already checkpointed (numbered at or below `applied`) may follow the live
//! ones, aligned or cut mid-frame. Where the live frames stop at anything but the end of the
//! file or such a leftover, the rest of the file is searched for intact live frames (numbered
//! past the last one replayed):
//! - none: a torn tail, the write a crash interrupted (never acknowledged) — normal;
//! - some: the log is damaged before frames that were written after it, whose writes may have
//!   been acknowledged; replaying only up to the damage would silently drop them.
//!
//! A log made by this version has two mark frames after its header (`wal`); the scan reports the
//! highest mark, which the open holds the live frames and the database's own record against.

use super::frame::{self, Defect, Frame};

/// What a log holds.
#[derive(Debug)]
pub(crate) struct Scan {
    /// What the log starts with.
    pub header: Header,
    /// The live frames, in order, up to the end or the damage.
    pub frames: Vec<Frame>,
    /// What follows them.
    pub end: End,
    /// How far the log says it was durably written.
    pub mark: Mark,
}

/// The high-water mark of a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mark {
    /// The log has no marks: a version without them wrote it, or it is not the database's.
    Unmarked,
    /// The log has marks but none is left: it ends before or inside them (`cut`), or both are
    /// damaged.
    Lost { cut: bool },
    /// The log durably held every frame up to this sequence number (or redb did).
    At(u64),
}

/// How a log starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Header {
    /// A header frame of this store naming this generation.
    Generation(u64),
    /// No header but a frame of this store: a log written by a version without headers.
    Legacy,
    /// Nothing: the file is empty.
    Empty,
    /// Bytes that are no frame of this store: a damaged header, another store's log, or a torn
    /// first frame of a version without headers.
    Invalid(Defect),
}

/// What follows the live frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// The end of the file, or leftovers of frames already checkpointed.
    Clean,
    /// From byte `at` (frame `frame` of the log) on, bytes with no intact live frame in them: the
    /// write a crash interrupted.
    Torn { at: usize, frame: usize },
    /// Frame `frame` of the log, at byte `at`, is damaged or missing, and intact live frames
    /// (sequence numbers `intact`) follow it.
    Damaged {
        at: usize,
        frame: usize,
        damage: Damage,
        intact: Vec<u64>,
    },
}

/// What is wrong where the live frames stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Damage {
    /// The bytes there are no intact frame.
    Defect(Defect),
    /// An intact frame, but not the next in sequence: the ones between are missing.
    OutOfSequence { expected: u64, found: u64 },
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Defect(defect) => defect.fmt(f),
            Damage::OutOfSequence { expected, found } => write!(
                f,
                "is out of sequence (sequence number {found} where {expected} was due)"
            ),
        }
    }
}

/// Reads `bytes`, the log of store `id` whose database holds every frame up to `applied`.
/// `generations` are the header generations that belong to the database as it is: a log with
/// another header is from another generation of the store and yields no frames. The log of
/// generation `marked` has marks after its header.
pub(crate) fn scan(
    bytes: &[u8],
    id: u64,
    applied: u64,
    generations: &[u64],
    marked: Option<u64>,
) -> Scan {
    let (header, mut start) = match frame::decode(bytes, id) {
        _ if bytes.is_empty() => (Header::Empty, 0),
        Ok((first, len)) => match first.generation() {
            Some(generation) => (Header::Generation(generation), len),
            None => (Header::Legacy, 0),
        },
        Err(defect) => (Header::Invalid(defect), 0),
    };
    let mut mark = Mark::Unmarked;
    if let Header::Generation(generation) = header {
        if !generations.contains(&generation) {
            return Scan {
                header,
                frames: Vec::new(),
                end: End::Clean,
                mark,
            };
        }
        if marked == Some(generation) {
            let end = start + 2 * frame::MARK_LEN;
            let Some(slots) = bytes.get(start..end) else {
                return Scan {
                    header,
                    frames: Vec::new(),
                    end: End::Clean,
                    mark: Mark::Lost { cut: true },
                };
            };
            mark = slots
                .chunks(frame::MARK_LEN)
                .filter_map(|slot| frame::decode(slot, id).ok()?.0.mark())
                .filter(|(of, _)| *of == generation)
                .map(|(_, at)| at)
                .max()
                .map_or(Mark::Lost { cut: false }, Mark::At);
            start = end;
        }
    }
    let (frames, end) = live_frames(bytes, start, id, applied);
    Scan {
        header,
        frames,
        end,
        mark,
    }
}

/// The live frames from `start` on, and what follows them.
fn live_frames(bytes: &[u8], start: usize, id: u64, applied: u64) -> (Vec<Frame>, End) {
    let mut frames: Vec<Frame> = Vec::new();
    let mut at = start;
    // Batches count from 1, after the header if there is one.
    let mut number = 1;
    let mut last = applied;
    let damage = loop {
        if at == bytes.len() {
            return (frames, End::Clean);
        }
        match frame::decode(&bytes[at..], id) {
            Ok((next, len)) if next.seq == last + 1 => {
                last = next.seq;
                frames.push(next);
                at += len;
            }
            // Frames the database already holds: passed over before the live ones, the end of
            // the live ones after them.
            Ok((next, len)) if frames.is_empty() && next.seq <= applied => at += len,
            Ok((next, _)) if next.seq <= applied => return (frames, End::Clean),
            Ok((next, _)) => {
                break Damage::OutOfSequence {
                    expected: last + 1,
                    found: next.seq,
                }
            }
            Err(defect) => break Damage::Defect(defect),
        }
        number += 1;
    };
    let intact = intact_after(bytes, at, id, last);
    let end = match intact.is_empty() {
        true => End::Torn { at, frame: number },
        false => End::Damaged {
            at,
            frame: number,
            damage,
            intact,
        },
    };
    (frames, end)
}

/// The sequence numbers of the intact frames of store `id` numbered past `last` anywhere from
/// `from` on.
fn intact_after(bytes: &[u8], from: usize, id: u64, last: u64) -> Vec<u64> {
    let mut seqs = Vec::new();
    let mut at = from;
    while let Some(found) = frame::next_magic(bytes, at) {
        match frame::decode(&bytes[found..], id) {
            Ok((next, len)) => {
                if next.seq > last {
                    seqs.push(next.seq);
                }
                at = found + len;
            }
            Err(_) => at = found + 1,
        }
    }
    seqs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Effect;

    const ID: u64 = 7;
    const GEN: u64 = 42;

    fn put(k: &str, v: &str) -> Effect {
        Effect::Put {
            key: k.into(),
            value: v.into(),
        }
    }

    /// A log with a header, marks of 0 and one frame per sequence number; returns it and each
    /// frame's offset.
    fn log(seqs: &[u64]) -> (Vec<u8>, Vec<usize>) {
        marked_log(seqs, [0, 0])
    }

    /// `log` with marks `marks`.
    fn marked_log(seqs: &[u64], marks: [u64; 2]) -> (Vec<u8>, Vec<usize>) {
        let mut out = Vec::new();
        frame::encode_header(&mut out, ID, GEN);
        for mark in marks {
            frame::encode_mark(&mut out, ID, GEN, mark);
        }
        let mut offsets = Vec::new();
        for &seq in seqs {
            offsets.push(out.len());
            frame::encode(&mut out, ID, seq, &[put(&format!("k{seq}"), "v")]).unwrap();
        }
        (out, offsets)
    }

    fn seqs(scan: &Scan) -> Vec<u64> {
        scan.frames.iter().map(|f| f.seq).collect()
    }

    #[test]
    fn frames_after_the_applied_one_are_replayed_in_order() {
        let (bytes, _) = log(&[5, 6, 7]);
        let scan = scan(&bytes, ID, 4, &[GEN], Some(GEN));
        assert_eq!(scan.header, Header::Generation(GEN));
        assert_eq!((seqs(&scan), scan.end), (vec![5, 6, 7], End::Clean));
        let scan = super::scan(&bytes, ID, 6, &[GEN], Some(GEN));
        assert_eq!((seqs(&scan), scan.end), (vec![7], End::Clean));
        assert!(super::scan(&bytes, ID, 7, &[GEN], Some(GEN))
            .frames
            .is_empty());
    }

    #[test]
    fn a_torn_last_frame_is_a_torn_tail() {
        let (bytes, offsets) = log(&[1, 2, 3]);
        let torn = &bytes[..bytes.len() - 3];
        let scan = scan(torn, ID, 0, &[GEN], Some(GEN));
        assert_eq!(seqs(&scan), [1, 2]);
        assert_eq!(
            scan.end,
            End::Torn {
                at: offsets[2],
                frame: 3
            }
        );
        // A damaged last frame, and garbage after the last frame, too.
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 0xff;
        assert!(matches!(
            super::scan(&flipped, ID, 0, &[GEN], Some(GEN)).end,
            End::Torn { .. }
        ));
        let mut garbage = bytes.clone();
        garbage.extend_from_slice(&[0xab; 100]);
        let scan = super::scan(&garbage, ID, 0, &[GEN], Some(GEN));
        assert_eq!(seqs(&scan), [1, 2, 3]);
        assert!(matches!(scan.end, End::Torn { .. }));
    }

    #[test]
    fn a_damaged_frame_before_intact_ones_is_damage() {
        let (mut bytes, offsets) = log(&[11, 12, 13, 14, 15]);
        // A flipped bit in frame 12's payload.
        bytes[offsets[1] + frame::HEADER + 3] ^= 0x10;
        let scan = scan(&bytes, ID, 10, &[GEN], Some(GEN));
        assert_eq!(seqs(&scan), [11]);
        let End::Damaged {
            at,
            frame,
            damage,
            intact,
        } = scan.end
        else {
            panic!("{:?}", scan.end)
        };
        assert_eq!((at, frame), (offsets[1], 2));
        assert_eq!(damage, Damage::Defect(Defect::Checksum { seq: 12 }));
        assert_eq!(intact, [13, 14, 15]);
    }

    #[test]
    fn a_destroyed_frame_header_is_searched_past() {
        let (mut bytes, offsets) = log(&[1, 2, 3]);
        bytes[offsets[1]..offsets[1] + 8].fill(0);
        let scan = scan(&bytes, ID, 0, &[GEN], Some(GEN));
        assert_eq!(seqs(&scan), [1]);
        assert!(matches!(
            scan.end,
            End::Damaged { damage: Damage::Defect(Defect::NoFrame), ref intact, .. } if intact == &[3]
        ));
    }

    #[test]
    fn a_missing_frame_is_damage() {
        let (bytes, _) = log(&[4, 6, 7]);
        let scan = scan(&bytes, ID, 3, &[GEN], Some(GEN));
        assert_eq!(seqs(&scan), [4]);
        assert!(matches!(
            scan.end,
            End::Damaged {
                damage: Damage::OutOfSequence { expected: 5, found: 6 },
                ref intact,
                ..
            } if intact == &[6, 7]
        ));
    }

    #[test]
    fn leftovers_of_checkpointed_frames_are_not_damage() {
        // Frames 1..=3 were checkpointed (applied = 3), then 4 overwrote the start of the log.
        let (old, _) = log(&[1, 2, 3]);
        let (mut bytes, _) = log(&[4]);
        // Cut mid-frame: the bytes after frame 4 are the rest of the old log.
        let keep = bytes.len() + 5;
        bytes.extend_from_slice(&old[keep..]);
        let scan = scan(&bytes, ID, 3, &[GEN], Some(GEN));
        assert_eq!(seqs(&scan), [4]);
        assert!(matches!(scan.end, End::Torn { .. }), "{:?}", scan.end);
        // Aligned: a whole old frame follows.
        let (mut aligned, _) = log(&[4]);
        let (_, old_offsets) = log(&[1, 2, 3]);
        aligned.extend_from_slice(&old[old_offsets[1]..]);
        let scan = super::scan(&aligned, ID, 3, &[GEN], Some(GEN));
        assert_eq!((seqs(&scan), scan.end), (vec![4], End::Clean));
        // Only old frames: nothing to replay, nothing wrong.
        let scan = super::scan(&old, ID, 3, &[GEN], Some(GEN));
        assert_eq!((seqs(&scan), scan.end), (vec![], End::Clean));
    }

    #[test]
    fn another_generation_or_store_yields_nothing() {
        let (bytes, _) = log(&[1, 2]);
        let scan = scan(&bytes, ID, 0, &[GEN + 1], Some(GEN));
        assert_eq!(scan.header, Header::Generation(GEN));
        assert!(scan.frames.is_empty());
        // Another store's log: its header fails the checksum, and no frame is intact.
        let scan = super::scan(&bytes, ID + 1, 0, &[GEN], Some(GEN));
        assert_eq!(scan.header, Header::Invalid(Defect::Checksum { seq: 0 }));
        assert!(scan.frames.is_empty());
        assert!(matches!(scan.end, End::Torn { at: 0, .. }));
        assert_eq!(
            super::scan(&[], ID, 0, &[GEN], Some(GEN)).header,
            Header::Empty
        );
    }

    #[test]
    fn the_highest_whole_mark_of_the_generation_counts() {
        let (bytes, offsets) = marked_log(&[3, 4], [4, 2]);
        let scan = scan(&bytes, ID, 2, &[GEN], Some(GEN));
        assert_eq!((scan.mark, seqs(&scan)), (Mark::At(4), vec![3, 4]));
        // One slot torn: the other one's.
        let mut torn = bytes.clone();
        torn[offsets[0] - frame::MARK_LEN - 3] ^= 1;
        assert_eq!(
            super::scan(&torn, ID, 2, &[GEN], Some(GEN)).mark,
            Mark::At(2)
        );
        torn[offsets[0] - 3] ^= 1;
        let scan = super::scan(&torn, ID, 2, &[GEN], Some(GEN));
        assert_eq!(
            (scan.mark, seqs(&scan)),
            (Mark::Lost { cut: false }, vec![3, 4])
        );
        // Cut inside the marks, or to the header.
        for cut in [offsets[0] - 1, offsets[0] - 2 * frame::MARK_LEN] {
            let scan = super::scan(&bytes[..cut], ID, 2, &[GEN], Some(GEN));
            assert_eq!(
                (scan.mark, scan.frames.len()),
                (Mark::Lost { cut: true }, 0)
            );
        }
        // A mark of another generation is none.
        let mut other = Vec::new();
        frame::encode_header(&mut other, ID, GEN);
        frame::encode_mark(&mut other, ID, GEN + 1, 9);
        frame::encode_mark(&mut other, ID, GEN, 1);
        assert_eq!(
            super::scan(&other, ID, 0, &[GEN], Some(GEN)).mark,
            Mark::At(1)
        );
    }

    #[test]
    fn a_generation_without_marks_is_read_after_its_header() {
        // What a version without marks wrote.
        let mut bytes = Vec::new();
        frame::encode_header(&mut bytes, ID, GEN);
        for seq in 1..=3 {
            frame::encode(&mut bytes, ID, seq, &[put("k", "v")]).unwrap();
        }
        let scan = scan(&bytes, ID, 1, &[GEN], None);
        assert_eq!(scan.mark, Mark::Unmarked);
        assert_eq!((seqs(&scan), scan.end), (vec![2, 3], End::Clean));
    }

    #[test]
    fn a_log_without_header_is_read_from_its_start() {
        let mut bytes = Vec::new();
        for seq in 1..=3 {
            frame::encode(&mut bytes, ID, seq, &[put("k", "v")]).unwrap();
        }
        let scan = scan(&bytes, ID, 1, &[GEN], Some(GEN));
        assert_eq!(scan.header, Header::Legacy);
        assert_eq!((seqs(&scan), scan.end), (vec![2, 3], End::Clean));
    }
}
