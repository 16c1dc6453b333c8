//! Suite cases for agent safety, run against every store: the intent guard refuses (or names)
//! a new key with another live key's arguments, exactly one of many racing keys wins; run
//! budgets are exact under concurrency, per namespace too, and duplicates of a child do not
//! count; the guard's index stays out of listings and shows in `duplicate_intents`.

use super::{args, T0};
use crate::{Clock, Engine, EngineError, Guarded};
use oncekey_ledger::{
    Budget, ClaimArgs, GuardMode, IntentRule, ListFilter, OpResult, ParentRef, RecordId, Status,
};
use oncekey_store::{Store, StoreError};
use std::sync::Arc;

fn tenant() -> String {
    format!("safety-{}", rand::random::<u64>())
}

fn refuse() -> IntentRule {
    IntentRule {
        mode: GuardMode::Refuse,
        window: 600_000,
        repeat: false,
    }
}

fn random_args() -> ClaimArgs {
    ClaimArgs {
        fingerprint: rand::random(),
        ..args(0)
    }
}

fn refused(g: &Guarded) -> Option<Vec<String>> {
    match g {
        Guarded::Refused { matches } => Some(matches.iter().map(|m| m.key.clone()).collect()),
        Guarded::Claimed { .. } => None,
    }
}

/// A second key with the same arguments is refused naming the first; a deliberate repeat goes
/// through naming it; a retry of the first key is never checked; `warn` names without refusing.
pub async fn intent_guard_refuses_and_names_a_made_up_key<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let t = tenant();
    let a = RecordId::new(t.as_str(), "payments.charge", "order-1");
    let b = RecordId::new(t.as_str(), "payments.charge", "tool-call-77");
    let args = random_args();
    let first = engine
        .claim_guarded(&a, &args, None, 0, Some(refuse()))
        .await
        .unwrap();
    let Guarded::Claimed { reply, matches } = first else {
        panic!("refused")
    };
    assert!(matches.is_empty() && reply.created);
    let second = engine
        .claim_guarded(&b, &args, None, 0, Some(refuse()))
        .await
        .unwrap();
    assert_eq!(refused(&second), Some(vec!["order-1".to_owned()]));
    let Guarded::Refused { matches } = &second else {
        unreachable!()
    };
    assert_eq!(matches[0].status, Some(Status::Processing));
    // Nothing was written for the refused key.
    assert!(matches!(
        engine.lookup(&b).await,
        Err(EngineError::NotFound)
    ));
    // A retry of the first key: its record exists, so it is not checked.
    let again = engine
        .claim_guarded(&a, &args, None, 0, Some(refuse()))
        .await
        .unwrap();
    assert!(refused(&again).is_none());
    // Deliberate: acquired, naming the other key (now SUCCEEDED).
    let token = engine.lookup(&a).await.unwrap().fencing_token;
    engine
        .complete(&a, token, &OpResult::default())
        .await
        .unwrap();
    let deliberate = IntentRule {
        repeat: true,
        ..refuse()
    };
    let third = engine
        .claim_guarded(&b, &args, None, 0, Some(deliberate))
        .await
        .unwrap();
    let Guarded::Claimed { reply, matches } = third else {
        panic!("refused")
    };
    assert_eq!(reply.outcome, oncekey_ledger::ClaimOutcome::Acquired);
    assert_eq!(
        (matches[0].key.as_str(), matches[0].status),
        ("order-1", Some(Status::Succeeded))
    );
    // Warn: a third key goes through, naming both.
    let c = RecordId::new(t.as_str(), "payments.charge", "uuid-3");
    let warn = IntentRule {
        mode: GuardMode::Warn,
        ..refuse()
    };
    let Guarded::Claimed { matches, .. } = engine
        .claim_guarded(&c, &args, None, 0, Some(warn))
        .await
        .unwrap()
    else {
        panic!("warn refused")
    };
    assert_eq!(matches.len(), 2);
    // Another namespace, or other arguments, are other intents.
    let other_ns = RecordId::new(t.as_str(), "email.send", "order-1b");
    assert!(refused(
        &engine
            .claim_guarded(&other_ns, &args, None, 0, Some(refuse()))
            .await
            .unwrap()
    )
    .is_none());
    let d = RecordId::new(t.as_str(), "payments.charge", "order-2");
    assert!(refused(
        &engine
            .claim_guarded(&d, &random_args(), None, 0, Some(refuse()))
            .await
            .unwrap()
    )
    .is_none());
    // The index is listed as duplicates, never as records.
    let all = engine
        .list(&t, &ListFilter::default(), None, 1000)
        .await
        .unwrap();
    assert!(all.records.iter().all(|r| !r.id.namespace.starts_with('~')));
    assert_eq!(all.records.len(), 5);
    let dups = engine.duplicate_intents(&t, None, None, 100).await.unwrap();
    assert_eq!(dups.intents.len(), 1, "{dups:?}");
    let keys: Vec<_> = dups.intents[0]
        .claims
        .iter()
        .map(|c| c.key.as_str())
        .collect();
    assert_eq!(keys, ["order-1", "tool-call-77", "uuid-3"]);
    assert!(engine
        .duplicate_intents(&t, Some("email.send"), None, 100)
        .await
        .unwrap()
        .intents
        .is_empty());
}

