//! The CQL store's conditional writes: proposing one until its outcome is known, and settling its
//! answer — applied, or the conflicting row — by the write's own nonce (see the module docs of
//! `super`), plus the decoded row those answers are read from.

use super::codec::{self, RowView, Value};
use super::errors::{self, Failure};
use super::CqlStore;
use oncekey_ledger::{Millis, Record, RecordId};
use oncekey_store::{Cas, StoreError};
use scylla::client::session::Session;
use scylla::response::query_result::QueryResult;
use scylla::statement::batch::Batch;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};
use std::time::Duration;

/// How often one conditional write is proposed before its outcome is reported unknown
/// (`Patience::Bounded`).
const WRITE_ATTEMPTS: u32 = 3;
/// Pause before the first re-proposal (doubled for each further one, up to `MAX_BACKOFF`).
const RESEND_BACKOFF: Duration = Duration::from_millis(50);
/// The longest pause between re-proposals of a write that must be settled.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How long a conditional write is proposed again while its outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Patience {
    /// `WRITE_ATTEMPTS` proposals, then `StoreError::Unavailable` (the outcome is unknown):
    /// for the writes of an RPC, whose caller is told and whose retry decides on the truth.
    Bounded,
    /// Until the outcome is known: for a dedup hit's write, which nobody waits for, and whose
    /// writer (the engine's background flush) takes an error to mean that nothing was written
    /// and writes the same hits again — an unknown outcome that applied would count them twice.
    /// An error then means the write surely did not apply.
    Settled,
}

impl CqlStore {
    /// Runs a conditional write until its answer is definitive. After an uncertain outcome
    /// (timeout, broken connection) the identical write, same `write_id` included, is proposed
    /// again: a serial read alone cannot settle it, as the first request may still be queued on a
    /// node and apply later. Once a re-proposal is answered, the stale copy can never apply (the
    /// version it is conditioned on has moved on, or the row it must not find exists).
    pub(super) async fn write(
        &self,
        statement: &PreparedStatement,
        values: Vec<Value>,
    ) -> Result<Written, StoreError> {
        self.propose(Proposal::One(statement, values), Patience::Bounded)
            .await
    }

