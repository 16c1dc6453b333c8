//! The agent-safety parts of the API (docs/api.md, "Agent safety"): the intent guard a Claim may
//! ask for and the keys it names, and the run budget a parent operation carries. Plain types and
//! their wire forms; `Claim`, `Once` and `Claimed` use them.

use crate::api::v1;
use crate::types::{time_from_wire, RecordStatus};
use std::collections::BTreeMap;
use std::time::SystemTime;

/// What the intent guard does with a Claim of a new key whose arguments another live key of the
/// namespace was claimed with within the intent window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum IntentGuard {
    /// The namespace's setting (the server's `--intent-guard`, the tenant's limits line).
    #[default]
    Default,
    /// No check (only where the setting is off: a Claim never loosens it).
    Off,
    /// Acquired as usual; the other keys are named ([`crate::Claimed::Acquired`]'s
    /// `intent_matches`).
    Warn,
    /// Answered [`crate::Claimed::DuplicateIntent`] unless the Claim says the repeat is
    /// deliberate ([`crate::Claim::repeat_intent`]).
    Refuse,
}

impl IntentGuard {
    pub(crate) fn to_wire(self) -> i32 {
        (match self {
            IntentGuard::Default => v1::IntentGuard::Unspecified,
            IntentGuard::Off => v1::IntentGuard::Off,
            IntentGuard::Warn => v1::IntentGuard::Warn,
            IntentGuard::Refuse => v1::IntentGuard::Refuse,
        }) as i32
    }
}

/// Another key claimed with the same arguments in the same namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentMatch {
    /// The other key.
    pub key: String,
    /// Its record's status now (`None` when the server sent one this client does not know).
    pub status: Option<RecordStatus>,
    /// When it was claimed with these arguments.
    pub claimed_at: Option<SystemTime>,
    /// Whether the guard refused that Claim (no record was created for it).
    pub refused: bool,
}

impl IntentMatch {
    pub(crate) fn from_wire(m: v1::IntentMatch) -> Self {
        IntentMatch {
            key: m.key,
            status: RecordStatus::from_wire(m.status),
            claimed_at: m.claimed_at.map(time_from_wire),
            refused: m.refused,
        }
    }
}

/// At most how many child operations a parent operation (an agent run, a saga) may create.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunBudget {
    /// The most children in all (0: no total cap).
    pub max_children: u32,
    /// The most children per child namespace.
    pub max_per_namespace: BTreeMap<String, u32>,
}

impl RunBudget {
    /// At most `max_children` children in all.
    pub fn children(max_children: u32) -> Self {
        RunBudget {
            max_children,
            ..RunBudget::default()
        }
    }

    /// Also at most `max` children in `namespace`.
    pub fn per_namespace(mut self, namespace: impl Into<String>, max: u32) -> Self {
        self.max_per_namespace.insert(namespace.into(), max);
        self
    }

    pub(crate) fn to_wire(&self) -> v1::RunBudget {
        v1::RunBudget {
            max_children: self.max_children,
            max_per_namespace: self.max_per_namespace.clone().into_iter().collect(),
        }
    }
}

/// A parent operation's budget and what its children used of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BudgetUsage {
    /// The budget its first Claim set.
    pub budget: RunBudget,
    /// Children created under it.
    pub children: u32,
    /// Of those, per child namespace.
    pub children_per_namespace: BTreeMap<String, u32>,
    /// Claims of new children it refused.
    pub refused: u64,
}

impl BudgetUsage {
    pub(crate) fn from_wire(b: v1::BudgetUsage) -> Self {
        let budget = b.budget.unwrap_or_default();
        BudgetUsage {
            budget: RunBudget {
                max_children: budget.max_children,
                max_per_namespace: budget.max_per_namespace.into_iter().collect(),
            },
            children: b.children,
            children_per_namespace: b.children_per_namespace.into_iter().collect(),
            refused: b.refused,
        }
    }
}
