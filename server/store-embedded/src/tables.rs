//! The embedded store's tables and the writes on them: conditional writes (checked against what is
//! stored), the sweep of expired records, and the replay of logged effects. Each function runs
//! inside the writer's transaction and notes what it changed as log `Effect`s.
//!
//! A record's large outcome lives in the outcomes table under the record's key (see `codec`). A
//! write stores it only when it differs from the stored one, so rewriting a record for its
//! counters or lease does not rewrite a result of up to a MiB; removing a record removes it.
//! Every write and removal also moves the record's entries in the listing indexes (`index`) and
//! the expiry index; the listing and expiry moves are not written here but noted for the writer,
//! which writes their net effect at its checkpoints (`pending`), so the sweep merges the expiry
//! moves over the expiry table.

use super::codec::{self, Head};
use super::index::{Entry, Index};
use super::overlay::{Map, State};
use super::pending::{Change, Moves};
use super::rows::Rows;
use super::wal::Effect;
use super::writer::{Done, Op, Put};
use super::{internal, EXPIRY};
use oncekey_ledger::{Millis, Record, RecordId};
use oncekey_store::{Cas, StoreError};
use redb::{ReadableTable, Table, WriteTransaction};
use std::collections::BTreeMap;

/// The tables a write changes, open in the writer's transaction.
pub(super) struct Tables<'t> {
    rows: Rows<'t>,
    expiry: Table<'t, (i64, &'static [u8]), ()>,
    index: Index<'t>,
    /// The expiry moves not in `expiry` yet: the writer's, lent for a batch.
    expiring: Moves<i64>,
    /// Whether `expiry` was written.
    wrote: bool,
}

impl<'t> Tables<'t> {
    /// Opens (creating if needed) every table in `txn`; records are written straight into
    /// theirs (recovery).
    pub(super) fn open(txn: &'t WriteTransaction) -> Result<Self, StoreError> {
        Self::open_over(txn, None)
    }

    /// Opens every table in `txn`, records staged over `overlay` when given (`rows`).
    fn open_over(txn: &'t WriteTransaction, overlay: Option<&'t Map>) -> Result<Self, StoreError> {
        Ok(Self {
            rows: Rows::open(txn, overlay)?,
            expiry: txn.open_table(EXPIRY).map_err(internal)?,
            index: Index::open(txn)?,
            expiring: Moves::default(),
            wrote: false,
        })
    }

    /// The head of whatever record is stored under `key`, expired or not.
    fn head(&self, key: &[u8]) -> Result<Option<Head>, StoreError> {
        match self.rows.get(key)? {
            Some(stored) => codec::head(stored.row()).map(Some),
            None => Ok(None),
        }
    }

    /// The live record under `key`, whole: what a conflict answers with.
    fn live(&self, id: &RecordId, key: &[u8], now: Millis) -> Result<Option<Record>, StoreError> {
        let Some(stored) = self.rows.get(key)? else {
            return Ok(None);
        };
        let row = stored.row();
        let record = match codec::head(row)?.outcome_apart {
            true => self.rows.with_outcome(key, &stored, |outcome| {
                codec::decode_record(id.clone(), row, outcome)
            })??,
            false => codec::decode_record(id.clone(), row, None)?,
        };
        Ok((!record.is_expired(now)).then_some(record))
    }

    /// Where the record stored under `key`, whose head is `head`, is indexed.
    fn entry(&self, key: &[u8], head: &Head) -> Result<Entry, StoreError> {
        match head.has_parent {
            false => Ok(Entry {
                bucket: head.bucket,
                parent: None,
            }),
            true => match self.rows.get(key)? {
                Some(stored) => Entry::of(head, stored.row()),
                None => Ok(Entry::default()),
            },
        }
    }

