//! Agent safety around a Claim (docs/api.md, "Agent safety"): the intent guard, which refuses
//! (or names) a new key whose arguments another live key of the namespace was claimed with
//! within the window, and run budgets, which cap how many children a parent operation creates.
//!
//! Both act only on a Claim that would create a record, and cost nothing elsewhere: a Claim
//! without a guard or a parent goes straight to `claim_bounded`. The ledger decides (`intent`,
//! `budget`); this module reads what the decisions need and writes them with the same
//! compare-and-set loop as every transition, so both hold on every store, exactly under
//! concurrency: the guard's index entry is written before the record (two new keys racing
//! find each other there), and a child's slot is reserved on its parent before the child is
//! created and given back when the Claim did not create it.

use super::rounds::{nothing, Basis};
use super::{ClaimReply, Engine, EngineError};
use oncekey_ledger::{
    self as ledger, ClaimArgs, ClaimOutcome, IntentMatch, IntentRule, Millis, ParentRef, RecordId,
    Reservation, Status, Verdict,
};
use oncekey_store::Store;
use std::collections::HashMap;

/// What a guarded Claim came to.
// Returned once and taken apart at once, like `ClaimReply`: boxing it would add an allocation to
// every guarded Claim.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Guarded {
    /// The Claim ran; `matches` are the other keys the intent guard let it through with.
    Claimed {
        /// The Claim's answer.
        reply: ClaimReply,
        /// The other live keys claimed with the same arguments (warned or deliberate).
        matches: Vec<IntentMatch>,
    },
    /// The intent guard refused it (DUPLICATE_INTENT): nothing was created.
    Refused {
        /// The other live keys claimed with the same arguments.
        matches: Vec<IntentMatch>,
    },
}

impl<S: Store> Engine<S> {
    /// A Claim under the intent guard `intent` (none: off) and its parent's run budget, if any.
    /// `EngineError::BudgetExhausted` when the Claim would create a child beyond its parent's
    /// budget (nothing is created; the parent counts the refusal).
    pub async fn claim_guarded(
        &self,
        id: &RecordId,
        args: &ClaimArgs,
        wait: Option<Millis>,
        max_held: u32,
        intent: Option<IntentRule>,
    ) -> Result<Guarded, EngineError> {
        let intent = intent.filter(|r| r.mode != ledger::GuardMode::Off);
        // A child counts only against a parent that has a budget: one read tells (the common
        // child, of a parent without one, costs that read and no more).
        let parent = match &args.parent {
            Some(parent) => self.budgeted_parent(id, parent).await?,
            None => None,
        };
        // Only a Claim that would create the record is guarded or counted.
        if (intent.is_none() && parent.is_none()) || self.live(id).await?.is_some() {
            let reply = self.claim_bounded(id, args, wait, max_held).await?;
            return Ok(Guarded::Claimed {
                reply,
                matches: Vec::new(),
            });
        }
        let matches = match intent {
            None => Vec::new(),
            Some(rule) => match self.admit_intent(id, &args.fingerprint, &rule).await? {
                Verdict::Clear => Vec::new(),
                Verdict::Warned(matches) => {
                    let action = if rule.repeat && rule.mode == ledger::GuardMode::Refuse {
                        "repeated"
                    } else {
                        "warned"
                    };
                    self.core.metrics.intent_duplicate(action);
                    matches
                }
                Verdict::Refused(matches) => {
                    self.core.metrics.intent_duplicate("refused");
                    self.core.metrics.claim(
                        &id.tenant,
                        &id.namespace,
                        ClaimOutcome::DuplicateIntent,
                    );
                    return Ok(Guarded::Refused { matches });
                }
            },
        };
        let reserved = match parent {
            Some((parent_id, parent)) => self.reserve_child(id, parent_id, parent).await?,
            None => None,
        };
        let claimed = self.claim_bounded(id, args, wait, max_held).await;
        // A Claim that failed may have created nothing: then its slot goes back. (One answered
        // from a record a duplicate created keeps it: that child is counted once, by name.)
        if let (Some(parent), Err(_)) = (reserved, &claimed) {
            if matches!(self.live(id).await, Ok(None)) {
                self.give_back(&parent, id).await;
            }
        }
        Ok(Guarded::Claimed {
            reply: claimed?,
            matches,
        })
    }

    /// What a dry run of a guarded Claim would get from the intent guard: the other keys when it
    /// would refuse (nothing is written). `None` when it would not.
    pub async fn intent_dry_run(
        &self,
        id: &RecordId,
        fingerprint: &[u8; 32],
        rule: Option<IntentRule>,
    ) -> Result<Option<Vec<IntentMatch>>, EngineError> {
        let Some(rule) = rule.filter(|r| r.mode == ledger::GuardMode::Refuse && !r.repeat) else {
            return Ok(None);
        };
        if self.live(id).await?.is_some() {
            return Ok(None);
        }
        let entry_id = ledger::intent_entry_id(&id.tenant, &id.namespace, fingerprint);
        let entry = self.core.get(&entry_id).await?;
        let statuses = self.statuses(id, entry.as_ref(), &rule).await?;
        let now = self.core.clock.now();
        let (_, verdict) =
            ledger::admit_intent(id, fingerprint, entry.as_ref(), &rule, &statuses, now);
        Ok(match verdict {
            Verdict::Refused(matches) => Some(matches),
            _ => None,
        })
    }

