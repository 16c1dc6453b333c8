//! Wire ↔ ledger for agent safety (docs/api.md, "Agent safety"): a Claim's run budget and
//! intent-guard fields, validated with errors naming the field, and the budget and intent
//! matches on the wire.

use super::convert::{bounded, namespace, timestamp, wire_status};
use super::error::ApiError;
use super::LedgerService;
use crate::ledger::{
    Budget, GuardMode, IntentMatch, IntentRule, Millis, MAX_BUDGET_CHILDREN, MAX_BUDGET_NAMESPACES,
    MAX_INTENT_WINDOW, MIN_INTENT_WINDOW,
};
use crate::store::Store;
use oncekey_api::v1;

/// The run budget a Claim sets (`None`: none, or one that limits nothing).
pub fn budget(req: &v1::ClaimRequest) -> Result<Option<Budget>, ApiError> {
    let Some(b) = &req.budget else {
        return Ok(None);
    };
    if b.max_per_namespace.len() > MAX_BUDGET_NAMESPACES {
        return Err(ApiError::too_large(
            "budget.max_per_namespace",
            format!("at most {MAX_BUDGET_NAMESPACES} namespaces"),
        ));
    }
    if b.max_children > MAX_BUDGET_CHILDREN {
        return Err(ApiError::invalid(
            "budget.max_children",
            format!("must be at most {MAX_BUDGET_CHILDREN} (0 = no total cap)"),
        ));
    }
    for (ns, max) in &b.max_per_namespace {
        namespace("budget.max_per_namespace", ns)?;
        if *max == 0 || *max > MAX_BUDGET_CHILDREN {
            return Err(ApiError::invalid(
                "budget.max_per_namespace",
                format!("the cap of {ns} must be 1 ..= {MAX_BUDGET_CHILDREN}"),
            ));
        }
    }
    let budget = Budget::new(
        b.max_children,
        b.max_per_namespace.clone().into_iter().collect(),
    );
    Ok(budget.limits().then_some(budget))
}

/// A Claim's own intent guard fields: its mode (`None`: unspecified) and window.
pub fn intent(req: &v1::ClaimRequest) -> Result<(Option<GuardMode>, Option<Millis>), ApiError> {
    let mode = match v1::IntentGuard::try_from(req.intent_guard) {
        Ok(v1::IntentGuard::Unspecified) => None,
        Ok(v1::IntentGuard::Off) => Some(GuardMode::Off),
        Ok(v1::IntentGuard::Warn) => Some(GuardMode::Warn),
        Ok(v1::IntentGuard::Refuse) => Some(GuardMode::Refuse),
        Err(_) => return Err(ApiError::invalid("intent_guard", "unknown value")),
    };
    let window = match &req.intent_window {
        None => None,
        Some(d) => Some(bounded(
            "intent_window",
            Some(d),
            0,
            MIN_INTENT_WINDOW,
            MAX_INTENT_WINDOW,
        )?),
    };
    Ok((mode, window))
}

/// An intent match on the wire.
pub fn intent_match(m: IntentMatch) -> v1::IntentMatch {
    v1::IntentMatch {
        key: m.key,
        status: m.status.map_or(v1::RecordStatus::Unspecified, wire_status) as i32,
        claimed_at: Some(timestamp(m.at)),
        refused: m.refused,
    }
}

/// A parent's budget and its use on the wire.
pub fn budget_usage(b: Budget) -> v1::BudgetUsage {
    v1::BudgetUsage {
        budget: Some(v1::RunBudget {
            max_children: b.max_children,
            max_per_namespace: b.max_per_namespace.into_iter().collect(),
        }),
        children: b.children,
        children_per_namespace: b.children_per_namespace.into_iter().collect(),
        refused: b.refused,
    }
}

/// The answer to a Claim the intent guard refused: nothing was written, so no record.
pub(super) fn duplicate_intent(matches: Vec<IntentMatch>) -> v1::ClaimResponse {
    v1::ClaimResponse {
        outcome: v1::ClaimOutcome::DuplicateIntent as i32,
        record: None,
        lease: None,
        retry_after: None,
        intent_matches: matches.into_iter().map(intent_match).collect(),
    }
}

impl<S: Store> LedgerService<S> {
    /// The intent guard a Claim runs under: its tenant's rules for the namespace, made stricter
    /// by the Claim's own fields (`None`: unguarded).
    pub(super) fn intent_rule(
        &self,
        tenant: &str,
        req: &v1::ClaimRequest,
    ) -> Result<Option<IntentRule>, ApiError> {
        let (mode, window) = intent(req)?;
        let policy = self.admission.policy();
        let rules = policy.intent_rules(tenant);
        Ok(rules.rule(&req.namespace, mode, window, req.repeat_intent))
    }
}
