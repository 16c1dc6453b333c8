//! Transport retries against the real server: a call survives the server being killed and
//! restarted on the same port and data (UNAVAILABLE and connection errors are retried with the
//! identical request), FAILED_PRECONDITION is never retried, and the breaker fails fast.

use oncekey_client::{
    BreakerPolicy, CircuitState, Claim, Claimed, ConnectOptions, Error, Reason, RetryPolicy,
    StoredResult,
};
use oncekey_tests::client::*;
use oncekey_tests::Server;
use std::time::Duration;

#[tokio::test]
async fn a_call_survives_a_server_restart_mid_call() {
    let mut server = Server::start(&[]);
    let client = client_with(&server.grpc, patient()).await;
    let key = key("restart");
    let Claimed::Acquired { lease, .. } = client
        .claim(
            &Claim::new(&key, &args("x"))
                .unwrap()
                .lease_ttl(Duration::from_secs(60)),
        )
        .await
        .unwrap()
    else {
        panic!("acquired")
    };

    // A duplicate waits on the server for the holder to finish ...
    let waiting = {
        let client = client.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let claim = Claim::new(&key, &args("x"))
                .unwrap()
                .wait(Duration::from_secs(30));
            client.claim(&claim).await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    // ... when the server dies under it, and comes back a moment later.
    server.kill9();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    server.restart(&[]);
    client
        .complete(&key, lease.token, StoredResult::json("done").unwrap())
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("answered")
        .unwrap()
        .unwrap();
    match answer {
        Claimed::Completed { result, .. } => {
            assert_eq!(result.decode_json::<String>().unwrap(), "done")
        }
        other => panic!("{other:?}"),
    }
    assert!(client.stats().retries >= 1, "{:?}", client.stats());
}

#[tokio::test]
async fn a_call_made_while_the_server_is_down_is_retried_until_it_is_back() {
    let mut server = Server::start(&[]);
    let client = client_with(&server.grpc, patient()).await;
    server.kill9();

    let key = key("down");
    let call = {
        let client = client.clone();
        let key = key.clone();
        tokio::spawn(async move { client.claim(&Claim::new(&key, &args("x")).unwrap()).await })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!call.is_finished(), "still retrying");
    server.restart(&[]);
    let answer = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("answered")
        .unwrap()
        .unwrap();
    assert!(matches!(answer, Claimed::Acquired { .. }), "{answer:?}");
    let stats = client.stats();
    assert!(
        stats.retries >= 2 && stats.attempts > stats.calls,
        "{stats:?}"
    );
}

#[tokio::test]
async fn failed_precondition_is_never_retried() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("precondition");
    client
        .claim(&Claim::new(&key, &args("x")).unwrap())
        .await
        .unwrap();
    let before = client.stats();

    let err = client
        .claim(&Claim::new(&key, &args("other")).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.reason(), Some(Reason::KeyReused));
    let err = client
        .complete(&key, 7, StoredResult::default())
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.reason()),
        (tonic::Code::FailedPrecondition, Some(Reason::LeaseLost))
    );

    let after = client.stats();
    assert_eq!(after.calls - before.calls, 2);
    assert_eq!(after.attempts - before.attempts, 2, "one attempt each");
    assert_eq!(after.retries, 0);
}

#[tokio::test]
async fn invalid_argument_is_never_retried_and_names_the_field() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let claim = Claim::new(&key("bad-ttl"), &args("x"))
        .unwrap()
        .lease_ttl(Duration::from_millis(10));
    let err = client.claim(&claim).await.unwrap_err();
    assert_eq!(
        (err.code(), err.reason()),
        (tonic::Code::InvalidArgument, Some(Reason::InvalidField))
    );
    assert_eq!(err.bad_field().as_deref(), Some("lease_ttl"));
    assert_eq!((client.stats().attempts, client.stats().retries), (1, 0));
}

#[tokio::test]
async fn the_breaker_fails_fast_then_probes_after_its_cool_down() {
    let mut server = Server::start(&[]);
    let client = client_with(
        &server.grpc,
        ConnectOptions {
            retry: RetryPolicy::never(),
            breaker: BreakerPolicy {
                failure_threshold: 3,
                cool_down: Duration::from_millis(500),
            },
            ..Default::default()
        },
    )
    .await;
    server.kill9();
    let key = key("breaker");
    for _ in 0..3 {
        let err = client.lookup(&key).await.unwrap_err();
        assert!(err.is_transient(), "{err:?}");
    }
    assert_eq!(client.stats().circuit, CircuitState::Open);
    let err = client.lookup(&key).await.unwrap_err();
    assert!(matches!(err, Error::CircuitOpen(_)), "{err:?}");
    assert_eq!(client.stats().rejected, 1);

    server.restart(&[]);
    tokio::time::sleep(Duration::from_millis(600)).await;
    // The probe finds the server back and closes the circuit.
    let mut found = None;
    for _ in 0..20 {
        match client.lookup(&key).await {
            Ok(record) => {
                found = Some(record);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
    assert_eq!(found, Some(None), "absent key, server reachable");
    assert_eq!(client.stats().circuit, CircuitState::Closed);
}
