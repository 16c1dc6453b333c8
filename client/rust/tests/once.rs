//! The one-call API against the real server, in every outcome: acquired and completed, replayed,
//! failed (final, retryable, abandoned), in progress (waited for, or timed out), needing
//! reconciliation (and reconciled), key reuse, parents of child keys, undecodable results.

use oncekey_client::{
    Claim, Claimed, Disposition, OnceError, OperationKey, Reason, RecordStatus, Semantics,
    StoredResult,
};
use oncekey_tests::client::*;
use oncekey_tests::Server;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

#[tokio::test]
async fn acquired_runs_once_then_replays_the_stored_result() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let runs = &AtomicU32::new(0);
    let key = key("replay");

    let first = client
        .once(&key, &args("book"))
        .run_detailed(|lease| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, TestError>(Output {
                id: "out-1".into(),
                token: lease.fencing_token(),
            })
        })
        .await
        .unwrap();
    assert!(!first.replayed);
    assert_eq!(first.value.token, 1);
    assert_eq!(first.record.status, RecordStatus::Succeeded);

    let again: Output = client
        .once(&key, &args("book"))
        .run(|_| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, TestError>(Output {
                id: "out-2".into(),
                token: 0,
            })
        })
        .await
        .unwrap();
    assert_eq!(again, first.value);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the closure ran once");

    let record = client.lookup(&key).await.unwrap().unwrap();
    let result = record.result.unwrap();
    assert_eq!(result.content_type, "application/json");
    assert_eq!(result.decode_json::<Output>().unwrap(), first.value);
    assert_eq!(record.dedup_hits, 1);
}