    /// Moves the indexes of the record `row` (expiring at `expires_at`) about to be stored under
    /// `key`, replacing the record `old` describes. A record that never expires before it
    /// settles (`None`) has no entry in the expiry index, so the sweeper never meets it.
    fn reindex(
        &mut self,
        key: &[u8],
        row: &[u8],
        expires_at: Option<Millis>,
        old: Option<Head>,
    ) -> Result<(), StoreError> {
        let old_at = old.and_then(|h| h.expires_at);
        if old_at != expires_at {
            self.expiring.change(key.to_vec(), old_at, expires_at);
        }
        let was = old.map(|h| self.entry(key, &h)).transpose()?;
        let is = Entry::of(&codec::head(row)?, row)?;
        self.index.moved(key, was.as_ref(), Some(&is))
    }

    /// Removes the record under `key`, whose head is `old`, its outcome and its index entries.
    fn remove(&mut self, key: &[u8], old: Head) -> Result<(), StoreError> {
        let was = self.entry(key, &old)?;
        self.rows.remove(key)?;
        if old.expires_at.is_some() {
            self.expiring.change(key.to_vec(), old.expires_at, None);
        }
        self.index.moved(key, Some(&was), None)
    }

    /// Writes `put` (its bytes move into the effects), replacing the record `old` describes, and
    /// notes the effects for the log. Its outcome is written only if it changed.
    fn put_record(
        &mut self,
        put: &mut Put,
        old: Option<Head>,
        effects: &mut Vec<Effect>,
    ) -> Result<Done, StoreError> {
        let key = std::mem::take(&mut put.key);
        let row = std::mem::take(&mut put.encoded.row);
        self.reindex(&key, &row, put.expires_at, old)?;
        let had_outcome = old.is_some_and(|h| h.outcome_apart);
        let outcome = put.encoded.outcome.take();
        let changed = match &outcome {
            Some(outcome) => !(had_outcome && self.outcome_is(&key, outcome)?),
            None => had_outcome,
        };
        if changed {
            effects.push(match &outcome {
                Some(value) => Effect::PutOutcome {
                    key: key.clone(),
                    value: value.clone(),
                },
                None => Effect::RemoveOutcome { key: key.clone() },
            });
        }
        self.rows.put(&key, &row, outcome, changed)?;
        effects.push(Effect::Put { key, value: row });
        Ok(Done::Cas(Cas::Applied))
    }

    /// Whether the outcome stored apart under `key` is `outcome`.
    fn outcome_is(&self, key: &[u8], outcome: &[u8]) -> Result<bool, StoreError> {
        match self.rows.get(key)? {
            Some(stored) => self
                .rows
                .with_outcome(key, &stored, |stored| stored == Some(outcome)),
            None => Ok(false),
        }
    }

    /// Applies one conditional write or sweep; a write's bytes move into the effects.
    fn apply(&mut self, op: &mut Op, effects: &mut Vec<Effect>) -> Result<Done, StoreError> {
        match op {
            Op::Insert { put, now } => match self.head(&put.key)? {
                Some(old) if old.is_live(*now) => self.conflict(&put.id, &put.key, *now),
                old => self.put_record(put, old, effects),
            },
            Op::Replace {
                put,
                expected_version,
                now,
                ..
            } => match self.head(&put.key)? {
                Some(old) if old.is_live(*now) && old.version == *expected_version => {
                    self.put_record(put, Some(old), effects)
                }
                _ => self.conflict(&put.id, &put.key, *now),
            },
            Op::Delete {
                id,
                expected_version,
                now,
            } => {
                let key = codec::encode_id(id);
                match self.head(&key)? {
                    Some(old) if old.is_live(*now) && old.version == *expected_version => {
                        self.remove(&key, old)?;
                        effects.push(Effect::Remove { key });
                        Ok(Done::Cas(Cas::Applied))
                    }
                    _ => self.conflict(id, &key, *now),
                }
            }
            Op::Sweep { now, limit } => self.sweep(*now, *limit, effects).map(Done::Swept),
            Op::Flush | Op::Close => Ok(Done::Cas(Cas::Applied)),
        }
    }

