//! The intent guard and run budgets through the Rust client against the real server: a made-up
//! key is `OnceError::DuplicateIntent` (nothing runs), a deliberate repeat runs and names the
//! other key (`Done::intent_matches`), a new child beyond its parent's budget is
//! `Reason::BudgetExhausted` and the parent's `Record::budget` shows the use.

use oncekey_client::{
    Claim, Claimed, IntentGuard, OnceError, OperationKey, Reason, RecordStatus, RunBudget,
};
use oncekey_tests::client::*;
use oncekey_tests::Server;
use std::sync::atomic::{AtomicU32, Ordering};

fn output(id: &str) -> Output {
    Output {
        id: id.into(),
        token: 0,
    }
}

#[tokio::test]
async fn a_made_up_key_is_refused_and_nothing_runs() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let runs = &AtomicU32::new(0);
    let run = |id: &'static str| async move {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, TestError>(output(id))
    };
    let real = key("charge-order-7");
    client
        .once(&real, &args("order-7"))
        .intent_guard(IntentGuard::Refuse)
        .run(|_| run("first"))
        .await
        .unwrap();
    let made_up = key("call-8f2a");
    let refused = client
        .once(&made_up, &args("order-7"))
        .intent_guard(IntentGuard::Refuse)
        .run(|_| run("second"))
        .await
        .unwrap_err();
    let OnceError::DuplicateIntent { matches } = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(matches[0].key, real.key());
    assert_eq!(matches[0].status, Some(RecordStatus::Succeeded));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // Deliberate: it runs, naming the other key.
    let done = client
        .once(&made_up, &args("order-7"))
        .intent_guard(IntentGuard::Refuse)
        .repeat_intent()
        .run_detailed(|_| run("deliberate"))
        .await
        .unwrap();
    assert_eq!(done.intent_matches[0].key, real.key());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    // The raw Claim shows the refusal too.
    let third = Claim::new(&key("uuid-3"), &args("order-7"))
        .unwrap()
        .intent_guard(IntentGuard::Refuse);
    let answer = client.claim(&third).await.unwrap();
    assert!(
        matches!(answer, Claimed::DuplicateIntent { ref matches } if matches.len() == 2),
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_run_budget_refuses_a_new_child_beyond_it() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let run = key("agent-run");
    let budget = RunBudget::children(5).per_namespace(run.namespace(), 2);
    let parent = Claim::new(&run, &args("plan")).unwrap().budget(budget);
    assert!(matches!(
        client.claim(&parent).await.unwrap(),
        Claimed::Acquired { .. }
    ));
    for step in ["a", "b"] {
        let child: OperationKey = run.child(step).unwrap();
        client
            .once(&child, &args(step))
            .run(|_| async { Ok::<_, TestError>(output(step)) })
            .await
            .unwrap();
    }
    let third = run.child("c").unwrap();
    let err = client
        .once(&third, &args("c"))
        .run(|_| async { Ok::<_, TestError>(output("c")) })
        .await
        .unwrap_err();
    let OnceError::Rpc(rpc) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(rpc.reason(), Some(Reason::BudgetExhausted), "{err:?}");
    let record = client.lookup(&run).await.unwrap();
    let usage = record.unwrap().budget.unwrap();
    assert_eq!((usage.children, usage.refused), (2, 1));
    assert_eq!(usage.budget.max_children, 5);
}
