//! The operator's RPCs: Approve and Reject an operation that awaits approval (the token needs
//! the `approve` scope), Purge a record (the `admin` scope). Like every unary call they go through
//! the client's retry and breaker layers: Approve and Reject are safe to resend (the same decision
//! again is OK), and Purge reports a record that is gone — because an earlier attempt whose answer
//! was lost purged it, or because there was none — as `Ok(false)`.

use crate::connect::Client;
use crate::error::Error;
use crate::key::OperationKey;
use crate::stack::{Call, Reply};
use crate::types::Record;
use oncekey_api::fingerprint::Fingerprint;
use oncekey_api::v1;

impl Client {
    /// `Approve`: the operation awaiting approval becomes APPROVED and the next Claim acquires
    /// it. `fingerprint`, when given, pins the decision to the arguments the approver saw (another
    /// stored fingerprint is KEY_REUSED); `note` (at most 1 KiB) is kept with the decision.
    /// NOT_AWAITING_APPROVAL when the operation does not await approval (anymore).
    pub async fn approve(
        &self,
        key: &OperationKey,
        fingerprint: Option<Fingerprint>,
        note: &str,
    ) -> Result<Record, Error> {
        let request = v1::ApproveRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            fingerprint: fingerprint.map(|fp| fp.to_vec()).unwrap_or_default(),
            note: note.into(),
        };
        match self.call(Call::Approve(request)).await? {
            Reply::Approve(r) => Record::from_wire(r.record.ok_or(Error::Protocol("no record"))?),
            _ => Err(Error::Protocol("mismatched reply")),
        }
    }

    /// `Reject`: the operation awaiting approval fails for good with error `{403, note}`, which
    /// every later Claim replays. Same arguments as [`Client::approve`].
    pub async fn reject(
        &self,
        key: &OperationKey,
        fingerprint: Option<Fingerprint>,
        note: &str,
    ) -> Result<Record, Error> {
        let request = v1::RejectRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            fingerprint: fingerprint.map(|fp| fp.to_vec()).unwrap_or_default(),
            note: note.into(),
        };
        match self.call(Call::Reject(request)).await? {
            Reply::Reject(r) => Record::from_wire(r.record.ok_or(Error::Protocol("no record"))?),
            _ => Err(Error::Protocol("mismatched reply")),
        }
    }

    /// `Purge`: removes the record of `key` and its history, in any state; its fencing sequence
    /// continues, so the old holder's Complete, Fail and Renew answer LEASE_LOST. An unsettled
    /// at-most-once operation needs `force` (its effect may then run again; without it:
    /// UNSETTLED_AT_MOST_ONCE). `Ok(true)` when this call purged it, `Ok(false)` when there was no
    /// record (never was, expired, or purged by an earlier attempt of this call).
    pub async fn purge(&self, key: &OperationKey, force: bool) -> Result<bool, Error> {
        let request = v1::PurgeRequest {
            namespace: key.namespace().into(),
            key: key.key().into(),
            force,
        };
        match self.call(Call::Purge(request)).await {
            Ok(Reply::Purge(_)) => Ok(true),
            Ok(_) => Err(Error::Protocol("mismatched reply")),
            Err(e) if e.code() == tonic::Code::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }
}
