//! Insert intents: how the CQL store keeps a new record listed even when the server that created
//! it dies between the record's lightweight transaction and its index rows (`index`).
//!
//! Before a new record's LWT, the store writes an **intent** row: a row of `records_by_status`
//! in the shared scope under the bucket `PENDING_INSERT` (no listing ever walks it), keyed by the
//! record's id plus a nonce of this attempt (so concurrent Claims of one key never touch each
//! other's intents), with no TTL. Once the LWT is answered — applied and the record's index rows
//! written, or refused (the key exists) — the intent is deleted in the background. A server that
//! dies in between, or a write whose outcome stays unknown, leaves the intent behind, and the
//! needs-attention pass that every server runs (`attention`) resolves it: it reads the record
//! the intent names and, if it exists, writes its index rows (`put_index`, idempotent: the rows
//! carry the record's own write timestamp) before deleting the intent; an intent whose record
//! is absent is deleted once it is `index::STALE_AFTER_MS` old and a SERIAL read (which settles a
//! Paxos round left in flight) still finds none.
//!
//! Cost: one more plain write before every insert attempt (a Claim of an existing key included)
//! and one background delete after it, whose tombstone sits in one of the 16 intent partitions
//! for `gc_grace_seconds`.
//!
//! This module must not write the records table.

use super::attention::SharedWalk;
use super::index::{self, StatusRow};
use super::list::text;
use super::{errors, CqlStore};
use oncekey_ledger::{Millis, Record, RecordId};
use oncekey_store::StoreError;
use scylla::value::CqlValue;

/// The bucket of intent rows (never a listing bucket).
pub(crate) const PENDING_BUCKET: &str = "PENDING_INSERT";
/// Intents younger than this belong to inserts most likely still in flight: readers leave them.
pub(crate) const PENDING_GRACE_MS: Millis = 2_000;
/// Separates the key from the attempt's nonce in an intent row's `key` column (keys hold no
/// control characters).
const NONCE_SEPARATOR: char = '\u{1f}';

/// One insert attempt's intent: the record's id, and the attempt's nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Intent {
    pub id: RecordId,
    pub nonce: [u8; 8],
    /// The write timestamp of its row (deleted at it).
    pub timestamp: i64,
}

impl Intent {
    /// The intent of inserting `record`, with a fresh nonce.
    fn new(record: &Record) -> Self {
        Self {
            id: record.id.clone(),
            nonce: rand::random(),
            timestamp: index::write_timestamp(record),
        }
    }

    /// The row's `key` column: the record's key, the separator, the nonce in hex.
    fn row_key(&self) -> String {
        format!(
            "{}{NONCE_SEPARATOR}{}",
            self.id.key,
            hex::encode(self.nonce)
        )
    }

    /// The intent an index row of the intent bucket holds (`None`: not an intent row).
    fn from_row(row: &super::list::Row) -> Option<Self> {
        let (key, nonce) = row.id.key.rsplit_once(NONCE_SEPARATOR)?;
        let nonce = <[u8; 8]>::try_from(hex::decode(nonce).ok()?).ok()?;
        Some(Self {
            id: RecordId::new(row.id.tenant.clone(), row.id.namespace.clone(), key),
            nonce,
            timestamp: row.write_time,
        })
    }

    /// The primary key of its row: scope, bucket, shard, tenant, namespace, key (with nonce).
    fn key_values(&self) -> Vec<super::Value> {
        vec![
            text(index::SHARED_SCOPE),
            text(PENDING_BUCKET),
            Some(CqlValue::Int(index::shard(&self.id))),
            text(&self.id.tenant),
            text(&self.id.namespace),
            text(&self.row_key()),
        ]
    }
}

impl CqlStore {
    /// Writes the intent of inserting `record` (before its LWT).
    pub(super) async fn put_intent(
        &self,
        record: &Record,
        now: Millis,
    ) -> Result<Intent, StoreError> {
        let intent = Intent::new(record);
        let mut values = intent.key_values();
        values.extend([
            super::codec::big(record.version),
            record.lease_expires_at.map(super::codec::timestamp),
            Some(super::codec::timestamp(now)),
            // No TTL: an intent lives until it is resolved.
            Some(CqlValue::Int(0)),
            Some(CqlValue::BigInt(intent.timestamp)),
        ]);
        self.session()
            .execute_unpaged(&self.index.put_status, values)
            .await
            .map_err(|e| errors::classify(&e).into_store_error())?;
        Ok(intent)
    }

    /// Deletes `intent` in the background (a failure leaves it to the readers).
    pub(super) fn drop_intent(&self, intent: &Intent) {
        let mut values = vec![Some(CqlValue::BigInt(intent.timestamp))];
        values.extend(intent.key_values());
        self.spawn_deletes(vec![("status", values)]);
    }

    /// Resolves the intents left behind (see the module docs): returns how many records got
    /// their index rows written here.
    pub(super) async fn resolve_intents(&self, now: Millis) -> Result<usize, StoreError> {
        let mut repaired = 0;
        let mut walk = SharedWalk::new(PENDING_BUCKET);
        while let Some(rows) = self.next_shared_page(&mut walk).await? {
            for row in rows {
                let age = now.saturating_sub(row.written_at);
                if age < PENDING_GRACE_MS {
                    continue;
                }
                let Some(intent) = Intent::from_row(&row) else {
                    tracing::debug!("a row of the intent bucket that is no intent: left");
                    continue;
                };
                // One intent that cannot be resolved now waits for the next pass; the
                // others (and the counts) go on.
                match self.resolve(&intent, age, now).await {
                    Ok(true) => repaired += 1,
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, namespace = %intent.id.namespace, "an insert intent was not resolved; the next pass tries again")
                    }
                }
            }
        }
        if repaired > 0 {
            tracing::info!(
                records = repaired,
                "indexed records whose insert left its intent behind (a server stopped between the record's write and its index rows)"
            );
        }
        Ok(repaired)
    }

    /// Resolves one intent `age` ms old: true when it wrote its record's index rows.
    async fn resolve(&self, intent: &Intent, age: Millis, now: Millis) -> Result<bool, StoreError> {
        let record = match self.read_listed(&intent.id, now).await? {
            Some(record) => Some(record),
            // Absent at QUORUM: an insert may still be in flight; once the intent is old, a
            // SERIAL read settles any Paxos round left open before it is given up.
            None if age >= index::STALE_AFTER_MS => self.read_serial(&intent.id).await?.live(now),
            None => return Ok(false),
        };
        let repaired = match &record {
            Some(record) => {
                self.put_index(record, now).await?;
                StatusRow::of(record).is_some()
            }
            None => false,
        };
        self.drop_intent(intent);
        Ok(repaired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intent_rows_carry_the_key_and_the_nonce() {
        let id = RecordId::new("t", "ns", "order/β-1");
        let intent = Intent {
            id: id.clone(),
            nonce: [1, 2, 3, 4, 5, 6, 7, 8],
            timestamp: 42,
        };
        let row = super::super::list::Row {
            id: RecordId::new("t", "ns", intent.row_key()),
            version: 1,
            lease_expires_at: None,
            written_at: 0,
            write_time: 42,
        };
        assert_eq!(Intent::from_row(&row), Some(intent));
        let plain = super::super::list::Row {
            id: id.clone(),
            ..row
        };
        assert_eq!(Intent::from_row(&plain), None);
    }
}
