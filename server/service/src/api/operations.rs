//! The operator's RPCs — Approve, Reject, Purge — and the dry run of a Claim: request
//! validation (naming the field) and one engine call each. Which caller may call them is decided
//! before they run (`scopes`); Approve and Reject record the caller's label as `decided_by`.

use super::auth::Principal;
use super::convert;
use super::error::ApiError;
use super::limits::MAX_NOTE_BYTES;
use super::LedgerService;
use crate::engine::Decider;
use crate::store::Store;
use oncekey_api::v1;

/// A note of an Approve or Reject: at most `MAX_NOTE_BYTES`, no control characters other than
/// line breaks and tabs (it is shown to operators and, for a Reject, replayed as the error).
pub fn note(value: &str) -> Result<(), ApiError> {
    if value.len() > MAX_NOTE_BYTES {
        return Err(ApiError::too_large(
            "note",
            format!("at most {MAX_NOTE_BYTES} bytes"),
        ));
    }
    if value
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\t'))
    {
        return Err(ApiError::invalid(
            "note",
            "must not contain control characters other than newline and tab",
        ));
    }
    Ok(())
}

/// The optional fingerprint pin of an Approve or Reject: empty, or 32 bytes.
pub fn pinned_fingerprint(bytes: &[u8]) -> Result<Option<[u8; 32]>, ApiError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    bytes.try_into().map(Some).map_err(|_| {
        ApiError::invalid(
            "fingerprint",
            "must be empty or 32 bytes (the SHA-256 the approver saw)",
        )
    })
}

impl<S: Store> LedgerService<S> {
    /// A dry-run Claim: the outcome it would get, the record as stored, never a lease.
    pub(super) async fn dry_run(
        &self,
        tenant: &str,
        req: &v1::ClaimRequest,
    ) -> Result<v1::ClaimResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        // `wait` is validated like any Claim's, then ignored: a dry run answers now.
        let (args, _wait) = self.claim_args(tenant, req)?;
        let rule = self.intent_rule(tenant, req)?;
        if let Some(matches) = self
            .engine
            .intent_dry_run(&id, &args.fingerprint, rule)
            .await?
        {
            return Ok(super::safety::duplicate_intent(matches));
        }
        let reply = self.engine.dry_run(&id, &args).await?;
        Ok(v1::ClaimResponse {
            outcome: convert::outcome(reply.outcome) as i32,
            record: reply.record.map(|r| self.answer(r, &id, &req.key)),
            lease: None,
            retry_after: reply.retry_after.map(convert::duration),
            intent_matches: Vec::new(),
        })
    }

    pub(super) async fn approve_rpc(
        &self,
        tenant: &str,
        principal: &Principal,
        req: &mut v1::ApproveRequest,
    ) -> Result<v1::ApproveResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        let fingerprint = pinned_fingerprint(&req.fingerprint)?;
        note(&req.note)?;
        let decider = Decider {
            by: &principal.label,
            note: &req.note,
            fingerprint: fingerprint.as_ref(),
        };
        let record = self.engine.approve(&id, decider).await?;
        Ok(v1::ApproveResponse {
            record: Some(self.answer(record, &id, &req.key)),
        })
    }

    pub(super) async fn reject_rpc(
        &self,
        tenant: &str,
        principal: &Principal,
        req: &mut v1::RejectRequest,
    ) -> Result<v1::RejectResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        let fingerprint = pinned_fingerprint(&req.fingerprint)?;
        note(&req.note)?;
        let decider = Decider {
            by: &principal.label,
            note: &req.note,
            fingerprint: fingerprint.as_ref(),
        };
        let record = self.engine.reject(&id, decider).await?;
        Ok(v1::RejectResponse {
            record: Some(self.answer(record, &id, &req.key)),
        })
    }

    pub(super) async fn purge_rpc(
        &self,
        tenant: &str,
        req: &mut v1::PurgeRequest,
    ) -> Result<v1::PurgeResponse, ApiError> {
        let id = self.record_id(tenant, &req.namespace, &req.key)?;
        self.engine.purge(&id, req.force).await?;
        Ok(v1::PurgeResponse {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(e: ApiError) -> String {
        match e {
            ApiError::InvalidField { field, .. } | ApiError::TooLarge { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn notes_are_bounded_and_printable() {
        assert!(note("").is_ok());
        assert!(note("ok: refund approved\n\tby finance").is_ok());
        assert!(note(&"n".repeat(MAX_NOTE_BYTES)).is_ok());
        let long = note(&"n".repeat(MAX_NOTE_BYTES + 1)).unwrap_err();
        assert!(matches!(long, ApiError::TooLarge { .. }));
        assert_eq!(field(long), "note");
        assert_eq!(field(note("bell\u{7}").unwrap_err()), "note");
        assert_eq!(field(note("cr\r").unwrap_err()), "note");
    }

    #[test]
    fn a_pinned_fingerprint_is_empty_or_32_bytes() {
        assert_eq!(pinned_fingerprint(&[]).unwrap(), None);
        assert_eq!(pinned_fingerprint(&[7; 32]).unwrap(), Some([7; 32]));
        for bad in [vec![1; 31], vec![1; 33], vec![0]] {
            assert_eq!(field(pinned_fingerprint(&bad).unwrap_err()), "fingerprint");
        }
    }
}
