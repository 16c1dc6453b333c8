//! The operator's transitions run against the store: Approve and Reject of a record awaiting
//! approval, and Purge. Like every other write, each is one ledger decision applied with a
//! conditional write (decided again on a conflict), so a decision never races a Claim.
//!
//! A decision wakes the Claims held on the record (`wait`), which then acquire it (approved),
//! replay the rejection, or find the key purged.

use super::rounds::Basis;
use super::{Engine, EngineError};
use oncekey_ledger::{self as ledger, LedgerError, Millis, Record, RecordId, Status, Transition};
use oncekey_store::{Store, StoreError};

/// An approval rule of the ledger: `approve` or `reject`.
type Rule =
    fn(Option<&Record>, Option<&[u8; 32]>, &str, &str, Millis) -> Result<Transition, LedgerError>;

/// Who decides and why: the approver's label and note.
#[derive(Debug, Clone, Copy)]
pub struct Decider<'a> {
    /// Who decides (the token's label, or "dev").
    pub by: &'a str,
    /// The approver's note.
    pub note: &'a str,
    /// The fingerprint the approver saw, if pinned.
    pub fingerprint: Option<&'a [u8; 32]>,
}

impl<S: Store> Engine<S> {
    /// Approve: AWAITING_APPROVAL → APPROVED.
    pub async fn approve(
        &self,
        id: &RecordId,
        decider: Decider<'_>,
    ) -> Result<Record, EngineError> {
        self.decide(id, decider, ledger::approve).await
    }

    /// Reject: AWAITING_APPROVAL → FAILED `{403, note}`.
    pub async fn reject(&self, id: &RecordId, decider: Decider<'_>) -> Result<Record, EngineError> {
        self.decide(id, decider, ledger::reject).await
    }

    async fn decide(
        &self,
        id: &RecordId,
        decider: Decider<'_>,
        rule: Rule,
    ) -> Result<Record, EngineError> {
        let basis = self.core.read(id).await?;
        let ran = self
            .core
            .run(id, basis, |current, now| {
                let transition = rule(current, decider.fingerprint, decider.by, decider.note, now)?;
                Ok((transition, ()))
            })
            .await?;
        let mut record = ran.record.ok_or(EngineError::NotFound)?;
        self.core.hits.merge_counts_into(&mut record).await;
        Ok(record)
    }

    /// Purge: the record of `id` and its history are removed (a Purge tombstone keeps its
    /// fencing sequence). Logged with the tenant, the namespace and the key's hash.
    pub async fn purge(&self, id: &RecordId, force: bool) -> Result<(), EngineError> {
        let basis = match self.core.remembered(id).await {
            // Sealed fields that cannot be opened (a lost key): Purge keeps none of them, so it
            // decides on the record without them.
            Err(StoreError::Unreadable { .. }) => {
                let now = self.core.clock.now();
                Basis::Stored(self.core.store.get_lenient(id, now).await?)
            }
            basis => basis?,
        };
        let purged = self.purge_on(id, basis, force).await?;
        tracing::info!(
            tenant = %id.tenant,
            namespace = %id.namespace,
            key_hash = %oncekey_telemetry::key_hash(&id.key),
            status = ?purged.status,
            fencing_token = purged.fencing_token,
            force,
            "record purged"
        );
        Ok(())
    }

    /// The Purge decision on `basis`, carried out (decided again on a conflict); the caller
    /// logs it.
    pub(crate) async fn purge_on(
        &self,
        id: &RecordId,
        basis: Basis,
        force: bool,
    ) -> Result<Purged, EngineError> {
        let ran = self
            .core
            .run(id, basis, |current, now| {
                let status = current.map(|r| r.status);
                Ok((ledger::purge(current, force, now)?, status))
            })
            .await?;
        Ok(Purged {
            status: ran.extra.unwrap_or(Status::Purged),
            fencing_token: ran.record.as_ref().map_or(0, |r| r.fencing_token),
        })
    }
}

/// What a purge removed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Purged {
    /// The status the record had.
    pub(crate) status: Status,
    /// The fencing sequence its tombstone keeps.
    pub(crate) fencing_token: u64,
}
