//! The storage contract every backend implements: compare-and-set on whole records, keyed by
//! (tenant, namespace, key), versioned by `Record::version`.
//!
//! Stores know nothing of the state machine: the engine reads a record, lets the ledger decide, and
//! writes the decision back with one conditional operation. So every backend behaves identically, and
//! a distributed store can map each transition to one lightweight transaction
//! (`INSERT … IF NOT EXISTS`, `UPDATE … IF version = ?`, `DELETE … IF version = ?`).
//!
//! Backends: `oncekey-store-embedded` (redb, one process), `oncekey-store-cql` (ScyllaDB /
//! Cassandra, shared by several servers) and `memory` here, the reference implementation (the
//! contract in a few lines, no disk; engine tests run on it). Each states what it can do beyond
//! the contract in one `Capabilities` value; `oncekey_engine::suite` is the behaviour every one of
//! them passes.

#![warn(unreachable_pub)]

pub mod budget;
pub mod events;
pub mod memory;

use oncekey_ledger::{AttentionCounts, ListFilter, Millis, Record, RecordId};
use std::future::Future;

/// Most records one `Store::list` call returns.
pub const MAX_PAGE: usize = 1000;

/// One page of a listing to read (`Store::list`).
#[derive(Debug, Clone, Copy)]
pub struct ListQuery<'a> {
    /// Whose records: never another tenant's.
    pub tenant: &'a str,
    /// Which of them.
    pub filter: &'a ListFilter,
    /// Where the previous page ended (its `ListPage::next`); `None` for the first page.
    pub after: Option<&'a [u8]>,
    /// The most records to return, 1..=`MAX_PAGE`.
    pub limit: usize,
}

/// A page of records read by `Store::list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListPage {
    /// The records of the page, in the store's listing order: live, matching the filter at the
    /// `now` of the call, each at most once. Their receipt history is left out (empty), and their
    /// result body and error details may be.
    pub records: Vec<Record>,
    /// Where the next page starts, opaque to everyone but the store that made it; `None` when
    /// nothing is left. A page may hold fewer than `limit` records and still have a next one
    /// (a store bounds the work of one call).
    pub next: Option<Vec<u8>>,
}

/// A page of record ids read by `Store::scan`: every tenant's, in the store's own order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanPage {
    /// The ids of the page, each at most once across the pages of one scan (a record written
    /// while the scan runs may or may not be met).
    pub ids: Vec<RecordId>,
    /// Where the next page starts, opaque to everyone but the store that made it; `None` when
    /// nothing is left. A page may hold fewer than `limit` ids and still have a next one (a
    /// store bounds the work of one call).
    pub next: Option<Vec<u8>>,
}

/// The result of a conditional write.
// A conflict carries the record unboxed: it is the common answer under contention.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cas {
    /// The write was applied.
    Applied,
    /// The condition failed; carries the live record the store holds now, whole (with its
    /// history; `None` when absent or expired), so the caller can decide again without another
    /// read.
    Conflict(Option<Record>),
}

/// What a store can do, beyond the operations every store has: one value the store states and
/// the engine reads once, so that every choice the engine makes for a backend is visible here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Every writer of this store's data runs in this process, so in-process notifications see
    /// every settle, and dedup hits written a little later are seen by every reader here
    /// (embedded: yes; a cluster shared by several servers: no, so held Claims poll it and
    /// gathered hits are written sooner).
    pub single_process: bool,
    /// A failed `insert_if_absent` returns the live record in the same round trip, so a Claim
    /// inserts before it reads: one round trip for a new key, and no more for an existing one
    /// (CQL's `INSERT … IF NOT EXISTS`); duplicates that arrive while a Claim of the key inserts
    /// wait for it and read (`engine::first`). Otherwise a Claim reads first.
    pub insert_returns_live: bool,
    /// `get_brief` leaves out the receipt history and costs less than `get`, so a Claim reads
    /// briefly and reads whole only when its decision writes the record back whole. Otherwise
    /// a Claim reads whole.
    pub brief_reads: bool,
}

