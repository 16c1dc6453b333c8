//! Run budgets (docs/api.md, "Run budgets"): a parent operation's cap on how many child
//! operations may be created under it, in all and per child namespace, and the count of what
//! its children used.
//!
//! A child's slot is reserved on the parent's record (`reserve`, written back by compare-and-set)
//! before the child is created, under the child's name: a duplicate of the same child finds its
//! name counted and takes no second slot, so racing duplicates never make another child's Claim
//! look over budget. A slot is given back (`give_back`) only when the child was not created at
//! all. So the count is exact under concurrency on every store.
//!
//! Pure: no I/O, no clock beyond the `now` passed in.

use super::{next_version, Millis, Record, Transition};
use std::collections::{BTreeMap, BTreeSet};

/// Most per-namespace caps a budget may name.
pub const MAX_BUDGET_NAMESPACES: usize = 64;
/// The largest cap (in all, or per namespace) a budget may set: each counted child's name is
/// kept on the parent's record.
pub const MAX_BUDGET_CHILDREN: u32 = 1000;

/// A parent's budget and what its children used of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Budget {
    /// The most children in all (0: no total cap).
    pub max_children: u32,
    /// The most children per child namespace.
    pub max_per_namespace: BTreeMap<String, u32>,
    /// Children created (slots reserved) in all.
    pub children: u32,
    /// Of those, per child namespace.
    pub children_per_namespace: BTreeMap<String, u32>,
    /// Claims of new children refused for the budget.
    pub refused: u64,
    /// The counted children, as `"namespace key"` (at most `MAX_BUDGET_CHILDREN` + 64 × that:
    /// only those a cap counts).
    pub counted: BTreeSet<String>,
}

/// Which cap a refused child hit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exhausted {
    /// `max_children`, or the child namespace whose cap it hit.
    pub limit: String,
    /// How many children the cap counted already.
    pub spent: u32,
    /// The cap.
    pub max: u32,
}

impl Budget {
    /// A budget with nothing used yet.
    pub fn new(max_children: u32, max_per_namespace: BTreeMap<String, u32>) -> Self {
        Self {
            max_children,
            max_per_namespace,
            ..Self::default()
        }
    }

    /// Whether it limits anything at all.
    pub fn limits(&self) -> bool {
        self.max_children > 0 || !self.max_per_namespace.is_empty()
    }

    /// The cap one more child in `namespace` would exceed, if any.
    pub fn exhausted(&self, namespace: &str) -> Option<Exhausted> {
        if self.max_children > 0 && self.children >= self.max_children {
            return Some(Exhausted {
                limit: "max_children".into(),
                spent: self.children,
                max: self.max_children,
            });
        }
        let max = *self.max_per_namespace.get(namespace)?;
        let spent = self.used_in(namespace);
        (spent >= max).then(|| Exhausted {
            limit: namespace.into(),
            spent,
            max,
        })
    }

    /// Children created in `namespace`.
    pub fn used_in(&self, namespace: &str) -> u32 {
        self.children_per_namespace
            .get(namespace)
            .copied()
            .unwrap_or(0)
    }
}

/// What reserving a child's slot on `parent` comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reservation {
    /// The parent has no budget (or a tombstone stands there): the child is not limited.
    Unlimited,
    /// The child was counted already (a duplicate of its Claim reserved its slot): go on.
    Counted,
    /// Reserved: write this transition (the parent with the slot counted), then create the child.
    Reserved(Transition),
    /// Over budget: write this transition (the refusal counted) and refuse the child.
    Refused(Transition, Exhausted),
}

/// The name a child is counted under.
fn child_name(namespace: &str, key: &str) -> String {
    format!("{namespace} {key}")
}