#[tokio::test]
async fn a_final_failure_is_recorded_and_replayed() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("final");
    let err = client
        .once(&key, &args("x"))
        .run(|_| async { Err::<Output, _>(TestError(Disposition::Final)) })
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        OnceError::Operation(TestError(Disposition::Final))
    ));

    let err = client
        .once(&key, &args("x"))
        .run(|_| async {
            Ok::<_, TestError>(Output {
                id: "never".into(),
                token: 0,
            })
        })
        .await
        .unwrap_err();
    match err {
        OnceError::Failed(stored) => {
            assert_eq!(stored.code, 42);
            assert!(stored.message.contains("test failure"), "{stored:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_retryable_failure_lets_the_next_run_try_again() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("retryable");
    let err = client
        .once(&key, &args("x"))
        .run(|_| async { Err::<Output, _>(TestError(Disposition::Retryable)) })
        .await
        .unwrap_err();
    assert!(matches!(err, OnceError::Operation(_)));

    let done = client
        .once(&key, &args("x"))
        .run_detailed(|lease| async move {
            assert_eq!(lease.attempt(), 2);
            Ok::<_, TestError>(Output {
                id: "second".into(),
                token: lease.fencing_token(),
            })
        })
        .await
        .unwrap();
    assert_eq!((done.value.token, done.replayed), (2, false));
}

#[tokio::test]
async fn abandon_forgets_the_key_even_for_other_arguments() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("abandon");
    let err = client
        .once(&key, &args("first"))
        .run(|_| async { Err::<Output, _>(TestError(Disposition::Abandon)) })
        .await
        .unwrap_err();
    assert!(matches!(err, OnceError::Operation(_)));
    assert!(client.lookup(&key).await.unwrap().is_none());

    let out: Output = client
        .once(&key, &args("other arguments"))
        .run(|lease| async move {
            Ok::<_, TestError>(Output {
                id: "after-abandon".into(),
                token: lease.fencing_token(),
            })
        })
        .await
        .unwrap();
    assert_eq!(out.id, "after-abandon");
}

#[tokio::test]
async fn in_progress_waits_for_the_holder_and_returns_its_result() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("in-flight");
    let Claimed::Acquired { lease, .. } = client
        .claim(&Claim::new(&key, &args("x")).unwrap())
        .await
        .unwrap()
    else {
        panic!("acquired");
    };

    let waiter = {
        let client = client.clone();
        let key = key.clone();
        tokio::spawn(async move {
            client
                .once(&key, &args("x"))
                .wait_timeout(Duration::from_secs(20))
                .run_detailed(|_| async {
                    Ok::<_, TestError>(Output {
                        id: "duplicate".into(),
                        token: 0,
                    })
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "the duplicate waits");
    let stored = Output {
        id: "holder".into(),
        token: lease.token,
    };
    client
        .complete(&key, lease.token, StoredResult::json(&stored).unwrap())
        .await
        .unwrap();
    let done = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken when the holder completes")
        .unwrap()
        .unwrap();
    assert!(done.replayed);
    assert_eq!(done.value, stored);
}

#[tokio::test]
async fn in_progress_past_the_wait_timeout_is_reported() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("stuck");
    client
        .claim(&Claim::new(&key, &args("x")).unwrap())
        .await
        .unwrap();
    let err = client
        .once(&key, &args("x"))
        .wait_timeout(Duration::from_millis(600))
        .run(|_| async {
            Ok::<_, TestError>(Output {
                id: "no".into(),
                token: 0,
            })
        })
        .await
        .unwrap_err();
    match err {
        OnceError::InProgress { record } => assert_eq!(record.status, RecordStatus::Processing),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unknown_outcome_needs_reconciliation_and_can_be_reconciled() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("at-most-once");
    // A holder that vanishes: acquires with a 1 s lease and never renews.
    let claim = Claim::new(&key, &args("x"))
        .unwrap()
        .semantics(Semantics::AtMostOnce)
        .lease_ttl(Duration::from_secs(1));
    assert!(matches!(
        client.claim(&claim).await.unwrap(),
        Claimed::Acquired { .. }
    ));

    let runs = AtomicU32::new(0);
    // While the holder's lease lasts this waits; once it runs out the outcome is unknown.
    let err = client
        .once(&key, &args("x"))
        .at_most_once()
        .run(|_| async {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, TestError>(Output {
                id: "again".into(),
                token: 0,
            })
        })
        .await
        .unwrap_err();
    match err {
        OnceError::NeedsReconciliation { record } => {
            assert_eq!(record.status, RecordStatus::Unknown)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "never run twice");

    // The reconciler found that the effect did happen: record it.
    let done = client
        .once(&key, &args("x"))
        .at_most_once()
        .reconcile(|lease| async move {
            Ok::<_, TestError>(Output {
                id: "found-outside".into(),
                token: lease.fencing_token(),
            })
        })
        .await
        .unwrap();
    assert_eq!((done.value.token, done.replayed), (2, false));

    let replay: Output = client
        .once(&key, &args("x"))
        .run(|_| async {
            Ok::<_, TestError>(Output {
                id: "no".into(),
                token: 0,
            })
        })
        .await
        .unwrap();
    assert_eq!(replay.id, "found-outside");
}

#[tokio::test]
async fn other_arguments_for_a_key_are_a_typed_key_reused_error() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("reused");
    client
        .once(&key, &args("a"))
        .run(|_| async {
            Ok::<_, TestError>(Output {
                id: "a".into(),
                token: 1,
            })
        })
        .await
        .unwrap();
    let err = client
        .once(&key, &args("b"))
        .run(|_| async {
            Ok::<_, TestError>(Output {
                id: "b".into(),
                token: 1,
            })
        })
        .await
        .unwrap_err();
    match err {
        OnceError::Rpc(e) => {
            assert_eq!(e.code(), tonic::Code::FailedPrecondition);
            assert_eq!(e.reason(), Some(Reason::KeyReused));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        client.stats().retries,
        0,
        "FAILED_PRECONDITION is never retried"
    );
}

#[tokio::test]
async fn child_keys_record_their_parent() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let workflow = OperationKey::new("workflows.ticket", ["ticket-481", "v1"]).unwrap();
    let step = workflow.child_in(NS, "create-task").unwrap();
    client
        .once(&step, &args("task"))
        .run(|_| async {
            Ok::<_, TestError>(Output {
                id: "task-1".into(),
                token: 1,
            })
        })
        .await
        .unwrap();
    let record = client.lookup(&step).await.unwrap().unwrap();
    assert_eq!(record.key, "ticket-481:v1/create-task");
    assert_eq!(
        record.parent,
        Some(("workflows.ticket".to_string(), "ticket-481:v1".to_string()))
    );
}

#[tokio::test]
async fn a_stored_result_of_another_shape_is_a_decode_error() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("shape");
    client
        .once(&key, &args("x"))
        .run(|_| async { Ok::<_, TestError>(vec![1, 2, 3]) })
        .await
        .unwrap();
    let err = client
        .once(&key, &args("x"))
        .run(|_| async {
            Ok::<_, TestError>(Output {
                id: "x".into(),
                token: 0,
            })
        })
        .await
        .unwrap_err();
    match err {
        OnceError::Decode { result, .. } => assert_eq!(result.body, b"[1,2,3]"),
        other => panic!("{other:?}"),
    }
}

/// A lease that had run out before its Claim's answer arrived (here: a server whose clock runs
/// 2 s behind grants 1 s leases that end before "now" on this machine, as a Claim answered after
/// its lease would) must not run the closure — another holder may be taking it over. Each such
/// lease is released as RETRY, and once the wait is over the call says LeaseLost with no
/// operation error: nothing ran.
#[tokio::test]
async fn a_lease_lapsed_before_its_answer_arrived_runs_nothing() {
    let server = Server::start_with(&[], &[("ONCEKEY_TEST_CLOCK_SKEW_MS", "-2000")]);
    let client = client(&server.grpc).await;
    let key = key("late");
    let runs = &AtomicU32::new(0);
    let err = client
        .once(&key, &args("x"))
        .lease_ttl(Duration::from_secs(1))
        .wait_timeout(Duration::from_millis(500))
        .run(|_| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, TestError>(Output {
                id: "ran".into(),
                token: 0,
            })
        })
        .await
        .unwrap_err();
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "nothing may run under a lapsed lease"
    );
    match err {
        OnceError::LeaseLost {
            token,
            operation: None,
        } => assert!(token >= 1, "{token}"),
        other => panic!("{other:?}"),
    }
    let record = client.lookup(&key).await.unwrap().unwrap();
    assert_eq!(
        record.status,
        RecordStatus::Retry,
        "released, not left held"
    );
    assert!(record.attempt >= 1);
}
