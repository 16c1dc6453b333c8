//! How a running saga ends other than by finishing: rolled back after a step failed for good
//! (compensations in reverse order, each once, then the saga FAILED with code 409), released
//! after a retryable failure or an interruption (the next start resumes it at once), or left to
//! lapse into UNKNOWN after a compensation failed for good (an operator must look).

use super::error::{unwrap_once, Cause, RollbackDetails, SagaError, Settled};
use super::{Saga, COMPENSATE};
use crate::once::{Failure, OnceError};
use crate::types::{Disposition, StoredError};
use std::time::Duration;

/// The code of a rolled-back saga's stored error (409 Conflict: the saga could not go through).
pub(crate) const ROLLED_BACK_CODE: i32 = 409;

/// The longest cause message kept in a saga's own error (the server keeps at most 16 KiB).
const MAX_CAUSE_BYTES: usize = 4 * 1024;

/// How long the lease of a saga left for reconciliation still runs: it then lapses into UNKNOWN.
const LAPSE_AFTER: Duration = Duration::from_secs(1);

impl<E: Failure> Saga<'_, E> {
    /// Runs the completed steps' compensations in reverse order, each the child
    /// `compensate-STEP` once (a compensation done by an earlier run replays), then fails the saga
    /// for good.
    pub(super) async fn roll_back<T>(
        &mut self,
        failed_step: &str,
        cause: Cause<E>,
    ) -> Result<T, SagaError<E>> {
        while let Some(done) = self.completed.pop() {
            if self.lease.is_lost() {
                self.keep_alive = None;
                return Err(SagaError::LeaseLost);
            }
            let name = format!("{COMPENSATE}{}", done.step);
            // Checked when the step ran.
            let key = self
                .key()
                .child(&name)
                .map_err(|e| SagaError::InvalidStep {
                    step: name.clone(),
                    reason: e.to_string(),
                })?;
            let compensate = done.compensate;
            // Its arguments are an output, not an intent: the same output of another saga's step
            // is no duplicate for the intent guard.
            let outcome = self
                .child_once(&key, &done.output)
                .repeat_intent()
                .run(|_lease| async move { compensate().await.map_err(Settled) })
                .await;
            let Err(error) = outcome else { continue };
            let cause = match unwrap_once(error) {
                OnceError::Operation(e) if e.disposition() == Disposition::Retryable => {
                    self.release(&name, &e.to_string()).await;
                    return Err(SagaError::Retryable {
                        step: name,
                        error: e,
                    });
                }
                OnceError::Operation(e) => Cause::Failed(e),
                OnceError::Failed(stored) => Cause::Stored(stored),
                OnceError::NeedsReconciliation { .. } => Cause::Stored(StoredError {
                    message: "the compensation's outcome is unknown".into(),
                    ..StoredError::default()
                }),
                other => return Err(self.interrupted(&name, other).await),
            };
            self.lapse().await;
            return Err(SagaError::NeedsReconciliation {
                step: done.step,
                failed_step: failed_step.into(),
                cause,
            });
        }
        // Stop renewing before settling, so the keep-alive never sees our own settle.
        self.keep_alive = None;
        let cause_message = truncate(cause.to_string(), MAX_CAUSE_BYTES);
        let details = RollbackDetails {
            step: failed_step.into(),
            code: cause.code(),
            message: cause_message.clone(),
        };
        let error = StoredError {
            code: ROLLED_BACK_CODE,
            message: format!("rolled back: step {failed_step} failed: {cause_message}"),
            details: serde_json::to_vec(&details).unwrap_or_default(),
        };
        let token = self.lease.fencing_token();
        let failed = self
            .builder
            .client
            .fail(self.key(), token, error, Disposition::Final)
            .await;
        match failed {
            Ok(_) => Err(SagaError::RolledBack {
                step: failed_step.into(),
                cause,
            }),
            Err(e) if e.is_lease_lost() => Err(SagaError::LeaseLost),
            // The compensations are on record: the saga lapses, and a re-run replays them and
            // fails it again.
            Err(e) => Err(SagaError::Rpc(e)),
        }
    }

    /// Ends the saga here and releases it (Fail RETRYABLE), so that the next start acquires it
    /// at once and resumes. If the release fails, the lease lapses and the next start reconciles.
    pub(super) async fn release(&mut self, step: &str, cause: &str) {
        self.keep_alive = None;
        let error = StoredError {
            code: 0,
            message: truncate(format!("released at step {step}: {cause}"), MAX_CAUSE_BYTES),
            details: Vec::new(),
        };
        let token = self.lease.fencing_token();
        let released = self
            .builder
            .client
            .fail(self.key(), token, error, Disposition::Retryable)
            .await;
        if let Err(e) = released {
            tracing::warn!(saga = %self.key(), error = %e, "could not release the saga; its lease will lapse");
        }
    }

    /// A step that reached no recorded outcome: the saga is released for a re-run.
    pub(super) async fn interrupted(&mut self, step: &str, error: OnceError<E>) -> SagaError<E> {
        self.release(step, &error.to_string()).await;
        SagaError::Step {
            step: step.into(),
            error,
        }
    }

    /// Ends the saga here and lets its lease lapse within about a second, so that it turns
    /// UNKNOWN and is listed for operators.
    async fn lapse(&mut self) {
        self.keep_alive = None;
        let token = self.lease.fencing_token();
        let renewed = self
            .builder
            .client
            .renew(self.key(), token, Some(LAPSE_AFTER))
            .await;
        if let Err(e) = renewed {
            tracing::warn!(saga = %self.key(), error = %e, "could not shorten the saga's lease; it lapses at its end");
        }
    }
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncates_on_a_char_boundary() {
        assert_eq!(truncate("héllo".into(), 2), "h");
        assert_eq!(truncate("abc".into(), 10), "abc");
    }
}