/// Reserves a slot for the new child `key` in `namespace` on `parent` at `now`.
pub fn reserve(parent: &Record, namespace: &str, key: &str, now: Millis) -> Reservation {
    let Some(budget) = parent.budget.as_ref().filter(|b| b.limits()) else {
        return Reservation::Unlimited;
    };
    if parent.status.is_tombstone() {
        return Reservation::Unlimited;
    }
    let name = child_name(namespace, key);
    if budget.counted.contains(&name) {
        return Reservation::Counted;
    }
    let mut next = next_version(parent, now);
    let counted = next.budget.as_mut().expect("checked above");
    if let Some(exhausted) = budget.exhausted(namespace) {
        counted.refused += 1;
        return Reservation::Refused(Transition::replace(parent, next, true), exhausted);
    }
    counted.children += 1;
    counted.counted.insert(name);
    *counted
        .children_per_namespace
        .entry(namespace.to_owned())
        .or_insert(0) += 1;
    Reservation::Reserved(Transition::replace(parent, next, true))
}

/// Gives back the slot reserved for the child `key` in `namespace`, which was not created (its
/// Claim failed); `None` when there is nothing to give back.
pub fn give_back(parent: &Record, namespace: &str, key: &str, now: Millis) -> Option<Transition> {
    let budget = parent.budget.as_ref()?;
    let name = child_name(namespace, key);
    if !budget.counted.contains(&name) || parent.status.is_tombstone() {
        return None;
    }
    let mut next = next_version(parent, now);
    let counted = next.budget.as_mut()?;
    counted.counted.remove(&name);
    counted.children = counted.children.saturating_sub(1);
    if let Some(n) = counted.children_per_namespace.get_mut(namespace) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            counted.children_per_namespace.remove(namespace);
        }
    }
    Some(Transition::replace(parent, next, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ClaimArgs, RecordId, Semantics};

    fn parent(budget: Budget) -> Record {
        let id = RecordId::new("t", "agent.run", "r1");
        let mut args = ClaimArgs::for_test([1; 32], Semantics::AtMostOnce, 30_000, 60_000, "agent");
        args.budget = Some(budget);
        crate::claim(&id, None, &args, 1_000)
            .unwrap()
            .transition
            .record
            .unwrap()
    }

    fn written(reservation: Reservation) -> Record {
        match reservation {
            Reservation::Reserved(t) | Reservation::Refused(t, _) => t.record.unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn total_cap_counts_and_refuses() {
        let mut p = parent(Budget::new(2, BTreeMap::new()));
        for key in ["a", "b"] {
            let r = reserve(&p, "email.send", key, 2_000);
            assert!(matches!(r, Reservation::Reserved(_)));
            p = written(r);
        }
        // A duplicate of a counted child takes no slot.
        assert_eq!(reserve(&p, "email.send", "a", 2_500), Reservation::Counted);
        match reserve(&p, "email.send", "c", 3_000) {
            Reservation::Refused(t, e) => {
                assert_eq!(e.limit, "max_children");
                assert_eq!((e.spent, e.max), (2, 2));
                let b = t.record.unwrap().budget.unwrap();
                assert_eq!((b.children, b.refused), (2, 1));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn namespace_cap_is_separate_and_give_back_returns_the_slot() {
        let caps = BTreeMap::from([("email.send".to_owned(), 1)]);
        let mut p = parent(Budget::new(0, caps));
        p = written(reserve(&p, "email.send", "m1", 2_000));
        match reserve(&p, "email.send", "m2", 2_000) {
            Reservation::Refused(_, e) => assert_eq!((e.limit.as_str(), e.max), ("email.send", 1)),
            other => panic!("{other:?}"),
        }
        p = written(reserve(&p, "tasks.create", "t1", 2_000));
        assert_eq!(p.budget.as_ref().unwrap().children, 2);
        assert!(
            give_back(&p, "email.send", "m2", 2_500).is_none(),
            "never counted"
        );
        p = give_back(&p, "email.send", "m1", 2_500)
            .unwrap()
            .record
            .unwrap();
        let b = p.budget.as_ref().unwrap();
        assert_eq!((b.children, b.used_in("email.send")), (1, 0));
        assert!(matches!(
            reserve(&p, "email.send", "m2", 3_000),
            Reservation::Reserved(_)
        ));
    }

    #[test]
    fn no_budget_is_unlimited() {
        let p = parent(Budget::default());
        assert_eq!(reserve(&p, "x", "k", 2_000), Reservation::Unlimited);
    }
}