    /// `write` for any proposal, proposed again as long as `patience` says.
    pub(super) async fn propose(
        &self,
        proposal: Proposal<'_>,
        patience: Patience,
    ) -> Result<Written, StoreError> {
        let mut pause = RESEND_BACKOFF;
        let mut resent = false;
        for attempt in 1u32.. {
            // Re-proposals wait as long as the execution profile allows.
            let patient = attempt > 1;
            let error = match proposal.execute(&self.session(), patient).await {
                Ok(result) => {
                    return Ok(Written {
                        result,
                        resent,
                        patience,
                    })
                }
                Err(e) => e,
            };
            match errors::classify(&error) {
                Failure::MaybeRan(_) => resent = true,
                Failure::NotSent(_) if resent => {}
                failure => {
                    if resent {
                        tracing::error!(error = %error, "a conditional write's outcome stays unknown: the cluster refused its re-proposal");
                    }
                    return Err(failure.into_store_error());
                }
            }
            if patience == Patience::Bounded && attempt == WRITE_ATTEMPTS {
                break;
            }
            if attempt <= WRITE_ATTEMPTS || attempt % 10 == 0 {
                tracing::warn!(error = %error, attempt, "conditional write outcome unknown: proposing it again");
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(MAX_BACKOFF);
        }
        Err(StoreError::Unavailable(format!(
            "the outcome of a conditional write is still unknown after {WRITE_ATTEMPTS} attempts"
        )))
    }

    /// `read_serial` for settling a write's answer: a SERIAL read is a Paxos round too, and times
    /// out under the same contention as the write, so it is read again — up to `WRITE_ATTEMPTS`
    /// times for `Patience::Bounded`, until it answers for `Patience::Settled`.
    pub(super) async fn read_serial_for(
        &self,
        id: &RecordId,
        patience: Patience,
    ) -> Result<StoredRow, StoreError> {
        let mut pause = RESEND_BACKOFF;
        for attempt in 1u32.. {
            match self.read_serial(id).await {
                Err(StoreError::Unavailable(e))
                    if patience == Patience::Settled || attempt < WRITE_ATTEMPTS =>
                {
                    tracing::warn!(error = %e, attempt, "settling a conditional write: reading its row again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
                read => return read,
            }
        }
        unreachable!("the loop returns")
    }

    /// The row of `id` at SERIAL: sees every write accepted so far.
    pub(super) async fn read_serial(&self, id: &RecordId) -> Result<StoredRow, StoreError> {
        let result = self
            .session()
            .execute_unpaged(&self.statements.read_serial, codec::key_values(id).to_vec())
            .await
            .map_err(|e| errors::classify(&e).into_store_error())?;
        with_first_row(result, |row| match row {
            None => Ok(StoredRow::default()),
            Some(row) => StoredRow::decode(&row, id),
        })
    }

    /// `UPDATE … IF version = ?` over a row that holds no live record (`expected` is `None` for a
    /// row whose cells all expired while its row marker lives on).
    pub(super) async fn overwrite(
        &self,
        record: &Record,
        expected: Option<u64>,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let write_id = rand::random();
        let ttl = codec::ttl_secs(record, now);
        let mut values = vec![Some(CqlValue::Int(ttl))];
        values.extend(codec::column_values(record, write_id));
        values.extend(codec::key_values(&record.id));
        values.push(expected.and_then(codec::big));
        let mark = codec::mark_values(record, write_id, ttl);
        let batch = &self.statements.overwrite;
        let written = self
            .propose(
                Proposal::Batch(batch, vec![values, mark]),
                Patience::Bounded,
            )
            .await?;
        self.answer(written, &record.id, Mine::Write(write_id), now)
            .await
    }

    /// Turns the answer to an UPDATE or DELETE into `Cas`.
    pub(super) async fn answer(
        &self,
        written: Written,
        id: &RecordId,
        mine: Mine,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let (applied, full) = with_first_row(written.result, |row| {
            let row = row.ok_or_else(|| StoreError::Internal("LWT without a result row".into()))?;
            let full = if row.is_full() {
                Some(StoredRow::decode(&row, id)?)
            } else {
                None
            };
            Ok((row.applied()?, full))
        })?;
        if applied {
            return Ok(Cas::Applied);
        }
        let found = match full {
            // ScyllaDB returns the whole current row; Cassandra only the condition columns.
            // After a re-proposal the row must be read at SERIAL anyway (see below).
            Some(found) if !written.resent => found,
            _ => self.read_serial_for(id, written.patience).await?,
        };
        let live = found.live(now);
        Ok(match mine {
            // The condition failed on the row this very write produced: an earlier copy of it
            // applied (after a re-proposal), or the coordinator, retrying a contended Paxos
            // round, completed the write's own accepted proposal before checking the condition.
            // Each write marks itself apart (`codec::WRITE_MARKS`), so that it is recognised
            // even after further writes followed it.
            Mine::Write(ours) if found.wrote(ours) => Cas::Applied,
            Mine::Delete if written.resent && live.is_none() => Cas::Applied,
            _ => Cas::Conflict(live),
        })
    }
}

impl CqlStore {
    /// The conditional write replacing stored version `expected_version` by `record`, tagged
    /// with `write_id`. Every LWT commits at QUORUM: there is no cheaper non-durable write to
    /// offer, but a dedup hit's write (the only non-durable one) sets only the columns a hit
    /// changes. Either marks itself in `codec::WRITE_MARKS`.
    pub(super) fn replacing(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        write_id: [u8; 16],
        now: Millis,
    ) -> Proposal<'_> {
        let ttl = codec::ttl_secs(record, now);
        let mut values = vec![Some(CqlValue::Int(ttl))];
        if durable {
            values.extend(codec::column_values(record, write_id));
        } else {
            values.extend(codec::hit_values(record));
        }
        values.extend(codec::key_values(&record.id));
        values.push(codec::big(expected_version));
        values.push(Some(codec::timestamp(now)));
        let mark = codec::mark_values(record, write_id, ttl);
        let batch = match durable {
            true => &self.statements.replace,
            false => &self.statements.replace_hits,
        };
        Proposal::Batch(batch, vec![values, mark])
    }

    /// Writes a new record's index rows (after its LWT: see `index`); whether they were written.
    /// A failure is logged, not returned: the record exists, the Claim that made it must be
    /// answered, and its intent (`pending`), left in place, gets the rows written later.
    pub(super) async fn indexed_new(&self, record: &Record, now: Millis) -> bool {
        match self.put_index(record, now).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    namespace = %record.id.namespace,
                    "a new record's index rows were not written: the needs-attention pass writes them"
                );
                false
            }
        }
    }
}

