//! The prepared statements of the CQL store: their texts (generated from the codec's column list)
//! and their consistency settings.
//!
//! Every write is a lightweight transaction; reads are plain QUORUM reads except `read_serial`, a
//! linearizable (Paxos) read used to settle uncertain outcomes and failed conditions. Nothing here
//! executes a statement.

use super::codec::{COLUMNS, HIT_COLUMNS, KEY_COLUMNS, WRITE_MARKS};
use scylla::client::session::Session;
use scylla::errors::PrepareError;
use scylla::policies::retry::FallthroughRetryPolicy;
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The table holding the records (inside the configured keyspace).
pub(crate) const RECORDS: &str = "records";

/// Consistency levels for one deployment: QUORUM, or LOCAL_QUORUM when a local datacenter is
/// configured, for reads and commits; SERIAL (the default, also with a local datacenter) or
/// LOCAL_SERIAL for Paxos. Never mix SERIAL and LOCAL_SERIAL on the same data: two datacenters
/// each running their own Paxos on one key can both win.
#[derive(Debug, Clone, Copy)]
pub struct Levels {
    /// For reads and for the commit phase of conditional writes.
    pub consistency: Consistency,
    /// For the Paxos phase of conditional writes and for linearizable reads.
    pub serial: SerialConsistency,
}

impl Levels {
    /// The levels for a deployment with (`true`) or without a local datacenter, with `serial`
    /// for Paxos.
    pub fn new(local_dc: bool, serial: SerialConsistency) -> Self {
        let consistency = if local_dc {
            Consistency::LocalQuorum
        } else {
            Consistency::Quorum
        };
        Self {
            consistency,
            serial,
        }
    }

    /// The consistency of a linearizable read.
    pub fn serial_read(self) -> Consistency {
        match self.serial {
            SerialConsistency::LocalSerial => Consistency::LocalSerial,
            SerialConsistency::Serial => Consistency::Serial,
        }
    }
}

/// The store's prepared statements. Every write that leaves a row is a conditional batch ending
/// with `mark_text` (values: `codec::mark_values`), which puts the write's nonce in
/// `codec::WRITE_MARKS`: a write recognises itself by it after further writes followed it.
pub(crate) struct Statements {
    /// The record of a key at QUORUM.
    pub read: PreparedStatement,
    /// The record of a key at SERIAL: sees every accepted Paxos proposal.
    pub read_serial: PreparedStatement,
    /// Create if absent: `insert_text` (binds the key, `COLUMNS`, then the TTL) and the mark.
    pub insert: Batch,
    /// Create if absent a record kept until it settles (no TTL): `insert_key_text` (the row
    /// marker, with the shortest TTL; binds the key), `set_text` (every column, without TTL;
    /// binds `COLUMNS` and the key) and the mark. A plain INSERT without TTL would leave a row
    /// marker that outlives the record: once its cells expire after it settles, an empty row
    /// would stay forever. Cells alone keep the row (and `IF NOT EXISTS`) alive.
    pub insert_kept: Batch,
    /// Replace a live record of a version: the update (binds the TTL, `COLUMNS`, the key, the
    /// expected version and `now`) and the mark.
    pub replace: Batch,
    /// `replace` of `HIT_COLUMNS` only (a dedup hit's write; binds the TTL, `HIT_COLUMNS`, the
    /// key, the expected version and `now`) and the mark.
    pub replace_hits: Batch,
    /// Replace an expired (or cell-less) row of a version: the update (binds the TTL, `COLUMNS`,
    /// the key and the expected version, null for a row whose cells all expired) and the mark.
    pub overwrite: Batch,
    /// Delete a live record of a version; binds the key, the expected version and `now`.
    pub delete: PreparedStatement,
    /// A page of every record's key and partition token, in token order, from a token on
    /// (`>=`: the first page, bound to `i64::MIN`); binds the token and the limit.
    pub scan_from: PreparedStatement,
    /// `scan_from` after a token (`>`: the next pages); binds the last token read and the
    /// limit.
    pub scan_after: PreparedStatement,
}

