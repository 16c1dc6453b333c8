//! The embedded store's tables and the writes on them: conditional writes (checked against what is
//! stored), the sweep of expired records, and the replay of logged effects. Each function runs
//! inside the writer's transaction and notes what it changed as log `Effect`s.

use super::wal::Effect;
use super::writer::{Done, Op};
use super::{codec, internal, EXPIRY, RECORDS};
use crate::ledger::{Millis, Record, RecordId};
use crate::store::{Cas, StoreError};
use redb::{ReadableTable, Table, WriteTransaction};

/// Applies each op of `batch` in order; one answer per op.
pub(super) fn apply_all<'a>(
    txn: &WriteTransaction,
    batch: impl IntoIterator<Item = &'a Op>,
    effects: &mut Vec<Effect>,
) -> Result<Vec<Result<Done, StoreError>>, StoreError> {
    let mut records = txn.open_table(RECORDS).map_err(internal)?;
    let mut expiry = txn.open_table(EXPIRY).map_err(internal)?;
    Ok(batch
        .into_iter()
        .map(|op| apply(&mut records, &mut expiry, op, effects))
        .collect())
}

pub(super) type Records<'t> = Table<'t, &'static [u8], &'static [u8]>;
pub(super) type Expiry<'t> = Table<'t, (i64, &'static [u8]), ()>;

/// What is stored under `key`, as far as a conditional write needs it: the expiry index entry of
/// any stored record (expired or not), and the version of the record when it is live at `now`.
/// One lookup serves both the condition and the index upkeep of the write that follows; the
/// record is decoded whole only for a conflict's answer (`live`).
fn stored(
    records: &Records<'_>,
    key: &[u8],
    now: Millis,
) -> Result<(Option<Millis>, Option<u64>), StoreError> {
    let Some(bytes) = records.get(key).map_err(internal)? else {
        return Ok((None, None));
    };
    let head = codec::head(bytes.value())?;
    let live = head.expires_at > now;
    Ok((Some(head.expires_at), live.then_some(head.version)))
}

/// The live record under `key`, whole: what a conflict answers with.
fn live(
    records: &Records<'_>,
    id: &RecordId,
    key: &[u8],
    now: Millis,
) -> Result<Option<Record>, StoreError> {
    let Some(bytes) = records.get(key).map_err(internal)? else {
        return Ok(None);
    };
    let record = codec::decode_record(id.clone(), bytes.value())?;
    Ok((!record.is_expired(now)).then_some(record))
}

/// Stores `value` (expiring at `expires_at`) under `key`; `old_expiry` is the expiry of the
/// record it replaces, if any.
fn put(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    key: &[u8],
    value: &[u8],
    expires_at: Millis,
    old_expiry: Option<Millis>,
) -> Result<(), StoreError> {
    if let Some(old) = old_expiry {
        if old != expires_at {
            expiry.remove((old, key)).map_err(internal)?;
        }
    }
    records.insert(key, value).map_err(internal)?;
    expiry.insert((expires_at, key), ()).map_err(internal)?;
    Ok(())
}

/// Removes the record under `key`, which expires at `expires_at`.
fn remove(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    key: &[u8],
    expires_at: Millis,
) -> Result<(), StoreError> {
    records.remove(key).map_err(internal)?;
    expiry.remove((expires_at, key)).map_err(internal)?;
    Ok(())
}

/// Writes `record` under `key` and notes the effect for the log.
fn put_record(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    key: Vec<u8>,
    record: &Record,
    old_expiry: Option<Millis>,
    effects: &mut Vec<Effect>,
) -> Result<Done, StoreError> {
    let value = codec::encode_record(record);
    put(records, expiry, &key, &value, record.expires_at, old_expiry)?;
    effects.push(Effect::Put { key, value });
    Ok(Done::Cas(Cas::Applied))
}

fn apply(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    op: &Op,
    effects: &mut Vec<Effect>,
) -> Result<Done, StoreError> {
    match op {
        Op::Insert { record, now } => {
            let key = codec::encode_id(&record.id);
            match stored(records, &key, *now)? {
                (_, Some(_)) => conflict(records, &record.id, &key, *now),
                (old_expiry, None) => put_record(records, expiry, key, record, old_expiry, effects),
            }
        }
        Op::Replace {
            record,
            expected_version,
            now,
            ..
        } => {
            let key = codec::encode_id(&record.id);
            match stored(records, &key, *now)? {
                (old_expiry, Some(version)) if version == *expected_version => {
                    put_record(records, expiry, key, record, old_expiry, effects)
                }
                _ => conflict(records, &record.id, &key, *now),
            }
        }
        Op::Delete {
            id,
            expected_version,
            now,
        } => {
            let key = codec::encode_id(id);
            match stored(records, &key, *now)? {
                (Some(expires_at), Some(version)) if version == *expected_version => {
                    remove(records, expiry, &key, expires_at)?;
                    effects.push(Effect::Remove { key });
                    Ok(Done::Cas(Cas::Applied))
                }
                _ => conflict(records, id, &key, *now),
            }
        }
        Op::Sweep { now, limit } => sweep(records, expiry, *now, *limit, effects).map(Done::Swept),
        Op::Flush => Ok(Done::Cas(Cas::Applied)),
    }
}

/// A refused conditional write's answer: the live record, whole.
fn conflict(
    records: &Records<'_>,
    id: &RecordId,
    key: &[u8],
    now: Millis,
) -> Result<Done, StoreError> {
    Ok(Done::Cas(Cas::Conflict(live(records, id, key, now)?)))
}

/// Removes up to `limit` records whose expires_at is at or before `now`, oldest first.
fn sweep(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    now: Millis,
    limit: usize,
    effects: &mut Vec<Effect>,
) -> Result<usize, StoreError> {
    let mut due: Vec<(i64, Vec<u8>)> = Vec::new();
    for entry in expiry.range((i64::MIN, &[][..])..).map_err(internal)? {
        let (k, _) = entry.map_err(internal)?;
        let (at, key) = k.value();
        if at > now || due.len() >= limit {
            break;
        }
        due.push((at, key.to_vec()));
    }
    let swept = due.len();
    for (at, key) in due {
        remove(records, expiry, &key, at)?;
        effects.push(Effect::Remove { key });
    }
    Ok(swept)
}

/// Applies one logged effect again; the log holds whole records, so this is idempotent.
pub(super) fn replay(
    records: &mut Records<'_>,
    expiry: &mut Expiry<'_>,
    effect: &Effect,
) -> Result<(), StoreError> {
    let key = effect.key();
    let old = match records.get(key).map_err(internal)? {
        Some(bytes) => Some(codec::expires_at(bytes.value())?),
        None => None,
    };
    match effect {
        Effect::Put { value, .. } => {
            put(records, expiry, key, value, codec::expires_at(value)?, old)
        }
        Effect::Remove { .. } => match old {
            Some(old) => remove(records, expiry, key, old),
            None => Ok(()),
        },
    }
}