/// Why a store could not answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be reached or did not answer in time; the operation may be retried with
    /// the same key (the next attempt sees the truth).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Stored bytes could not be decoded.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// Any other failure of the backend.
    #[error("store failure: {0}")]
    Internal(String),
    /// The record's sealed fields cannot be opened (`oncekey-sealing`): the key they name is not
    /// in the key ring, or the ciphertext was altered or belongs to another record. Never
    /// retried: the same read fails the same way until the key ring changes.
    #[error("the record is sealed with key {key_id:?}, {cause}")]
    Unreadable {
        /// The key id the envelope names.
        key_id: String,
        /// Why it cannot be opened.
        cause: Unreadable,
    },
}

/// Why a sealed record cannot be opened (`StoreError::Unreadable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// The key ring has no key of that id (or no key ring is configured).
    MissingKey,
    /// Authentication failed: the ciphertext was altered, or moved from another field, record
    /// or tenant, or the envelope is malformed.
    Tampered,
}

impl Unreadable {
    /// The wire name (ErrorInfo metadata `cause`, metric label): `missing_key` or `tampered`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unreadable::MissingKey => "missing_key",
            Unreadable::Tampered => "tampered",
        }
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unreadable::MissingKey => "which the key ring does not hold",
            Unreadable::Tampered => {
                "but does not open under it: it was altered or belongs to another record"
            }
        })
    }
}

/// What `Store::reseal` did to one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reseal {
    /// Written again with the primary key; `from` names the key(s) it was sealed with before
    /// (empty: it was clear).
    Resealed {
        /// The key ids the record's fields were sealed with, without repeats.
        from: Vec<String>,
    },
    /// Nothing to do: already under the primary key, nothing to seal, or no primary key (then
    /// nothing is sealed and nothing is changed).
    Current,
    /// No live record of that id at `now`.
    Gone,
    /// The record changed between the read and the write; the caller may call again.
    Conflict,
}