fn where_key() -> String {
    KEY_COLUMNS
        .iter()
        .map(|c| format!("{c} = ?"))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// `SELECT <columns> FROM ks.records WHERE <key>`.
pub(crate) fn select_text(keyspace: &str) -> String {
    format!(
        "SELECT {} FROM {keyspace}.{RECORDS} WHERE {}",
        COLUMNS.join(", "),
        where_key()
    )
}

/// `select_text` with `WRITE_MARKS`: the row as read to settle a conditional write's answer.
pub(crate) fn select_serial_text(keyspace: &str) -> String {
    format!(
        "SELECT {}, {WRITE_MARKS} FROM {keyspace}.{RECORDS} WHERE {}",
        COLUMNS.join(", "),
        where_key()
    )
}

/// `UPDATE … USING TTL ? SET hit_writes[?] = ? WHERE <key>`: unconditional, so only ever the
/// last statement of a conditional batch (see `Statements`).
pub(crate) fn mark_text(keyspace: &str) -> String {
    format!(
        "UPDATE {keyspace}.{RECORDS} USING TTL ? SET {WRITE_MARKS}[?] = ? WHERE {}",
        where_key()
    )
}

/// `INSERT … IF NOT EXISTS USING TTL ?` (that order: the condition comes before USING).
pub(crate) fn insert_text(keyspace: &str) -> String {
    let names: Vec<&str> = KEY_COLUMNS.iter().chain(COLUMNS.iter()).copied().collect();
    let marks = vec!["?"; names.len()].join(", ");
    format!(
        "INSERT INTO {keyspace}.{RECORDS} ({}) VALUES ({marks}) IF NOT EXISTS USING TTL ?",
        names.join(", ")
    )
}

/// `INSERT INTO … (<key>) VALUES (…) IF NOT EXISTS USING TTL 1`: only the row marker.
pub(crate) fn insert_key_text(keyspace: &str) -> String {
    let marks = vec!["?"; KEY_COLUMNS.len()].join(", ");
    format!(
        "INSERT INTO {keyspace}.{RECORDS} ({}) VALUES ({marks}) IF NOT EXISTS USING TTL 1",
        KEY_COLUMNS.join(", ")
    )
}

/// `UPDATE … USING TTL 0 SET <every column> WHERE <key>`: unconditional, so only ever part of a
/// conditional batch (never a plain write on the records table).
pub(crate) fn set_text(keyspace: &str) -> String {
    let sets: Vec<String> = COLUMNS.iter().map(|c| format!("{c} = ?")).collect();
    format!(
        "UPDATE {keyspace}.{RECORDS} USING TTL 0 SET {} WHERE {}",
        sets.join(", "),
        where_key()
    )
}

/// `UPDATE … USING TTL ? SET <every column> WHERE <key> IF <condition>`.
pub(crate) fn update_text(keyspace: &str, condition: &str) -> String {
    update_columns_text(keyspace, &COLUMNS, condition)
}

/// `UPDATE … USING TTL ? SET <columns> WHERE <key> IF <condition>`.
fn update_columns_text(keyspace: &str, columns: &[&str], condition: &str) -> String {
    let sets: Vec<String> = columns.iter().map(|c| format!("{c} = ?")).collect();
    format!(
        "UPDATE {keyspace}.{RECORDS} USING TTL ? SET {} WHERE {} IF {condition}",
        sets.join(", "),
        where_key()
    )
}

/// `DELETE … WHERE <key> IF version = ? AND expires_at > ?`.
pub(crate) fn delete_text(keyspace: &str) -> String {
    format!(
        "DELETE FROM {keyspace}.{RECORDS} WHERE {} IF version = ? AND expires_at > ?",
        where_key()
    )
}

/// `SELECT tenant, namespace, key, token(…) FROM ks.records WHERE token(…) <op> ? LIMIT ?`:
/// a page of a scan over every partition (`Store::scan`).
pub(crate) fn scan_text(keyspace: &str, op: &str) -> String {
    let key = KEY_COLUMNS.join(", ");
    format!(
        "SELECT {key}, token({key}) FROM {keyspace}.{RECORDS} WHERE token({key}) {op} ? LIMIT ?"
    )
}

/// Set by `plant_lost_update` (a test knob); read when statements are prepared.
static PLANTED_LOST_UPDATE: AtomicBool = AtomicBool::new(false);

/// Test knob `ONCEKEY_TEST_PLANTED_BUG=lost-update` (`crate::testing`, which `serve` warns about
/// at start-up): stores opened from now on in this process prepare `replace` weakened to
/// `version >= ?`, so a write decided on a stale read still applies (a lost update) — the known
/// bug the cluster fault tests plant to show that their linearizability checker catches it.
pub fn plant_lost_update() {
    PLANTED_LOST_UPDATE.store(true, Ordering::Relaxed);
}

/// The condition of `replace`: the version the write was decided on, on a live record (unless
/// the lost update is planted).
fn replace_condition() -> &'static str {
    if PLANTED_LOST_UPDATE.load(Ordering::Relaxed) {
        tracing::warn!(
            "planted bug lost-update: replacing writes skip their version check (for tests only)"
        );
        "version >= ? AND expires_at > ?"
    } else {
        "version = ? AND expires_at > ?"
    }
}