/// A conditional write and its values, as proposed (and re-proposed unchanged).
pub(super) enum Proposal<'a> {
    /// One conditional statement.
    One(&'a PreparedStatement, Vec<Value>),
    /// A conditional batch: the values of each of its statements.
    Batch(&'a Batch, Vec<Vec<Value>>),
}

impl Proposal<'_> {
    /// Executes the proposal; `patient` lifts the request timeout (re-proposals wait as long as
    /// the execution profile allows).
    pub(super) async fn execute(
        &self,
        session: &Session,
        patient: bool,
    ) -> Result<QueryResult, scylla::errors::ExecutionError> {
        match self {
            Proposal::One(statement, values) if patient => {
                let mut statement = (*statement).clone();
                statement.set_request_timeout(None);
                session.execute_unpaged(&statement, values).await
            }
            Proposal::One(statement, values) => session.execute_unpaged(statement, values).await,
            Proposal::Batch(batch, values) if patient => {
                let mut batch = (*batch).clone();
                batch.set_request_timeout(None);
                session.batch(&batch, values).await
            }
            Proposal::Batch(batch, values) => session.batch(batch, values).await,
        }
    }
}

/// What a conditional write proposed, to recognise it after a re-proposal.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mine {
    /// A row carrying this `write_id`.
    Write([u8; 16]),
    /// The row's deletion.
    Delete,
}

/// A definitive answer to a conditional write.
pub(super) struct Written {
    /// The node's answer to the last proposal.
    pub(super) result: QueryResult,
    /// Whether an earlier copy of the proposal had an unknown outcome (it may have applied).
    pub(super) resent: bool,
    /// How patiently it was proposed: settling its answer takes as much.
    pub(super) patience: Patience,
}

/// A stored row, decoded.
#[derive(Debug, Default)]
pub(super) struct StoredRow {
    /// The nonce of the full write that last set the row.
    pub(super) write_id: Option<[u8; 16]>,
    /// The nonces of the latest writes the row took (read at SERIAL only).
    pub(super) marks: Vec<[u8; 16]>,
    /// The stored version (`None`: no row, or only its row marker is left).
    pub(super) version: Option<u64>,
    /// The stored record, expired or not.
    pub(super) record: Option<Record>,
}

impl StoredRow {
    pub(super) fn decode(row: &RowView<'_>, id: &RecordId) -> Result<Self, StoreError> {
        Ok(Self {
            write_id: row.write_id().and_then(|w| <[u8; 16]>::try_from(w).ok()),
            marks: row.write_marks(),
            version: row.version()?,
            record: row.record(id)?,
        })
    }

    /// Whether the write of nonce `ours` applied to the row: the last full write's `write_id`,
    /// or one of the latest writes' marks.
    pub(super) fn wrote(&self, ours: [u8; 16]) -> bool {
        self.write_id == Some(ours) || self.marks.contains(&ours)
    }

    pub(super) fn live(&self, now: Millis) -> Option<Record> {
        self.record.clone().filter(|r| !r.is_expired(now))
    }
}

/// Decodes the first row of a result (untyped, by column name) and hands it to `f`.
pub(super) fn with_first_row<T>(
    result: QueryResult,
    f: impl FnOnce(Option<RowView<'_>>) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let rows = result
        .into_rows_result()
        .map_err(|e| StoreError::Internal(format!("expected rows: {e}")))?;
    let first = rows
        .rows::<Row>()
        .map_err(|e| StoreError::Corrupt(e.to_string()))?
        .next()
        .transpose()
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    f(first
        .as_ref()
        .map(|row| RowView::new(rows.column_specs(), row)))
}
