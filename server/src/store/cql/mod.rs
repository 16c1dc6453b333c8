//! The CQL store: the ledger on a ScyllaDB or Apache Cassandra cluster, for several stateless
//! Oncekey replicas sharing one keyspace.
//!
//! Every trait call is one lightweight transaction on one row: `INSERT … IF NOT EXISTS` for a new
//! record (a failed insert returns the existing row in the same round trip), `UPDATE … IF version =
//! ? AND expires_at > ?` to replace, `DELETE … IF version = ? AND expires_at > ?` to delete. Each
//! write sets the row TTL to the record's remaining retention, so rows vanish by themselves; since
//! TTLs have one-second granularity, readers also filter on `expires_at`, and an insert that meets
//! an expired row overwrites it with `UPDATE … IF version = <that row's version>`.
//!
//! A write whose outcome is unknown (timeout, broken connection) is settled by a SERIAL read: each
//! write carries a random `write_id`, so the writer recognises its own write. A failed condition
//! (Cassandra returns only the condition columns) is answered from a SERIAL read as well.
//!
//! This module must not decide ledger transitions (the engine does) nor write plain, non-conditional
//! statements to the records table: mixing them with LWTs on one row breaks linearizability.

mod codec;
mod connect;
mod errors;
pub mod migrate;
mod statements;
#[cfg(test)]
mod tests;

pub use connect::ConnectError;

use crate::config::CqlArgs;
use crate::ledger::{Millis, Record, RecordId};
use crate::store::{Cas, Store, StoreError};
use codec::{RowView, Value};
use errors::Failure;
use scylla::client::session::Session;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};
use statements::{Levels, Statements};
use std::sync::Arc;
use std::time::Duration;

/// How often a serial read that settles an uncertain write is tried before giving up.
const SETTLE_ATTEMPTS: u32 = 3;
/// Pause before the second settling read (doubled for each further one).
const SETTLE_BACKOFF: Duration = Duration::from_millis(100);

/// The ledger on a CQL cluster.
#[derive(Clone)]
pub struct CqlStore {
    session: Arc<Session>,
    statements: Arc<Statements>,
}

impl CqlStore {
    /// Connects with the `--cql-*` flags and checks that `oncekey migrate` ran on the keyspace.
    pub async fn connect(args: &CqlArgs) -> Result<Self, ConnectError> {
        let session = connect::session(args).await?;
        Self::open(
            Arc::new(session),
            &args.cql_keyspace,
            args.cql_local_dc.is_some(),
        )
        .await
    }

    /// Opens the store on an existing session.
    pub async fn open(
        session: Arc<Session>,
        keyspace: &str,
        local_dc: bool,
    ) -> Result<Self, ConnectError> {
        connect::check_keyspace(keyspace)?;
        migrate::check_applied(&session, keyspace).await?;
        let statements = Statements::prepare(&session, keyspace, Levels::new(local_dc))
            .await
            .map_err(|e| ConnectError::Other(format!("preparing statements: {e}")))?;
        Ok(Self {
            session,
            statements: Arc::new(statements),
        })
    }

    /// Runs a conditional write; on an uncertain outcome, settles it with a serial read.
    async fn write(
        &self,
        statement: &PreparedStatement,
        values: Vec<Value>,
        id: &RecordId,
        proposal: Proposal,
        now: Millis,
    ) -> Result<Written, StoreError> {
        match self.session.execute_unpaged(statement, values).await {
            Ok(result) => Ok(Written::Answer(result)),
            Err(e) => match errors::classify(&e) {
                Failure::MaybeRan(reason) => {
                    tracing::warn!(error = %reason, "conditional write outcome unknown: settling with a serial read");
                    self.settle(id, proposal, now).await.map(Written::Settled)
                }
                failure => Err(failure.into_store_error()),
            },
        }
    }

    /// Decides whether an uncertain write was applied, from a linearizable read: the write that
    /// set the row is ours iff the row carries our `write_id` (a delete: iff the row is gone).
    async fn settle(
        &self,
        id: &RecordId,
        proposal: Proposal,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let mut pause = SETTLE_BACKOFF;
        let mut attempt = 1;
        let found = loop {
            match self.read_serial(id).await {
                Ok(found) => break found,
                Err(e) if attempt >= SETTLE_ATTEMPTS => {
                    return Err(StoreError::Unavailable(format!(
                        "the outcome of a conditional write is unknown and the settling read failed: {e}"
                    )))
                }
                Err(_) => {
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                    attempt += 1;
                }
            }
        };
        let live = found.live(now);
        Ok(match proposal {
            Proposal::Write(ours) if found.write_id == Some(ours) => Cas::Applied,
            Proposal::Delete if live.is_none() => Cas::Applied,
            _ => Cas::Conflict(live),
        })
    }

    /// The row of `id` at SERIAL.
    async fn read_serial(&self, id: &RecordId) -> Result<SerialRow, StoreError> {
        let result = self
            .session
            .execute_unpaged(&self.statements.read_serial, codec::key_values(id).to_vec())
            .await
            .map_err(|e| errors::classify(&e).into_store_error())?;
        with_first_row(result, |row| match row {
            None => Ok(SerialRow::default()),
            Some(row) => Ok(SerialRow {
                write_id: row.write_id().and_then(|w| <[u8; 16]>::try_from(w).ok()),
                version: row.version()?,
                record: row.record(id)?,
            }),
        })
    }