    /// The live record of `id` as callers see it (a tombstone counts as absent).
    async fn live(&self, id: &RecordId) -> Result<Option<ledger::Record>, EngineError> {
        let read = self.core.read_brief(id).await?.into_record();
        Ok(read.filter(|r| !r.status.is_tombstone()))
    }

    /// Decides the intent guard for a Claim of the new key `id` and writes the index entry.
    async fn admit_intent(
        &self,
        id: &RecordId,
        fingerprint: &[u8; 32],
        rule: &IntentRule,
    ) -> Result<Verdict, EngineError> {
        let entry_id = ledger::intent_entry_id(&id.tenant, &id.namespace, fingerprint);
        let entry = self.core.get(&entry_id).await?;
        // The statuses of the keys the entry names now; a key added meanwhile counts as live.
        let statuses = self.statuses(id, entry.as_ref(), rule).await?;
        let ran = self
            .core
            .run(&entry_id, Basis::Stored(entry), |current, now| {
                let (transition, verdict) =
                    ledger::admit_intent(id, fingerprint, current, rule, &statuses, now);
                Ok((transition, verdict))
            })
            .await?;
        Ok(ran.extra)
    }

    /// The status callers see now of the other keys of `entry` a Claim of `id` under `rule`
    /// names (`ledger::intent_keys_to_read`; `None`: no live record).
    async fn statuses(
        &self,
        id: &RecordId,
        entry: Option<&ledger::Record>,
        rule: &IntentRule,
    ) -> Result<HashMap<String, Option<Status>>, EngineError> {
        let mut statuses = HashMap::new();
        let Some(entry) = entry else {
            return Ok(statuses);
        };
        let now = self.core.clock.now();
        for key in ledger::intent_keys_to_read(entry, &id.key, rule, now) {
            let other = RecordId::new(id.tenant.clone(), id.namespace.clone(), key.clone());
            let record = self.live(&other).await?;
            statuses.insert(key, record.map(|r| r.reported_status(now)));
        }
        Ok(statuses)
    }

    /// The parent of the child `id`, when it has a budget that limits something.
    async fn budgeted_parent<'p>(
        &self,
        id: &RecordId,
        parent: &'p ParentRef,
    ) -> Result<Option<(RecordId, &'p ParentRef)>, EngineError> {
        let parent_id = RecordId::new(
            id.tenant.clone(),
            parent.namespace.clone(),
            parent.key.clone(),
        );
        let basis = self.core.read_brief(&parent_id).await?;
        let limits = basis
            .into_record()
            .and_then(|p| p.budget)
            .is_some_and(|b| b.limits());
        Ok(limits.then_some((parent_id, parent)))
    }

    /// Reserves a slot on the budget of `parent` (whose id is `parent_id`) for the new child
    /// `id`: `Some(parent_id)` when one was reserved (to give back if the Claim fails without
    /// creating the child), `None` when the parent limits nothing (any more) or counted the
    /// child already, `BudgetExhausted` when it is spent.
    async fn reserve_child(
        &self,
        id: &RecordId,
        parent_id: RecordId,
        parent: &ParentRef,
    ) -> Result<Option<RecordId>, EngineError> {
        let basis = self.core.read(&parent_id).await?;
        let ran = self
            .core
            .run(&parent_id, basis, |current, now| {
                Ok(
                    match current.map(|p| ledger::reserve(p, &id.namespace, &id.key, now)) {
                        None | Some(Reservation::Unlimited | Reservation::Counted) => {
                            (nothing(), None)
                        }
                        Some(Reservation::Reserved(t)) => (t, Some(Ok(()))),
                        Some(Reservation::Refused(t, exhausted)) => (t, Some(Err(exhausted))),
                    },
                )
            })
            .await?;
        match ran.extra {
            None => Ok(None),
            Some(Ok(())) => Ok(Some(parent_id)),
            Some(Err(exhausted)) => {
                self.core.metrics.budget_refused();
                Err(EngineError::BudgetExhausted {
                    parent: parent.clone(),
                    exhausted,
                })
            }
        }
    }

    /// Gives back a slot reserved on `parent` for a child in `namespace` the Claim did not
    /// create (its Claim failed). A failure is logged: the budget then stays one short, never
    /// exceeded.
    async fn give_back(&self, parent: &RecordId, child: &RecordId) {
        let given = async {
            let basis = self.core.read(parent).await?;
            self.core
                .run(parent, basis, |current, now| {
                    let back = current
                        .and_then(|p| ledger::give_back(p, &child.namespace, &child.key, now));
                    Ok((back.unwrap_or_else(nothing), ()))
                })
                .await
        };
        if let Err(e) = given.await {
            tracing::warn!(error = %e, "a run budget's reserved slot could not be given back");
        }
    }
}
