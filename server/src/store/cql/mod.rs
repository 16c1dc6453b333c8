//! The CQL store: the ledger on a ScyllaDB or Apache Cassandra cluster, for several stateless
//! Oncekey replicas sharing one keyspace.
//!
//! Every trait call is one lightweight transaction on one row: `INSERT … IF NOT EXISTS` for a new
//! record (a failed insert returns the existing row in the same round trip), `UPDATE … IF version =
//! ? AND expires_at > ?` to replace, `DELETE … IF version = ? AND expires_at > ?` to delete. Each
//! write sets the row TTL to the record's remaining lifetime (`ledger::expiry`), so rows vanish by
//! themselves; since TTLs have one-second granularity, readers also filter on `expires_at`, and an
//! insert that meets an expired row overwrites it with `UPDATE … IF version = <that row's version>`.
//! A record kept until it settles (an unsettled at-most-once operation) is written without TTL
//! and stored with `expires_at` = `codec::NEVER`; the write that settles it sets every column with
//! a TTL again. It is created by a conditional batch rather than a plain INSERT, so that no row
//! marker without TTL outlives it (see `Statements::insert_kept`).
//!
//! A write whose outcome is unknown (timeout, broken connection) is proposed again, identically,
//! until a node answers; each write carries a random nonce (in `write_id` for a full write, and in
//! the row's `codec::WRITE_MARKS` for every write), so when the re-proposal finds its condition
//! failed, a SERIAL read tells whether an earlier copy of it is what applied — even when further
//! writes followed it. A failed condition on a row carrying the write's own nonce always means
//! it applied: Cassandra answers so when a contended Paxos round, retried, completes the write's
//! own accepted proposal before checking the condition. Conditional writes are never retried by the driver (whose
//! default policy retries even them after Unavailable). If no answer comes, the caller gets
//! `Unavailable` (safe to retry: the next attempt sees the truth).
//! A failed condition (Cassandra returns only the condition columns) is answered from a SERIAL
//! read.
//!
//! This module must not decide ledger transitions (the engine does) nor write plain, non-conditional
//! statements to the records table: mixing them with LWTs on one row breaks linearizability.

mod attention;
mod codec;
mod config;
mod connect;
mod errors;
mod index;
mod list;
pub mod migrate;
mod replication;
mod statements;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_levels;
#[cfg(test)]
mod tests_writes;
mod tls;
#[cfg(test)]
mod ttl_tests;
#[cfg(test)]
mod upgrade_tests;

pub use config::{CqlConfig, CqlTlsConfig, SerialLevel};
pub use connect::ConnectError;
pub use statements::Levels;

use crate::ledger::{AttentionCounts, Millis, Record, RecordId};
use crate::store::{Capabilities, Cas, ListPage, ListQuery, Store, StoreError};
use codec::{RowView, Value};
use errors::Failure;
use scylla::client::session::Session;
use scylla::response::query_result::QueryResult;
use scylla::statement::batch::Batch;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};
use statements::Statements;
use std::sync::Arc;
use std::time::Duration;

/// How often one conditional write is proposed before its outcome is reported unknown.
const WRITE_ATTEMPTS: u32 = 3;
/// Pause before the first re-proposal (doubled for each further one).
const RESEND_BACKOFF: Duration = Duration::from_millis(50);

/// The ledger on a CQL cluster.
#[derive(Clone)]
pub struct CqlStore {
    session: Arc<Session>,
    statements: Arc<Statements>,
    index: Arc<index::IndexStatements>,
    page_token_key: [u8; 32],
}

impl CqlStore {
    /// Connects with the `--cql-*` settings and checks that `oncekey migrate` ran on the keyspace.
    pub async fn connect(config: &CqlConfig) -> Result<Self, ConnectError> {
        let session = connect::session(config).await?;
        Self::open(Arc::new(session), &config.keyspace, connect::levels(config)).await
    }

    /// Opens the store on an existing session, with these consistency levels.
    pub async fn open(
        session: Arc<Session>,
        keyspace: &str,
        levels: Levels,
    ) -> Result<Self, ConnectError> {
        connect::check_keyspace(keyspace)?;
        migrate::check_applied(&session, keyspace).await?;
        let statements = Statements::prepare(&session, keyspace, levels)
            .await
            .map_err(|e| ConnectError::Other(format!("preparing statements: {e}")))?;
        let index = index::IndexStatements::prepare(&session, keyspace, levels)
            .await
            .map_err(|e| ConnectError::Other(format!("preparing statements: {e}")))?;
        let page_token_key = index::page_token_key(&session, keyspace, levels)
            .await
            .map_err(|e| ConnectError::Other(format!("the page-token key: {e}")))?;
        Ok(Self {
            session,
            statements: Arc::new(statements),
            index: Arc::new(index),
            page_token_key,
        })
    }