    /// A refused conditional write's answer: the live record, whole.
    fn conflict(&self, id: &RecordId, key: &[u8], now: Millis) -> Result<Done, StoreError> {
        Ok(Done::Cas(Cas::Conflict(self.live(id, key, now)?)))
    }

    /// Removes up to `limit` records whose expires_at is at or before `now`, oldest first: the
    /// expiry table's entries that no move made stale, and the moves' own.
    fn sweep(
        &mut self,
        now: Millis,
        limit: usize,
        effects: &mut Vec<Effect>,
    ) -> Result<usize, StoreError> {
        let mut due: Vec<(i64, Vec<u8>)> = Vec::new();
        for entry in self.expiry.range((i64::MIN, &[][..])..).map_err(internal)? {
            let (k, _) = entry.map_err(internal)?;
            let (at, key) = k.value();
            if at > now || due.len() >= limit {
                break;
            }
            let moved = self.expiring.get(key).is_some_and(|m| m.base == Some(at));
            if !moved {
                due.push((at, key.to_vec()));
            }
        }
        due.extend(self.expiring.due(now).map(|(at, key)| (at, key.to_vec())));
        due.sort_unstable();
        due.truncate(limit);
        let swept = due.len();
        for (at, key) in due {
            match self.head(&key)? {
                Some(old) => self.remove(&key, old)?,
                // An index entry without its record: drop the entry.
                None => {
                    self.expiry.remove((at, key.as_slice())).map_err(internal)?;
                    self.wrote = true;
                    self.rows.remove(&key)?;
                }
            }
            effects.push(Effect::Remove { key });
        }
        Ok(swept)
    }

    /// Writes the listing and expiry moves made so far into their tables now (recovery).
    pub(super) fn write_indexes(&mut self) -> Result<(), StoreError> {
        self.expiring.write(&mut self.expiry)?;
        self.expiring.clear();
        self.index.write_changes()
    }

    /// Applies one logged effect again; the log holds whole rows, so this is idempotent.
    pub(super) fn replay(&mut self, effect: &Effect) -> Result<(), StoreError> {
        let key = effect.key();
        match effect {
            Effect::Put { value, .. } => {
                let old = self.head(key)?;
                self.reindex(key, value, codec::expires_at(value)?, old)?;
                self.rows.put(key, value, None, false)
            }
            Effect::Remove { .. } => match self.head(key)? {
                Some(old) => self.remove(key, old),
                None => Ok(()),
            },
            Effect::PutOutcome { value, .. } => self.rows.replay_outcome(key, Some(value)),
            Effect::RemoveOutcome { .. } => self.rows.replay_outcome(key, None),
        }
    }
}

/// What a batch did besides its answers.
pub(super) struct Applied {
    /// The records it wrote, for the overlay (empty without one).
    pub staged: BTreeMap<Vec<u8>, State>,
    /// Whether it wrote to a table of the transaction (the children or expiry index), which must
    /// then be committed.
    pub wrote: bool,
}