    /// The answer to a failed condition: the live record now, from a serial read.
    async fn conflict(&self, id: &RecordId, now: Millis) -> Result<Cas, StoreError> {
        Ok(Cas::Conflict(self.read_serial(id).await?.live(now)))
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
        let mut values = vec![Some(CqlValue::Int(codec::ttl_secs(record, now)))];
        values.extend(codec::column_values(record, write_id));
        values.extend(codec::key_values(&record.id));
        values.push(expected.and_then(codec::big));
        let written = self
            .write(
                &self.statements.overwrite,
                values,
                &record.id,
                Proposal::Write(write_id),
                now,
            )
            .await?;
        self.answer(written, &record.id, now).await
    }

    /// Turns the result of an UPDATE or DELETE into `Cas`.
    async fn answer(
        &self,
        written: Written,
        id: &RecordId,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        let result = match written {
            Written::Settled(cas) => return Ok(cas),
            Written::Answer(result) => result,
        };
        let (applied, full) = with_first_row(result, |row| {
            let row = row.ok_or_else(|| StoreError::Internal("LWT without a result row".into()))?;
            let full = if row.is_full() {
                Some(row.record(id)?)
            } else {
                None
            };
            Ok((row.applied()?, full))
        })?;
        match (applied, full) {
            (true, _) => Ok(Cas::Applied),
            // ScyllaDB returns the whole current row; Cassandra only the condition columns.
            (false, Some(current)) => Ok(Cas::Conflict(current.filter(|r| !r.is_expired(now)))),
            (false, None) => self.conflict(id, now).await,
        }
    }
}

/// What a conditional write proposed, to recognise it when its outcome is unknown.
#[derive(Debug, Clone, Copy)]
enum Proposal {
    /// A row carrying this `write_id`.
    Write([u8; 16]),
    /// The row's deletion.
    Delete,
}

/// A row read at SERIAL.
#[derive(Debug, Default)]
struct SerialRow {
    /// The nonce of the write that last set the row.
    write_id: Option<[u8; 16]>,
    /// The stored version (`None`: no row, or only its row marker is left).
    version: Option<u64>,
    /// The stored record, expired or not.
    record: Option<Record>,
}

impl SerialRow {
    fn live(&self, now: Millis) -> Option<Record> {
        self.record.clone().filter(|r| !r.is_expired(now))
    }
}

/// A conditional write's result: the node's answer, or the settled outcome of an uncertain write.
enum Written {
    Answer(QueryResult),
    Settled(Cas),
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

    async fn insert_if_absent(&self, record: &Record, now: Millis) -> Result<Cas, StoreError> {
        let write_id = rand::random();
        let mut values = codec::key_values(&record.id).to_vec();
        values.extend(codec::column_values(record, write_id));
        values.push(Some(CqlValue::Int(codec::ttl_secs(record, now))));
        let written = self
            .write(
                &self.statements.insert,
                values,
                &record.id,
                Proposal::Write(write_id),
                now,
            )
            .await?;
        let result = match written {
            Written::Settled(cas) => return Ok(cas),
            Written::Answer(result) => result,
        };
        // A failed INSERT … IF NOT EXISTS returns the existing row (both Cassandra and ScyllaDB);
        // should a server return less, a serial read tells.
        let existing = with_first_row(result, |row| {
            let row = row.ok_or_else(|| StoreError::Internal("LWT without a result row".into()))?;
            if row.applied()? {
                return Ok(None);
            }
            if !row.is_full() {
                return Ok(Some(None));
            }
            Ok(Some(Some((row.version()?, row.record(&record.id)?))))
        })?;
        let (version, current) = match existing {
            None => return Ok(Cas::Applied),
            Some(Some(found)) => found,
            Some(None) => {
                let found = self.read_serial(&record.id).await?;
                (found.version, found.record)
            }
        };
        match current {
            Some(current) if !current.is_expired(now) => Ok(Cas::Conflict(Some(current))),
            // Expired but not yet gone (TTLs count whole seconds), or only a row marker left.
            _ => self.overwrite(record, version, now).await,
        }
    }

    async fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        _durable: bool,
        now: Millis,
    ) -> Result<Cas, StoreError> {
        // Every LWT commits at QUORUM: there is no cheaper non-durable write to offer.
        let write_id = rand::random();
        let mut values = vec![Some(CqlValue::Int(codec::ttl_secs(record, now)))];
        values.extend(codec::column_values(record, write_id));
        values.extend(codec::key_values(&record.id));
        values.push(codec::big(expected_version));
        values.push(Some(codec::timestamp(now)));
        let written = self
            .write(
                &self.statements.replace,
                values,
                &record.id,
                Proposal::Write(write_id),
                now,
            )
            .await?;
        self.answer(written, &record.id, now).await
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
        let written = self
            .write(&self.statements.delete, values, id, Proposal::Delete, now)
            .await?;
        self.answer(written, id, now).await
    }

    async fn sweep_expired(&self, _now: Millis, _limit: usize) -> Result<usize, StoreError> {
        // Rows expire by their TTL.
        Ok(0)
    }

    async fn check_ready(&self) -> Result<(), StoreError> {
        // A QUORUM read of an empty partition: proves the table and a quorum of its replicas.
        let probe = RecordId::new("", "", "");
        self.session
            .execute_unpaged(&self.statements.read, codec::key_values(&probe).to_vec())
            .await
            .map(|_| ())
            .map_err(|e| errors::classify(&e).into_store_error())
    }

    fn single_process(&self) -> bool {
        false
    }

    fn insert_first(&self) -> bool {
        true
    }
}
