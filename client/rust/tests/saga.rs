//! Sagas against the real server, in one process: the happy path and its replay, a step failing
//! for good (compensations in reverse, the saga FAILED 409, replayed), a compensation failing for
//! good (the saga left UNKNOWN for operators), a retryable failure, and a saga whose run went away
//! resumed from the ledger. The kill -9 trials are in `saga_kill.rs`.

use oncekey_client::{
    Cause, Client, Disposition, ListRecords, OperationKey, RecordStatus, SagaError, SagaStart,
};
use oncekey_tests::client::*;
use oncekey_tests::Server;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// What the steps and compensations did, in order.
type Log = Mutex<Vec<String>>;

fn push(log: &Log, line: String) {
    log.lock().unwrap().push(line);
}

fn lines(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

/// Which effect or compensation fails, and how.
#[derive(Default, Clone, Copy)]
struct Plan {
    fail_step: Option<(&'static str, Disposition)>,
    fail_undo: Option<(&'static str, Disposition)>,
}

/// The saga under test: steps `a`, `b`, `c` (each logs `do:STEP`, or `fail:STEP` when the plan
/// fails it), compensations logging `undo:STEP:OUTPUT_ID`; finishes with `"done"`.
async fn run(
    client: &Client,
    key: &OperationKey,
    log: &Log,
    plan: Plan,
) -> Result<(String, bool), SagaError<TestError>> {
    let start = client
        .saga(key)
        .lease_ttl(Duration::from_secs(1))
        .wait_timeout(Duration::from_secs(20))
        .start::<String, TestError>()
        .await?;
    let mut saga = match start {
        SagaStart::Finished(output) => return Ok((output, true)),
        SagaStart::Run(saga) => saga,
    };
    for step in ["a", "b", "c"] {
        saga.step(
            step,
            &args(step),
            |lease| async move {
                if let Some((failing, disposition)) = plan.fail_step {
                    if failing == step {
                        push(log, format!("fail:{step}"));
                        return Err(TestError(disposition));
                    }
                }
                push(log, format!("do:{step}"));
                Ok(Output {
                    id: format!("{step}-out"),
                    token: lease.fencing_token(),
                })
            },
            move |output: Output| async move {
                if let Some((failing, disposition)) = plan.fail_undo {
                    if failing == step {
                        push(log, format!("undo-fail:{step}"));
                        return Err(TestError(disposition));
                    }
                }
                push(log, format!("undo:{step}:{}", output.id));
                Ok(())
            },
        )
        .await?;
    }
    saga.finish("done").await?;
    Ok(("done".into(), false))
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Looks the saga up until its status is `status` (a lapsing lease takes a moment).
async fn await_status(client: &Client, key: &OperationKey, status: RecordStatus) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let record = client
            .lookup(key)
            .await
            .unwrap()
            .expect("the saga's record");
        if record.status == status {
            return;
        }
        assert!(Instant::now() < deadline, "still {:?}", record.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_saga_runs_its_steps_once_and_a_rerun_replays_it() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("saga-happy");
    let log = Log::default();

    let (output, replayed) = run(&client, &key, &log, Plan::default()).await.unwrap();
    assert_eq!((output.as_str(), replayed), ("done", false));
    assert_eq!(lines(&log), strings(&["do:a", "do:b", "do:c"]));

    let saga = client.lookup(&key).await.unwrap().unwrap();
    assert_eq!(saga.status, RecordStatus::Succeeded);
    assert_eq!(
        saga.result.unwrap().decode_json::<String>().unwrap(),
        "done"
    );
    // Each step is a child of the saga, settled, and kept as long as the saga.
    let children = client
        .list_all(ListRecords::new().parent(&key))
        .collect()
        .await
        .unwrap();
    let mut steps: Vec<&str> = children.iter().map(|r| r.key.as_str()).collect();
    steps.sort();
    assert_eq!(
        steps,
        ["saga-happy:v1/a", "saga-happy:v1/b", "saga-happy:v1/c"]
    );
    let six_days = SystemTime::now() + Duration::from_secs(6 * 24 * 3600);
    assert!(children
        .iter()
        .all(|r| r.status == RecordStatus::Succeeded && r.expires_at.unwrap() > six_days));

    // Again: the stored output, and nothing runs.
    let (output, replayed) = run(&client, &key, &log, Plan::default()).await.unwrap();
    assert_eq!((output.as_str(), replayed), ("done", true));
    assert_eq!(lines(&log).len(), 3, "no effect ran again");
}

#[tokio::test]
async fn a_step_failing_for_good_compensates_the_completed_steps_in_reverse() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("saga-rollback");
    let log = Log::default();
    let plan = Plan {
        fail_step: Some(("c", Disposition::Final)),
        ..Plan::default()
    };

    match run(&client, &key, &log, plan).await.unwrap_err() {
        SagaError::RolledBack {
            step,
            cause: Cause::Failed(TestError(Disposition::Final)),
        } => assert_eq!(step, "c"),
        other => panic!("{other:?}"),
    }
    // The compensations got the steps' outputs, latest step first.
    let expected = strings(&["do:a", "do:b", "fail:c", "undo:b:b-out", "undo:a:a-out"]);
    assert_eq!(lines(&log), expected);

    let saga = client.lookup(&key).await.unwrap().unwrap();
    assert_eq!(saga.status, RecordStatus::Failed);
    let error = saga.error.unwrap();
    assert_eq!(error.code, 409);
    assert_eq!(
        error.message,
        "rolled back: step c failed: test failure (Final)"
    );
    for (child, status) in [
        ("c", RecordStatus::Failed),
        ("compensate-b", RecordStatus::Succeeded),
        ("compensate-a", RecordStatus::Succeeded),
    ] {
        let record = client.lookup(&key.child(child).unwrap()).await.unwrap();
        assert_eq!(record.map(|r| r.status), Some(status), "{child}");
    }
    assert_eq!(
        client
            .lookup(&key.child("compensate-c").unwrap())
            .await
            .unwrap(),
        None
    );

    // A rerun (where step c would now succeed) only replays the rollback.
    match run(&client, &key, &log, Plan::default()).await.unwrap_err() {
        SagaError::RolledBack {
            step,
            cause: Cause::Stored(stored),
        } => {
            assert_eq!(step, "c");
            assert_eq!(
                (stored.code, stored.message.as_str()),
                (42, "test failure (Final)")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(lines(&log), expected, "nothing ran again");
}

#[tokio::test]
async fn an_abandoning_step_error_is_recorded_as_final() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("saga-abandon");
    let log = Log::default();
    let plan = Plan {
        fail_step: Some(("b", Disposition::Abandon)),
        ..Plan::default()
    };
    assert!(matches!(
        run(&client, &key, &log, plan).await,
        Err(SagaError::RolledBack { .. })
    ));
    let step = client.lookup(&key.child("b").unwrap()).await.unwrap();
    assert_eq!(step.map(|r| r.status), Some(RecordStatus::Failed));
    // A rerun without the failure does not run step b again: it is rolled back.
    assert!(matches!(
        run(&client, &key, &log, Plan::default()).await,
        Err(SagaError::RolledBack { .. })
    ));
    assert_eq!(lines(&log), strings(&["do:a", "fail:b", "undo:a:a-out"]));
}

#[tokio::test]
async fn a_compensation_failing_for_good_leaves_the_saga_for_reconciliation() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("saga-stuck");
    let log = Log::default();
    let plan = Plan {
        fail_step: Some(("c", Disposition::Final)),
        fail_undo: Some(("b", Disposition::Final)),
    };

    match run(&client, &key, &log, plan).await.unwrap_err() {
        SagaError::NeedsReconciliation {
            step,
            failed_step,
            cause: Cause::Failed(_),
        } => assert_eq!((step.as_str(), failed_step.as_str()), ("b", "c")),
        other => panic!("{other:?}"),
    }
    // Step a's compensation did not run: b's was not done, so the rollback stopped.
    let expected = strings(&["do:a", "do:b", "fail:c", "undo-fail:b"]);
    assert_eq!(lines(&log), expected);

    // The saga's lease lapses: UNKNOWN, listed for operators.
    await_status(&client, &key, RecordStatus::Unknown).await;
    let listed = client
        .list_all(
            ListRecords::new()
                .namespace(NS)
                .status(RecordStatus::Unknown),
        )
        .collect()
        .await
        .unwrap();
    assert_eq!(
        listed.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        [key.key()]
    );

    // A rerun resumes, replays the failed compensation and stops again; nothing is redone.
    match run(&client, &key, &log, plan).await.unwrap_err() {
        SagaError::NeedsReconciliation {
            step,
            cause: Cause::Stored(stored),
            ..
        } => assert_eq!((step.as_str(), stored.code), ("b", 42)),
        other => panic!("{other:?}"),
    }
    assert_eq!(lines(&log), expected);
    await_status(&client, &key, RecordStatus::Unknown).await;
}

#[tokio::test]
async fn a_saga_whose_run_went_away_resumes_from_the_ledger() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("saga-resume");
    let log = Log::default();
    {
        let SagaStart::Run(mut saga) = client
            .saga(&key)
            .lease_ttl(Duration::from_secs(1))
            .start::<String, TestError>()
            .await
            .unwrap()
        else {
            panic!("a new saga runs")
        };
        assert!(!saga.resumed());
        let first = saga
            .step(
                "a",
                &args("a"),
                |_| async {
                    push(&log, "do:a".into());
                    Ok(Output {
                        id: "a-out".into(),
                        token: 7,
                    })
                },
                |_: Output| async { Ok(()) },
            )
            .await
            .unwrap();
        assert_eq!(first.id, "a-out");
        // The process goes away here: the saga's keep-alive stops with it.
    }
    await_status(&client, &key, RecordStatus::Unknown).await;

    // The rerun reconciles it and runs the same steps: a replays, b and c run.
    let (output, replayed) = run(&client, &key, &log, Plan::default()).await.unwrap();
    assert_eq!((output.as_str(), replayed), ("done", false));
    assert_eq!(lines(&log), strings(&["do:a", "do:b", "do:c"]));
    let saga = client.lookup(&key).await.unwrap().unwrap();
    assert_eq!(
        (saga.status, saga.fencing_token),
        (RecordStatus::Succeeded, 2)
    );
}

#[tokio::test]
async fn a_retryable_step_error_releases_the_saga_for_a_later_run() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("saga-retry");
    let log = Log::default();
    let plan = Plan {
        fail_step: Some(("b", Disposition::Retryable)),
        ..Plan::default()
    };
    match run(&client, &key, &log, plan).await.unwrap_err() {
        SagaError::Retryable { step, .. } => assert_eq!(step, "b"),
        other => panic!("{other:?}"),
    }
    // Released at once, not left to lapse: the next run acquires it and retries step b.
    let saga = client.lookup(&key).await.unwrap().unwrap();
    assert_eq!(saga.status, RecordStatus::Retry);
    let (output, _) = run(&client, &key, &log, Plan::default()).await.unwrap();
    assert_eq!(output, "done");
    assert_eq!(lines(&log), strings(&["do:a", "fail:b", "do:b", "do:c"]));
}

#[tokio::test]
async fn a_saga_run_elsewhere_is_in_progress_and_step_names_are_checked() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("saga-busy");
    let SagaStart::Run(mut saga) = client.saga(&key).start::<(), TestError>().await.unwrap() else {
        panic!("a new saga runs")
    };
    let other = client
        .saga(&key)
        .wait_timeout(Duration::ZERO)
        .start::<(), TestError>()
        .await;
    assert!(
        matches!(other, Err(SagaError::InProgress { .. })),
        "{other:?}"
    );

    let noop = |_| async { Ok::<_, TestError>(1u32) };
    for name in ["compensate-x", ""] {
        let refused = saga.step(name, &(), noop, |_| async { Ok(()) }).await;
        assert!(
            matches!(refused, Err(SagaError::InvalidStep { .. })),
            "{name:?}"
        );
    }
    saga.step("x", &(), noop, |_| async { Ok(()) })
        .await
        .unwrap();
    let again = saga.step("x", &(), noop, |_| async { Ok(()) }).await;
    assert!(matches!(again, Err(SagaError::InvalidStep { .. })));
    assert_eq!(saga.completed_steps(), ["x"]);
    saga.finish(&()).await.unwrap();
    // Other arguments for the same saga key are another intent.
    let reused = client
        .saga(&key)
        .arguments(&args("other"))
        .start::<(), TestError>()
        .await;
    match reused {
        Err(SagaError::Rpc(e)) => {
            assert_eq!(e.reason(), Some(oncekey_client::Reason::KeyReused))
        }
        other => panic!("{other:?}"),
    }
}
