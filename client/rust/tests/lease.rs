//! Leases under the one-call API: the keep-alive holds a lease far past its ttl while the closure
//! runs, a run that is dropped lets its lease lapse, and a lease taken away is reported.

use oncekey_client::{Claim, Claimed, Disposition, OnceError, StoredError};
use oncekey_tests::client::*;
use oncekey_tests::Server;
use std::time::Duration;

#[tokio::test]
async fn keep_alive_holds_the_lease_well_past_its_ttl() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("long-run");
    let observer = client.clone();
    let observed_key = key.clone();
    let done = client
        .once(&key, &args("x"))
        .lease_ttl(Duration::from_secs(1))
        .run_detailed(|lease| async move {
            tokio::time::sleep(Duration::from_millis(2500)).await;
            // Two and a half lease lengths in: a concurrent Claim still sees it in progress.
            let seen = observer
                .claim(&Claim::new(&observed_key, &args("x")).unwrap())
                .await
                .unwrap();
            let in_progress = matches!(seen, Claimed::InProgress { .. });
            tokio::time::sleep(Duration::from_millis(500)).await;
            assert!(!lease.is_lost());
            Ok::<_, TestError>((in_progress, lease.fencing_token()))
        })
        .await
        .unwrap();
    assert_eq!(
        done.value,
        (true, 1),
        "held by the keep-alive, never taken over"
    );
    assert_eq!(done.record.attempt, 1);
}

#[tokio::test]
async fn a_dropped_run_lets_its_lease_lapse() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("dropped");
    let running = {
        let client = client.clone();
        let key = key.clone();
        tokio::spawn(async move {
            client
                .once(&key, &args("x"))
                .lease_ttl(Duration::from_secs(1))
                .run(|_| std::future::pending::<Result<Output, TestError>>())
                .await
        })
    };
    // Kept alive for a while, then the caller goes away.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let seen = client
        .claim(&Claim::new(&key, &args("x")).unwrap())
        .await
        .unwrap();
    assert!(matches!(seen, Claimed::InProgress { .. }), "{seen:?}");
    running.abort();
    let _ = running.await;

    // Without renewals the 1 s lease runs out and the next Claim takes the operation over.
    let claim = Claim::new(&key, &args("x"))
        .unwrap()
        .wait(Duration::from_secs(15));
    let taken = tokio::time::timeout(Duration::from_secs(20), client.claim(&claim))
        .await
        .expect("answered")
        .unwrap();
    match taken {
        Claimed::Acquired { lease, .. } => assert_eq!((lease.token, lease.attempt), (2, 2)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_lost_lease_is_reported_to_the_closure_and_the_caller() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("lost");
    let (token_tx, token_rx) = tokio::sync::oneshot::channel();
    let (taken_tx, taken_rx) = tokio::sync::oneshot::channel();
    let thief = {
        let client = client.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let token: u64 = token_rx.await.unwrap();
            // Someone releases the holder's lease and takes the operation over.
            client
                .fail(&key, token, StoredError::default(), Disposition::Retryable)
                .await
                .unwrap();
            match client
                .claim(&Claim::new(&key, &args("x")).unwrap())
                .await
                .unwrap()
            {
                Claimed::Acquired { lease, .. } => taken_tx.send(lease.token).unwrap(),
                other => panic!("{other:?}"),
            }
        })
    };
    let err = client
        .once(&key, &args("x"))
        .lease_ttl(Duration::from_secs(1))
        .run(|lease| async move {
            token_tx.send(lease.fencing_token()).unwrap();
            tokio::time::timeout(Duration::from_secs(15), lease.lost())
                .await
                .expect("the keep-alive reports the loss");
            assert!(lease.is_lost());
            // Finish only once the other holder has the operation.
            assert_eq!(taken_rx.await.unwrap(), 2);
            Ok::<_, TestError>(Output {
                id: "too late".into(),
                token: lease.fencing_token(),
            })
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OnceError::LeaseLost {
                token: 1,
                operation: None
            }
        ),
        "{err:?}"
    );
    thief.await.unwrap();
}

#[tokio::test]
async fn a_replaced_keep_alive_stops_without_reopening_or_losing_the_lease() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let key = key("replaced");
    let other = client.clone();
    let other_key = key.clone();
    let done = client
        .once(&key, &args("x"))
        .lease_ttl(Duration::from_secs(1))
        .run_detailed(|lease| async move {
            // Let the run's own keep-alive open, then open another stream on the same lease:
            // the server replaces the run's stream with it.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let token = lease.fencing_token();
            let mut newer = other
                .keep_alive(&other_key, token, Some(Duration::from_secs(1)))
                .await
                .unwrap();
            // Several renewal periods: had the run reopened its stream, it would have replaced
            // this one in turn.
            for _ in 0..6 {
                let renewed = tokio::time::timeout(Duration::from_secs(10), newer.next())
                    .await
                    .expect("renewals continue");
                match renewed {
                    Some(Ok(grant)) => assert_eq!(grant.token, token),
                    other => panic!("the newer stream ended: {other:?}"),
                }
            }
            assert!(
                !lease.is_lost(),
                "a replaced keep-alive is not a lost lease"
            );
            Ok::<_, TestError>(token)
        })
        .await
        .unwrap();
    assert_eq!(done.value, 1);
}