/// Many new keys with the same arguments at once under `refuse`: exactly one is claimed.
pub async fn intent_guard_one_of_racing_keys_wins<S: Store>(store: S) {
    let engine = Arc::new(Engine::new(store, Clock::System));
    let t = tenant();
    let args = random_args();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (engine, args) = (engine.clone(), args.clone());
            let id = RecordId::new(t.as_str(), "payments.charge", format!("k{i}"));
            tokio::spawn(async move {
                engine
                    .claim_guarded(&id, &args, None, 0, Some(refuse()))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut claimed = 0;
    for task in tasks {
        if refused(&task.await.unwrap()).is_none() {
            claimed += 1;
        }
    }
    assert_eq!(claimed, 1);
}

fn parent_args(budget: Budget) -> ClaimArgs {
    ClaimArgs {
        budget: Some(budget),
        ..random_args()
    }
}

fn child_args(parent: &RecordId) -> ClaimArgs {
    ClaimArgs {
        parent: Some(ParentRef {
            namespace: parent.namespace.clone(),
            key: parent.key.clone(),
        }),
        ..random_args()
    }
}

/// A Claim, sent again (as a client does, with the same key) while the store cannot say how its
/// conditional write ended: on a Cassandra cluster, three dozen lightweight transactions on one
/// parent's partition at once leave some of them in doubt.
async fn retrying<S: Store>(
    engine: &Engine<S>,
    id: &RecordId,
    args: &ClaimArgs,
) -> Result<Guarded, EngineError> {
    for _ in 0..50 {
        match engine.claim_guarded(id, args, None, 0, None).await {
            Err(EngineError::Store(StoreError::Unavailable(_)) | EngineError::Contention) => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await
            }
            answer => return answer,
        }
    }
    panic!("{id:?}: the store stayed in doubt")
}

/// Twelve new children at once under a budget of five: exactly five are created, seven refused,
/// and the parent shows it; duplicates of a created child are answered and not counted.
pub async fn budget_is_exact_under_concurrency<S: Store>(store: S) {
    let engine = Arc::new(Engine::new(store, Clock::System));
    let t = tenant();
    let parent = RecordId::new(t.as_str(), "agent.run", "run-1");
    engine
        .claim_guarded(
            &parent,
            &parent_args(Budget::new(5, Default::default())),
            None,
            0,
            None,
        )
        .await
        .unwrap();
    let child = child_args(&parent);
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let (engine, child) = (engine.clone(), child.clone());
            let id = RecordId::new(t.as_str(), "tasks.create", format!("c{i}"));
            // Each child three times at once: duplicates must not use up the budget.
            tokio::spawn(async move {
                let claims = (0..3).map(|_| retrying(&engine, &id, &child));
                futures_util::future::join_all(claims).await
            })
        })
        .collect();
    let (mut created, mut refused) = (0, 0);
    for task in tasks {
        let answers = task.await.unwrap();
        let ok = answers.iter().filter(|a| a.is_ok()).count();
        for a in &answers {
            if let Err(e) = a {
                assert!(matches!(e, EngineError::BudgetExhausted { .. }), "{e:?}");
            }
        }
        match ok {
            0 => refused += 1,
            _ => created += 1,
        }
    }
    assert_eq!((created, refused), (5, 7));
    let budget = engine.lookup(&parent).await.unwrap().budget.unwrap();
    assert_eq!(budget.children, 5);
    assert!(budget.refused >= 7, "{budget:?}");
    // A retry of a created child is answered from its record; a new one is refused.
    let c0 = RecordId::new(t.as_str(), "tasks.create", "c-new");
    match engine.claim_guarded(&c0, &child, None, 0, None).await {
        Err(EngineError::BudgetExhausted {
            parent: p,
            exhausted,
        }) => {
            assert_eq!(
                (p.key.as_str(), exhausted.limit.as_str(), exhausted.max),
                ("run-1", "max_children", 5)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        engine.lookup(&c0).await,
        Err(EngineError::NotFound)
    ));
}

/// A per-namespace cap counts only its namespace; the budget persists in the store.
pub async fn budget_caps_one_namespace<S: Store>(store: S) {
    let engine = Engine::new(store, Clock::manual(T0));
    let t = tenant();
    let parent = RecordId::new(t.as_str(), "agent.run", "run-2");
    let caps = [("email.send".to_owned(), 2)].into();
    engine
        .claim_guarded(&parent, &parent_args(Budget::new(0, caps)), None, 0, None)
        .await
        .unwrap();
    let child = child_args(&parent);
    for i in 0..2 {
        let id = RecordId::new(t.as_str(), "email.send", format!("mail-{i}"));
        engine
            .claim_guarded(&id, &child, None, 0, None)
            .await
            .unwrap();
    }
    let third = RecordId::new(t.as_str(), "email.send", "mail-2");
    let err = engine
        .claim_guarded(&third, &child, None, 0, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, EngineError::BudgetExhausted { ref exhausted, .. } if exhausted.limit == "email.send"),
        "{err:?}"
    );
    // Other namespaces are not capped.
    for i in 0..4 {
        let id = RecordId::new(t.as_str(), "tasks.create", format!("task-{i}"));
        engine
            .claim_guarded(&id, &child, None, 0, None)
            .await
            .unwrap();
    }
    let b = engine.lookup(&parent).await.unwrap().budget.unwrap();
    assert_eq!(
        (
            b.children,
            b.used_in("email.send"),
            b.used_in("tasks.create"),
            b.refused
        ),
        (6, 2, 4, 1)
    );
    // The parent settles; its budget stays and still counts.
    let token = engine.lookup(&parent).await.unwrap().fencing_token;
    engine
        .complete(&parent, token, &OpResult::default())
        .await
        .unwrap();
    assert_eq!(
        engine
            .lookup(&parent)
            .await
            .unwrap()
            .budget
            .unwrap()
            .children,
        6
    );
}
