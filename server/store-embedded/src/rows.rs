//! The records and outcomes as the writer's transaction sees them: written straight into their
//! tables (recovery, which replays the log into redb), or staged for the overlay (`overlay`:
//! the writer's batches), reading the batch's own writes first, then the overlay, then redb.

use super::internal;
use super::overlay::{Map, Row, State};
use super::{OUTCOMES, RECORDS};
use oncekey_store::StoreError;
use redb::{AccessGuard, ReadableTable, Table, WriteTransaction};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A stored row, borrowed from the table or shared with the overlay.
pub(super) enum Stored<'a> {
    Table(AccessGuard<'a, &'static [u8]>),
    Overlay(Arc<Row>),
}

impl Stored<'_> {
    pub(super) fn row(&self) -> &[u8] {
        match self {
            Stored::Table(guard) => guard.value(),
            Stored::Overlay(row) => &row.row,
        }
    }
}

/// The records and outcomes tables, open in the writer's transaction.
pub(super) struct Rows<'t> {
    records: Table<'t, &'static [u8], &'static [u8]>,
    outcomes: Table<'t, &'static [u8], &'static [u8]>,
    /// `None`: writes go straight into the tables.
    layer: Option<Layer<'t>>,
}

/// The overlay under a batch, and what the batch wrote.
struct Layer<'t> {
    overlay: &'t Map,
    staged: BTreeMap<Vec<u8>, State>,
}

impl Layer<'_> {
    /// The state the batch or the overlay holds for `key`; `None` if neither has it.
    fn state(&self, key: &[u8]) -> Option<&State> {
        self.staged
            .get(key)
            .or_else(|| self.overlay.get(key).map(|slot| &slot.state))
    }
}

impl<'t> Rows<'t> {
    /// Opens the tables in `txn`; with `overlay`, writes are staged over it (`take_staged`).
    pub(super) fn open(
        txn: &'t WriteTransaction,
        overlay: Option<&'t Map>,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            records: txn.open_table(RECORDS).map_err(internal)?,
            outcomes: txn.open_table(OUTCOMES).map_err(internal)?,
            layer: overlay.map(|overlay| Layer {
                overlay,
                staged: BTreeMap::new(),
            }),
        })
    }

    /// The row stored under `key`.
    pub(super) fn get(&self, key: &[u8]) -> Result<Option<Stored<'_>>, StoreError> {
        if let Some(state) = self.layer.as_ref().and_then(|l| l.state(key)) {
            return Ok(state.clone().map(Stored::Overlay));
        }
        Ok(self.records.get(key).map_err(internal)?.map(Stored::Table))
    }

    /// Calls `f` with the outcome stored apart under `key`, whose row is `stored`.
    pub(super) fn with_outcome<R>(
        &self,
        key: &[u8],
        stored: &Stored<'_>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, StoreError> {
        match stored {
            Stored::Overlay(row) => Ok(f(row.outcome.as_deref())),
            Stored::Table(_) => {
                let outcome = self.outcomes.get(key).map_err(internal)?;
                Ok(f(outcome.as_ref().map(|o| o.value())))
            }
        }
    }

    /// Stores `row` under `key` with its outcome (`None`: none apart); `changed`: whether the
    /// outcome differs from the stored one (a table's outcome is written only then).
    pub(super) fn put(
        &mut self,
        key: &[u8],
        row: &[u8],
        outcome: Option<Vec<u8>>,
        changed: bool,
    ) -> Result<(), StoreError> {
        if let Some(layer) = &mut self.layer {
            let row = Row {
                row: row.to_vec(),
                outcome,
            };
            layer.staged.insert(key.to_vec(), Some(Arc::new(row)));
            return Ok(());
        }
        self.records.insert(key, row).map_err(internal)?;
        match (changed, outcome) {
            (false, _) => {}
            (true, Some(outcome)) => {
                self.outcomes
                    .insert(key, outcome.as_slice())
                    .map_err(internal)?;
            }
            (true, None) => {
                self.outcomes.remove(key).map_err(internal)?;
            }
        }
        Ok(())
    }

    /// Removes the record under `key` and its outcome.
    pub(super) fn remove(&mut self, key: &[u8]) -> Result<(), StoreError> {
        if let Some(layer) = &mut self.layer {
            layer.staged.insert(key.to_vec(), None);
            return Ok(());
        }
        self.records.remove(key).map_err(internal)?;
        self.outcomes.remove(key).map_err(internal)?;
        Ok(())
    }

    /// Replays a logged outcome write (recovery only: the tables are written straight).
    pub(super) fn replay_outcome(
        &mut self,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), StoreError> {
        match value {
            Some(value) => self.outcomes.insert(key, value).map(|_| ()),
            None => self.outcomes.remove(key).map(|_| ()),
        }
        .map_err(internal)
    }

    /// What the batch wrote, for the overlay (empty when writing straight).
    pub(super) fn take_staged(&mut self) -> BTreeMap<Vec<u8>, State> {
        self.layer
            .as_mut()
            .map(|l| std::mem::take(&mut l.staged))
            .unwrap_or_default()
    }
}
