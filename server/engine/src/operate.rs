//! The operator's transitions run against the store: Approve and Reject of a record awaiting
//! approval, and Purge. Like every other write, each is one ledger decision applied with a
//! conditional write (decided again on a conflict), so a decision never races a Claim.
//!
//! A decision wakes the Claims held on the record (`wait`), which then acquire it (approved),
//! replay the rejection, or find the key purged.

use super::{Engine, EngineError};
use oncekey_ledger::{self as ledger, LedgerError, Millis, Record, RecordId, Status, Transition};
use oncekey_store::Store;

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
        let basis = self.core.remembered(id).await?;
        let ran = self
            .core
            .run(id, basis, |current, now| {
                let status = current.map(|r| r.status);
                Ok((ledger::purge(current, force, now)?, status))
            })
            .await?;
        let (record, status) = (ran.record, ran.extra);
        let token = record.as_ref().map_or(0, |r| r.fencing_token);
        tracing::info!(
            tenant = %id.tenant,
            namespace = %id.namespace,
            key_hash = %oncekey_telemetry::key_hash(&id.key),
            status = ?status.unwrap_or(Status::Purged),
            fencing_token = token,
            force,
            "record purged"
        );
        Ok(())
    }
}
