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
//! default policy retries even them after Unavailable). If no answer comes, the caller of an
//! RPC's write gets `Unavailable` (safe to retry: the next attempt sees the truth); a dedup hit's
//! write is proposed until one comes (`writes::Patience::Settled`), since the engine would write
//! its hits again.
//! A failed condition (Cassandra returns only the condition columns) is answered from a SERIAL
//! read.
//!
//! This module must not decide ledger transitions (the engine does) nor write plain, non-conditional
//! statements to the records table: mixing them with LWTs on one row breaks linearizability.

#![warn(unreachable_pub)]

mod attention;
mod codec;
mod config;
mod connect;
#[cfg(test)]
mod cql_index_tests;
#[cfg(test)]
mod cql_level_tests;
#[cfg(test)]
mod cql_tests;
#[cfg(test)]
mod cql_ttl_tests;
#[cfg(test)]
mod cql_upgrade_tests;
#[cfg(test)]
mod cql_write_tests;
mod errors;
mod index;
mod list;
pub mod migrate;
mod pending;
mod replication;
mod scan;
mod sessions;
mod startup;
mod statements;
mod tls;
mod writes;

pub use config::{CqlConfig, CqlTlsConfig, SerialLevel};
pub use connect::ConnectError;
pub use startup::StartupError;
pub use statements::{plant_lost_update, Levels};

use codec::Value;
use oncekey_ledger::{AttentionCounts, Millis, Record, RecordId};
use oncekey_store::{Capabilities, Cas, ListPage, ListQuery, ScanPage, Store, StoreError};
use scylla::client::session::Session;
use scylla::value::CqlValue;
use statements::Statements;
use std::sync::Arc;
#[cfg(test)]
use writes::Written;
use writes::{with_first_row, Mine, Patience, Proposal, StoredRow};

/// The ledger on a CQL cluster.
#[derive(Clone)]
pub struct CqlStore {
    sessions: Arc<sessions::Sessions>,
    statements: Arc<Statements>,
    index: Arc<index::IndexStatements>,
    page_token_key: [u8; 32],
}

impl CqlStore {
    /// Connects with the `--cql-*` settings and checks that `oncekey migrate` ran on the keyspace.
    pub async fn connect(config: &CqlConfig) -> Result<Self, ConnectError> {
        let session = Arc::new(connect::session(config).await?);
        let levels = connect::levels(config);
        let mut store = Self::open(session.clone(), &config.keyspace, levels).await?;
        store.sessions = Arc::new(sessions::Sessions::new(session, Some(config.clone())));
        Ok(store)
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
            .map_err(|e| ConnectError::of_prepare(&e))?;
        let index = index::IndexStatements::prepare(&session, keyspace, levels)
            .await
            .map_err(|e| ConnectError::of_prepare(&e))?;
        let page_token_key = index::page_token_key(&session, keyspace, levels)
            .await
            .map_err(|e| ConnectError::of_request("the page-token key", &e))?;
        Ok(Self {
            sessions: Arc::new(sessions::Sessions::new(session, None)),
            statements: Arc::new(statements),
            index: Arc::new(index),
            page_token_key,
        })
    }
}

impl CqlStore {
    /// The lightweight transaction of `insert_if_absent`, without the intent before it or the
    /// index rows after it.
    pub(crate) async fn insert_record(
        &self,
        record: &Record,
        now: Millis,
    ) -> Result<Cas, StoreError> {
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
        let written = self.propose(proposal, Patience::Bounded).await?;
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
            None => return Ok(Cas::Applied),
            Some(Some(found)) => found,
            Some(None) => self.read_serial_for(&record.id, written.patience).await?,
        };
        if found.wrote(write_id) {
            // The row is this insert's own: an earlier copy of it applied (`resent`), or the
            // coordinator completed its accepted proposal before checking the condition.
            return Ok(Cas::Applied);
        }
        match found.live(now) {
            Some(current) => Ok(Cas::Conflict(Some(current))),
            // Expired but not yet gone (TTLs count whole seconds), or only a row marker left.
            None => self.overwrite(record, found.version, now).await,
        }
    }
}

impl Store for CqlStore {
    async fn get(&self, id: &RecordId, now: Millis) -> Result<Option<Record>, StoreError> {
        let result = self
            .session()
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
        // The intent goes first, so that no new record can stay unlisted: see `pending`.
        let intent = self.put_intent(record, now).await?;
        let cas = self.insert_record(record, now).await?;
        match &cas {
            Cas::Applied => {
                if self.indexed_new(record, now).await {
                    self.drop_intent(&intent);
                }
            }
            Cas::Conflict(_) => self.drop_intent(&intent),
        }
        // An error (the outcome may be unknown) leaves the intent to the readers.
        Ok(cas)
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
        // A dedup hit's write is settled, however long it takes: see `Patience::Settled`.
        let patience = match durable {
            true => Patience::Bounded,
            false => Patience::Settled,
        };
        let written = self.propose(proposal, patience).await?;
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

    async fn scan(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        _now: Millis,
    ) -> Result<ScanPage, StoreError> {
        self.scan_ids(after, limit).await
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
        self.session()
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