impl Statements {
    /// Prepares every statement against `keyspace`; fails when the table does not exist.
    pub(crate) async fn prepare(
        session: &Session,
        keyspace: &str,
        levels: Levels,
    ) -> Result<Self, PrepareError> {
        let prepare = |text: String, idempotent: bool| async move {
            let mut statement = session.prepare(text).await?;
            statement.set_consistency(levels.consistency);
            statement.set_serial_consistency(Some(levels.serial));
            // Reads may be retried by the driver; conditional writes never are: an uncertain
            // write is settled by a serial read instead (see `mod.rs`).
            statement.set_is_idempotent(idempotent);
            if !idempotent {
                // Not even where the driver's default policy retries regardless (Unavailable, a
                // bootstrapping node): a coordinator can answer Unavailable after a proposal of
                // the write was accepted, and a retry would then find the condition failed by
                // the write's own first copy, which `write` must recognise instead.
                statement.set_retry_policy(Some(Arc::new(FallthroughRetryPolicy::new())));
            }
            Ok::<_, PrepareError>(statement)
        };
        let mut read_serial = prepare(select_serial_text(keyspace), true).await?;
        read_serial.set_consistency(levels.serial_read());
        let mark = prepare(mark_text(keyspace), false).await?;
        let conditional_batch = |statements: Vec<PreparedStatement>| {
            let mut batch = Batch::new(BatchType::Unlogged);
            for statement in statements.into_iter().chain([mark.clone()]) {
                batch.append_statement(statement);
            }
            batch.set_consistency(levels.consistency);
            batch.set_serial_consistency(Some(levels.serial));
            batch.set_is_idempotent(false);
            // Like every conditional write: never retried by the driver (see `prepare`).
            batch.set_retry_policy(Some(Arc::new(FallthroughRetryPolicy::new())));
            batch
        };
        let update = |condition: &str| prepare(update_text(keyspace, condition), false);
        let hits = update_columns_text(keyspace, &HIT_COLUMNS, "version = ? AND expires_at > ?");
        Ok(Self {
            read: prepare(select_text(keyspace), true).await?,
            read_serial,
            insert: conditional_batch(vec![prepare(insert_text(keyspace), false).await?]),
            insert_kept: conditional_batch(vec![
                prepare(insert_key_text(keyspace), false).await?,
                prepare(set_text(keyspace), false).await?,
            ]),
            replace: conditional_batch(vec![update(replace_condition()).await?]),
            replace_hits: conditional_batch(vec![prepare(hits, false).await?]),
            overwrite: conditional_batch(vec![update("version = ?").await?]),
            delete: prepare(delete_text(keyspace), false).await?,
            scan_from: prepare(scan_text(keyspace, ">="), true).await?,
            scan_after: prepare(scan_text(keyspace, ">"), true).await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_put_the_condition_and_ttl_where_cql_wants_them() {
        let insert = insert_text("ks");
        assert!(insert.starts_with("INSERT INTO ks.records (tenant, namespace, key, version,"));
        assert!(insert.ends_with("IF NOT EXISTS USING TTL ?"));
        assert_eq!(
            insert.matches('?').count(),
            KEY_COLUMNS.len() + COLUMNS.len() + 1
        );
        let update = update_text("ks", "version = ?");
        assert!(update.starts_with("UPDATE ks.records USING TTL ? SET version = ?, status = ?"));
        assert!(update.ends_with("WHERE tenant = ? AND namespace = ? AND key = ? IF version = ?"));
        assert_eq!(
            update_columns_text("ks", &HIT_COLUMNS, "version = ?"),
            "UPDATE ks.records USING TTL ? SET version = ?, dedup_hits = ?, history = ? \
             WHERE tenant = ? AND namespace = ? AND key = ? IF version = ?"
        );
        assert_eq!(
            mark_text("ks"),
            "UPDATE ks.records USING TTL ? SET hit_writes[?] = ? \
             WHERE tenant = ? AND namespace = ? AND key = ?"
        );
        assert_eq!(
            insert_key_text("ks"),
            "INSERT INTO ks.records (tenant, namespace, key) VALUES (?, ?, ?) \
             IF NOT EXISTS USING TTL 1"
        );
        let set = set_text("ks");
        assert!(set.starts_with("UPDATE ks.records USING TTL 0 SET version = ?, status = ?"));
        assert!(set.ends_with("WHERE tenant = ? AND namespace = ? AND key = ?"));
        assert_eq!(set.matches('?').count(), COLUMNS.len() + KEY_COLUMNS.len());
        assert_eq!(
            delete_text("ks"),
            "DELETE FROM ks.records WHERE tenant = ? AND namespace = ? AND key = ? \
             IF version = ? AND expires_at > ?"
        );
        assert_eq!(
            scan_text("ks", ">"),
            "SELECT tenant, namespace, key, token(tenant, namespace, key) FROM ks.records \
             WHERE token(tenant, namespace, key) > ? LIMIT ?"
        );
    }
}