    /// Runs a conditional write until its answer is definitive. After an uncertain outcome
    /// (timeout, broken connection) the identical write, same `write_id` included, is proposed
    /// again: a serial read alone cannot settle it, as the first request may still be queued on a
    /// node and apply later. Once a re-proposal is answered, the stale copy can never apply (the
    /// version it is conditioned on has moved on, or the row it must not find exists).
    async fn write(
        &self,
        statement: &PreparedStatement,
        values: Vec<Value>,
    ) -> Result<Written, StoreError> {
        self.propose(Proposal::One(statement, values)).await
    }

    /// `write` for any proposal.
    async fn propose(&self, proposal: Proposal<'_>) -> Result<Written, StoreError> {
        let mut patient = false;
        let mut pause = RESEND_BACKOFF;
        let mut resent = false;
        for attempt in 1..=WRITE_ATTEMPTS {
            let error = match proposal.execute(&self.session, patient).await {
                Ok(result) => return Ok(Written { result, resent }),
                Err(e) => e,
            };
            match errors::classify(&error) {
                Failure::MaybeRan(_) => resent = true,
                Failure::NotSent(_) if resent => {}
                failure => return Err(failure.into_store_error()),
            }
            if attempt == WRITE_ATTEMPTS {
                break;
            }
            tracing::warn!(error = %error, attempt, "conditional write outcome unknown: proposing it again");
            tokio::time::sleep(pause).await;
            pause *= 2;
            // Re-proposals wait as long as the execution profile allows.
            patient = true;
        }
        Err(StoreError::Unavailable(format!(
            "the outcome of a conditional write is still unknown after {WRITE_ATTEMPTS} attempts"
        )))
    }