/// A record store with compare-and-set primitives. `now` is passed in (never read from a clock here)
/// so that expiry is decided on the server clock the ledger used.
pub trait Store: Send + Sync + 'static {
    /// The live record of `id`: `None` when absent or expired at `now` (an expired record is never
    /// returned, whether or not it was swept yet).
    fn get(
        &self,
        id: &RecordId,
        now: Millis,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send;

    /// Like `get`, but the receipt history may be left out (empty): for decisions that answer
    /// from the record without writing it back whole (a replayed Claim). The engine uses it
    /// only where `Capabilities::brief_reads` says it costs less than `get`.
    fn get_brief(
        &self,
        id: &RecordId,
        now: Millis,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send;

    /// Like `get`, for an operation that discards the sealed fields (Purge): a sealing store
    /// returns a record whose sealed fields it cannot open with those fields emptied instead of
    /// refusing it with `StoreError::Unreadable`. By default this is `get`.
    fn get_lenient(
        &self,
        id: &RecordId,
        now: Millis,
    ) -> impl Future<Output = Result<Option<Record>, StoreError>> + Send {
        self.get(id, now)
    }

    /// Stores `record` if no live record of `record.id` exists at `now` (an expired row is replaced).
    /// On conflict returns the live record.
    fn insert_if_absent(
        &self,
        record: &Record,
        now: Millis,
    ) -> impl Future<Output = Result<Cas, StoreError>> + Send;

    /// Replaces the stored record of `record.id` with `record` if the stored version is
    /// `expected_version` and the stored record is live at `now`. `durable == false` marks a dedup
    /// hit's write, which changes only `version`, `dedup_hits` and `history`: it may become
    /// durable with a later commit, and a store may write only those fields. Such a write
    /// returns an error only when it surely did not apply (a store that lost track of its
    /// outcome settles it first, however long that takes): its writer writes the same hits
    /// again after an error, and would count them twice.
    fn replace_if_version(
        &self,
        record: &Record,
        expected_version: u64,
        durable: bool,
        now: Millis,
    ) -> impl Future<Output = Result<Cas, StoreError>> + Send;

    /// Deletes the record of `id` if its stored version is `expected_version` and it is live at `now`.
    /// The ledger's own transitions never delete (ABANDON keeps a tombstone so fencing tokens keep
    /// growing); this is the primitive for administrative removal, held to the same contract.
    fn delete_if_version(
        &self,
        id: &RecordId,
        expected_version: u64,
        now: Millis,
    ) -> impl Future<Output = Result<Cas, StoreError>> + Send;

    /// A page of `query.tenant`'s records matching `query.filter` at `now`, after
    /// `query.after`. A record whose status has not changed for 5 s is listed under it; one that
    /// moved meanwhile may be missed or listed twice across pages, never under a status it does
    /// not have at `now`.
    fn list(
        &self,
        query: ListQuery<'_>,
        now: Millis,
    ) -> impl Future<Output = Result<ListPage, StoreError>> + Send;

    /// The ids of live records of every tenant, one page at a time in the store's own order,
    /// after `after` (the previous page's cursor; None = from the start): for maintenance that
    /// spans tenants (a dev-mode Rekey). At most `limit` ids (1..=MAX_PAGE); `next` None at the
    /// end.
    ///
    /// Tombstones (an abandoned or purged record's) are included: they are records, and
    /// `reseal` handles them like any other. Expired records may be: a store that sees the
    /// expiry in what it scans (memory, embedded) leaves them out, one that does not (CQL, whose
    /// rows outlive their expiry by up to a second) includes them, and `reseal` answers `Gone`
    /// for them.
    fn scan(
        &self,
        after: Option<&[u8]>,
        limit: usize,
        now: Millis,
    ) -> impl Future<Output = Result<ScanPage, StoreError>> + Send;

    /// How many records of every tenant need attention at `now` (`ledger::Attention`). Costs a
    /// pass over the index of unsettled records: for a metric refreshed every few seconds, never
    /// for each scrape.
    fn attention(
        &self,
        now: Millis,
    ) -> impl Future<Output = Result<AttentionCounts, StoreError>> + Send;

    /// The key that signs this store's page tokens: the same for every server sharing the store
    /// (kept in it), so a token from one replica is accepted by all, and only theirs.
    fn page_token_key(&self) -> [u8; 32];

    /// `replace_if_version` of `previous` (the record as read, whose version is the expected
    /// one). A store that indexes records by state (for `list`) learns from `previous` where the
    /// record was indexed; by default this is `replace_if_version`.
    fn replace(
        &self,
        record: &Record,
        previous: &Record,
        durable: bool,
        now: Millis,
    ) -> impl Future<Output = Result<Cas, StoreError>> + Send {
        self.replace_if_version(record, previous.version, durable, now)
    }

    /// Removes up to `limit` records expired at `now`; returns how many were removed. Stores whose
    /// rows expire by themselves (CQL row TTLs) return `Ok(0)`.
    fn sweep_expired(
        &self,
        now: Millis,
        limit: usize,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send;

    /// Writes the live record of `id` again with its sealed fields under the current primary key
    /// of the key ring (`oncekey-sealing::Sealed`), by compare-and-set with only its version and
    /// sealed fields changed. A store that does not seal has nothing to do: `Current` when the
    /// record is live, `Gone` otherwise.
    fn reseal(
        &self,
        id: &RecordId,
        now: Millis,
    ) -> impl Future<Output = Result<Reseal, StoreError>> + Send {
        async move {
            Ok(match self.get_brief(id, now).await? {
                Some(_) => Reseal::Current,
                None => Reseal::Gone,
            })
        }
    }

    /// Checks that the store can serve requests (for `/readyz`).
    fn check_ready(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// What this store can do beyond the operations above; the engine reads it once and picks
    /// how it runs requests from it.
    fn capabilities(&self) -> Capabilities;

    /// Makes every accepted write durable and releases resources; called once at shutdown.
    fn close(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        async { Ok(()) }
    }

    /// The store's own metrics, encoded on `/metrics` at each scrape (prefixed `oncekey_`).
    fn collector(&self) -> Option<Box<dyn prometheus_client::collector::Collector>> {
        None
    }
}

/// A configuration mistake: the message names the flag; `oncekey` exits 64.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);