/// Applies each op of `batch` in order; one answer per op. Records are staged over `overlay`
/// when given, else written into their table. The listing moves it made are added to
/// `changes`, and its expiry moves to `expiring` (the expiry moves not yet written), neither
/// written.
pub(super) fn apply_all<'a>(
    txn: &WriteTransaction,
    overlay: Option<&Map>,
    batch: impl IntoIterator<Item = &'a mut Op>,
    effects: &mut Vec<Effect>,
    changes: &mut Vec<Change<u8>>,
    expiring: &mut Moves<i64>,
) -> Result<(Vec<Result<Done, StoreError>>, Applied), StoreError> {
    let mut tables = Tables::open_over(txn, overlay)?;
    tables.expiring = std::mem::take(expiring);
    let answers = batch
        .into_iter()
        .map(|op| tables.apply(op, effects))
        .collect();
    changes.extend(tables.index.take_changes());
    *expiring = std::mem::take(&mut tables.expiring);
    let applied = Applied {
        staged: tables.rows.take_staged(),
        wrote: tables.wrote || tables.index.wrote(),
    };
    Ok((answers, applied))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oncekey_ledger::{ClaimArgs, OpError, OpResult, Semantics};
    use redb::{Database, ReadableTableMetadata};

    fn record(version: u64, body: usize) -> Record {
        let args = ClaimArgs::for_test([1; 32], Semantics::AtLeastOnce, 1000, 60_000, "t");
        let id = RecordId::new("t", "ns", "big");
        let mut record = oncekey_ledger::claim(&id, None, &args, 1)
            .unwrap()
            .record()
            .clone();
        record.version = version;
        record.result = (body > 0).then(|| OpResult {
            code: 200,
            body: vec![b'x'; body],
            content_type: "application/json".into(),
            metadata: Default::default(),
        });
        record
    }

    /// What each write logged, by kind, and how many outcomes the table holds afterwards.
    fn write(db: &Database, op: Op) -> (Vec<&'static str>, u64, Done) {
        let txn = db.begin_write().unwrap();
        let mut effects = Vec::new();
        let mut op = op;
        let (mut changes, mut expiring) = (Vec::new(), Moves::default());
        let (mut answers, _) = apply_all(
            &txn,
            None,
            [&mut op],
            &mut effects,
            &mut changes,
            &mut expiring,
        )
        .unwrap();
        let done = answers.remove(0).unwrap();
        let outcomes = txn.open_table(crate::OUTCOMES).unwrap().len().unwrap();
        txn.commit().unwrap();
        let kinds = effects
            .iter()
            .map(|e| match e {
                Effect::Put { .. } => "put",
                Effect::Remove { .. } => "remove",
                Effect::PutOutcome { .. } => "put_outcome",
                Effect::RemoveOutcome { .. } => "remove_outcome",
            })
            .collect();
        (kinds, outcomes, done)
    }

    fn replace(record: Record) -> Op {
        let expected_version = record.version - 1;
        Op::Replace {
            put: Put::new(&record),
            expected_version,
            durable: false,
            now: 1,
        }
    }

    #[test]
    fn a_large_outcome_is_written_only_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let big = 64 << 10;
        let (kinds, outcomes, _) = write(
            &db,
            Op::Insert {
                put: Put::new(&record(1, big)),
                now: 1,
            },
        );
        assert_eq!((kinds, outcomes), (vec!["put_outcome", "put"], 1));

        // Counters only: the row is rewritten, the outcome is not.
        let mut hit = record(2, big);
        hit.dedup_hits = 5;
        let (kinds, outcomes, _) = write(&db, replace(hit));
        assert_eq!((kinds, outcomes), (vec!["put"], 1));

        // A different outcome is written; a conflict answers with the whole record.
        let mut changed = record(3, big);
        changed.error = Some(OpError {
            code: 9,
            message: "m".into(),
            details: vec![1; 10],
        });
        let (kinds, _, _) = write(&db, replace(changed.clone()));
        assert_eq!(kinds, vec!["put_outcome", "put"]);
        let (kinds, _, done) = write(&db, replace(record(9, 0)));
        assert!(kinds.is_empty());
        assert!(matches!(done, Done::Cas(Cas::Conflict(Some(r))) if r == changed));

        // A small outcome goes back into the row, and the large one goes.
        let (kinds, outcomes, _) = write(&db, replace(record(4, 10)));
        assert_eq!((kinds, outcomes), (vec!["remove_outcome", "put"], 0));
        write(&db, replace(record(5, big)));
        let delete = Op::Delete {
            id: RecordId::new("t", "ns", "big"),
            expected_version: 5,
            now: 1,
        };
        let (kinds, outcomes, _) = write(&db, delete);
        assert_eq!((kinds, outcomes), (vec!["remove"], 0));
    }
}