    /// The row of `id` at SERIAL: sees every write accepted so far.
    async fn read_serial(&self, id: &RecordId) -> Result<StoredRow, StoreError> {
        let result = self
            .session
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
    async fn overwrite(
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
            .propose(Proposal::Batch(batch, vec![values, mark]))
            .await?;
        self.answer(written, &record.id, Mine::Write(write_id), now)
            .await
    }

    /// Turns the answer to an UPDATE or DELETE into `Cas`.
    async fn answer(
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
            _ => self.read_serial(id).await?,
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
    fn replacing(
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

    /// `Cas::Applied` for a new record, once its index rows are written (after its LWT: see
    /// `index`). A failed index write is logged, not returned: the record exists, and the Claim
    /// that made it must be answered.
    async fn indexed_new(&self, record: &Record, now: Millis) -> Cas {
        if let Err(e) = self.put_index(record, now).await {
            tracing::warn!(
                error = %e,
                namespace = %record.id.namespace,
                "a new record's index rows were not written: it is not listed until it changes"
            );
        }
        Cas::Applied
    }
}

/// A conditional write and its values, as proposed (and re-proposed unchanged).
enum Proposal<'a> {
    /// One conditional statement.
    One(&'a PreparedStatement, Vec<Value>),
    /// A conditional batch: the values of each of its statements.
    Batch(&'a Batch, Vec<Vec<Value>>),
}

impl Proposal<'_> {
    /// Executes the proposal; `patient` lifts the request timeout (re-proposals wait as long as
    /// the execution profile allows).
    async fn execute(
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
enum Mine {
    /// A row carrying this `write_id`.
    Write([u8; 16]),
    /// The row's deletion.
    Delete,
}

/// A definitive answer to a conditional write.
struct Written {
    /// The node's answer to the last proposal.
    result: QueryResult,
    /// Whether an earlier copy of the proposal had an unknown outcome (it may have applied).
    resent: bool,
}

/// A stored row, decoded.
#[derive(Debug, Default)]
struct StoredRow {
    /// The nonce of the full write that last set the row.
    write_id: Option<[u8; 16]>,
    /// The nonces of the latest writes the row took (read at SERIAL only).
    marks: Vec<[u8; 16]>,
    /// The stored version (`None`: no row, or only its row marker is left).
    version: Option<u64>,
    /// The stored record, expired or not.
    record: Option<Record>,
}

impl StoredRow {
    fn decode(row: &RowView<'_>, id: &RecordId) -> Result<Self, StoreError> {
        Ok(Self {
            write_id: row.write_id().and_then(|w| <[u8; 16]>::try_from(w).ok()),
            marks: row.write_marks(),
            version: row.version()?,
            record: row.record(id)?,
        })
    }

    /// Whether the write of nonce `ours` applied to the row: the last full write's `write_id`,
    /// or one of the latest writes' marks.
    fn wrote(&self, ours: [u8; 16]) -> bool {
        self.write_id == Some(ours) || self.marks.contains(&ours)
    }

    fn live(&self, now: Millis) -> Option<Record> {
        self.record.clone().filter(|r| !r.is_expired(now))
    }
}

/// Decodes the first row of a result (untyped, by column name) and hands it to `f`.
fn with_first_row<T>(
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

impl Store for CqlStore {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.statements.read, codec::key_values(id).to_vec())
            .await
            .map_err(|e| errors::classify(&e).into_store_error())?;
        let record = with_first_row(result, |row| row.map(|r| r.record(id)).transpose())?;
        Ok(record.flatten().filter(|r| !r.is_expired(now)))
    }

    async fn get_brief(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        // Not worth a statement of its own: a Claim inserts first (`insert_returns_live`).
        self.get(id, now).await
    }

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        let write_id = rand::random();
        let key = codec::key_values(&record.id).to_vec();
        let ttl = codec::ttl_secs(record, now);
        let mark = codec::mark_values(record, write_id, ttl);
        let proposal = if record.expires_at.is_some() {
            let mut values = key;
            values.extend(codec::column_values(record, write_id));
            values.push(Some(CqlValue::Int(ttl)));
            Proposal::Batch(&self.statements.insert, vec![values, mark])
        } else {
            // Kept until it settles: no TTL, and no row marker that would outlive the record.
            let mut set = codec::column_values(record, write_id);
            set.extend(key.iter().cloned());
            Proposal::Batch(&self.statements.insert_kept, vec![key, set, mark])
        };
        let written = self.propose(proposal).await?;
        // A failed INSERT … IF NOT EXISTS returns the existing row (both Cassandra and ScyllaDB);
        // should a server return less, a serial read tells.
        let existing = with_first_row(written.result, |row| {
            let row = row.ok_or_else(|| StoreError::Internal("LWT without a result row".into()))?;
            if row.applied()? {
                Ok(None)
            } else if row.is_full() {
                StoredRow::decode(&row, &record.id).map(|found| Some(Some(found)))
            } else {
                Ok(Some(None))
            }
        })?;
        let found = match existing {
            None => return Ok(self.indexed_new(record, now).await),
            Some(Some(found)) => found,
            Some(None) => self.read_serial(&record.id).await?,
        };
        if found.wrote(write_id) {
            // The row is this insert's own: an earlier copy of it applied (`resent`), or the
            // coordinator completed its accepted proposal before checking the condition.
            return Ok(self.indexed_new(record, now).await);
        }
        match found.live(now) {
            Some(current) => Ok(Cas::Conflict(Some(current))),
            // Expired but not yet gone (TTLs count whole seconds), or only a row marker left.
            None => match self.overwrite(record, found.version, now).await? {
                Cas::Applied => Ok(self.indexed_new(record, now).await),
                conflict => Ok(conflict),
            },
        }
    }

    async fn replace(
        &self,
        record: &Record,
        previous: &Record,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let cas = self
            .replace_if_version(record, previous.version, durable, now)
            .await?;
        if durable && cas == Cas::Applied {
            self.left_behind(previous, record);
        }
        Ok(cas)
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        if durable {
            // The new state's index rows go first: see `index`.
            self.put_index(record, now).await?;
        }
        let write_id = rand::random();
        let proposal = self.replacing(record, expected_version, durable, write_id, now);
        let written = self.propose(proposal).await?;
        self.answer(written, &record.id, Mine::Write(write_id), now)
            .await
    }

    async fn delete_if_version(
        &self,
        id: &RecordId,
        expected_version: u64,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let mut values = codec::key_values(id).to_vec();
        values.push(codec::big(expected_version));
        values.push(Some(codec::timestamp(now)));
        let written = self.write(&self.statements.delete, values).await?;
        self.answer(written, id, Mine::Delete, now).await
    }

    async fn list(&self, query: ListQuery<'_>, now: Millis) -> Result<ListPage, StoreError> {
        self.list_page(query, now).await
    }

    async fn attention(&self, now: Millis) -> Result<AttentionCounts, StoreError> {
        self.attention_counts(now).await
    }

    fn page_token_key(&self) -> [u8; 32] {
        self.page_token_key
    }

    async fn sweep_expired(&self, _now: Millis, _limit: usize) -> Result<usize, StoreError> {
        // Rows expire by their TTL.
        Ok(0)
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        // A QUORUM read of an empty partition: proves the table and a quorum of its replicas.
        let probe = RecordId::new("oncekey", "readiness.probe", "probe");
        self.session
            .execute_unpaged(&self.statements.read, codec::key_values(&probe).to_vec())
            .await
            .map(|_| ())
            .map_err(|e| errors::classify(&e).into_store_error())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            single_process: false,
            // A failed `INSERT … IF NOT EXISTS` answers with the existing row.
            insert_returns_live: true,
            brief_reads: false,
        }
    }
}
