//! The embedded store's listing indexes, moved by the same functions that write the records they
//! point to, so they are never out of step with them — after a crash too: replaying the log
//! writes records through the same functions. The children index is written in the records'
//! transaction; the listing index's moves are collected, and the writer writes their net effect
//! at its checkpoints (`pending`), while recovery and the index's first build write them at once.
//!
//! - `listing`: (bucket, id) → (): a tenant's records of one listing bucket (`ledger::Bucket`,
//!   the stored status with PROCESSING split by semantics) are one key range, and so are those of
//!   one namespace in it, since an id is (tenant, namespace, key) length-prefixed (`codec`).
//! - `children`: (parent id, id) → (): the records whose first Claim named a parent.
//! - `listing_meta`: the key that signs page tokens, and whether the indexes were built (a
//!   database of a version without them gets them when it is first opened).
//!
//! A tombstone is in neither index; an expired record stays in them until it is swept (readers
//! check liveness).

use super::codec::{self, Head};
use super::pending::{Change, Moves};
use super::{internal, CHILDREN, LISTING, RECORDS};
use oncekey_ledger::ParentRef;
use oncekey_store::StoreError;
use redb::{ReadableTable, Table, TableDefinition, WriteTransaction};

/// name → value: `PAGE_TOKEN_KEY`, `BUILT`.
const LISTING_META: TableDefinition<&str, &[u8]> = TableDefinition::new("listing_meta");
/// The key that signs page tokens (32 random bytes, made with the database).
const PAGE_TOKEN_KEY: &str = "page_token_key";
/// Present once the indexes hold every record.
const BUILT: &str = "built";

/// Where a record is indexed: its bucket and its parent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Entry {
    pub bucket: Option<u8>,
    pub parent: Option<ParentRef>,
}

impl Entry {
    /// Where the record stored as `row` (whose head is `head`) is indexed.
    pub(super) fn of(head: &Head, row: &[u8]) -> Result<Self, StoreError> {
        Ok(Self {
            bucket: head.bucket,
            parent: match head.has_parent {
                true => codec::parent(row)?,
                false => None,
            },
        })
    }
}

/// The index tables, open in a write transaction, and the listing moves made in it.
pub(super) struct Index<'t> {
    listing: Table<'t, (u8, &'static [u8]), ()>,
    children: Table<'t, (&'static [u8], &'static [u8]), ()>,
    changes: Vec<Change<u8>>,
    /// Whether the children table was written.
    wrote: bool,
}

impl<'t> Index<'t> {
    /// Opens (creating if needed) the index tables in `txn`.
    pub(super) fn open(txn: &'t WriteTransaction) -> Result<Self, StoreError> {
        Ok(Self {
            listing: txn.open_table(LISTING).map_err(internal)?,
            children: txn.open_table(CHILDREN).map_err(internal)?,
            changes: Vec::new(),
            wrote: false,
        })
    }

    /// The listing moves made so far, in order, for the writer to defer (`pending`).
    pub(super) fn take_changes(&mut self) -> Vec<Change<u8>> {
        std::mem::take(&mut self.changes)
    }

    /// Whether the children table was written.
    pub(super) fn wrote(&self) -> bool {
        self.wrote
    }

    /// Writes the listing moves made so far into the listing table now.
    pub(super) fn write_changes(&mut self) -> Result<(), StoreError> {
        let mut moves = Moves::default();
        moves.merge(self.take_changes());
        moves.write(&mut self.listing)
    }

    /// Moves the record under `key` from where `old` indexed it to where `new` does (`None`:
    /// absent); changes nothing when they agree. The listing move is only noted (`changes`).
    pub(super) fn moved(
        &mut self,
        key: &[u8],
        old: Option<&Entry>,
        new: Option<&Entry>,
    ) -> Result<(), StoreError> {
        let bucket = |e: Option<&Entry>| e.and_then(|e| e.bucket);
        if bucket(old) != bucket(new) {
            self.changes.push(Change {
                key: key.to_vec(),
                from: bucket(old),
                to: bucket(new),
            });
        }
        let parent = |e: Option<&Entry>| e.and_then(|e| e.parent.clone());
        let (old_parent, new_parent) = (parent(old), parent(new));
        if old_parent != new_parent {
            self.wrote = true;
            if let Some(p) = old_parent {
                let p = parent_key(key, &p)?;
                self.children
                    .remove((p.as_slice(), key))
                    .map_err(internal)?;
            }
            if let Some(p) = new_parent {
                let p = parent_key(key, &p)?;
                self.children
                    .insert((p.as_slice(), key), ())
                    .map_err(internal)?;
            }
        }
        Ok(())
    }
}

/// The id bytes of `parent` in the tenant of the record whose id bytes are `child`.
pub(super) fn parent_key(child: &[u8], parent: &ParentRef) -> Result<Vec<u8>, StoreError> {
    let mut key = codec::tenant_part(child)?.to_vec();
    let rest = codec::encode_id(&oncekey_ledger::RecordId::new(
        "",
        parent.namespace.clone(),
        parent.key.clone(),
    ));
    // Skip the empty tenant's length prefix.
    key.extend_from_slice(&rest[2..]);
    Ok(key)
}

/// Prepares the indexes when the store opens, in its opening transaction: builds them from the
/// records if this database has none yet, and returns the page-token key (made now if new).
pub(super) fn prepare(txn: &WriteTransaction) -> Result<[u8; 32], StoreError> {
    let mut meta = txn.open_table(LISTING_META).map_err(internal)?;
    let built = meta.get(BUILT).map_err(internal)?.is_some();
    if !built {
        let records = txn.open_table(RECORDS).map_err(internal)?;
        let mut index = Index::open(txn)?;
        let mut count = 0u64;
        for row in records.iter().map_err(internal)? {
            let (key, row) = row.map_err(internal)?;
            let (key, row) = (key.value(), row.value());
            let entry = Entry::of(&codec::head(row)?, row)?;
            index.moved(key, None, Some(&entry))?;
            count += 1;
            if count.is_multiple_of(8192) {
                index.write_changes()?;
            }
        }
        index.write_changes()?;
        meta.insert(BUILT, &[1u8][..]).map_err(internal)?;
        if count > 0 {
            tracing::info!(records = count, "embedded store: built the listing indexes");
        }
    }
    let stored = meta
        .get(PAGE_TOKEN_KEY)
        .map_err(internal)?
        .and_then(|v| <[u8; 32]>::try_from(v.value()).ok());
    match stored {
        Some(key) => Ok(key),
        None => {
            let key: [u8; 32] = rand::random();
            meta.insert(PAGE_TOKEN_KEY, &key[..]).map_err(internal)?;
            Ok(key)
        }
    }
}
