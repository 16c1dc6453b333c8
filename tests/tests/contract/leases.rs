//! Keeping a lease: Renew, the server-side KeepAlive stream and the lease it loses, and Claim.wait
//! returning the result of the call already in flight.

use super::NS;
use oncekey_api::v1::{self, ClaimOutcome};
use oncekey_tests::*;
use std::time::Duration;

#[tokio::test]
async fn renew_and_server_side_keep_alive() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    c.claim(v1::ClaimRequest {
        lease_ttl: Some(ms(1000)),
        ..claim(NS, "ka", "{}")
    })
    .await
    .unwrap();
    let renewed = c
        .renew(v1::RenewRequest {
            namespace: NS.into(),
            key: "ka".into(),
            lease_token: 1,
            lease_ttl: Some(ms(2000)),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renewed.lease.unwrap().token, 1);

    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(v1::KeepAliveRequest {
        namespace: NS.into(),
        key: "ka".into(),
        lease_token: 1,
        lease_ttl: Some(ms(1200)),
    })
    .await
    .unwrap();
    let mut leases = c
        .keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    let mut expiries = Vec::new();
    for _ in 0..4 {
        let lease = tokio::time::timeout(Duration::from_secs(3), leases.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        expiries.push(lease.expires_at.unwrap());
    }
    assert!(
        expiries
            .windows(2)
            .all(|w| (w[1].seconds, w[1].nanos) > (w[0].seconds, w[0].nanos)),
        "{expiries:?}"
    );
    // Far past the 1.2 s lease, kept alive by the server: nobody can take it over.
    let dup = c.claim(claim(NS, "ka", "{}")).await.unwrap().into_inner();
    assert_eq!(outcome(&dup), ClaimOutcome::InProgress);

    // Settling ends the stream cleanly.
    c.complete(complete(NS, "ka", 1, result(200, b"done")))
        .await
        .unwrap();
    let end = tokio::time::timeout(Duration::from_secs(3), async {
        loop {
            match leases.message().await {
                Ok(Some(_)) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the stream ends once the record settles");
    assert!(matches!(end, Ok(None)), "{end:?}");
    drop(tx);
}

#[tokio::test]
async fn keep_alive_of_a_lost_lease_fails_with_lease_lost() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(v1::KeepAliveRequest {
        namespace: NS.into(),
        key: "nobody".into(),
        lease_token: 1,
        lease_ttl: None,
    })
    .await
    .unwrap();
    let err = c
        .keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "LEASE_LOST");
}

#[tokio::test]
async fn claim_wait_returns_the_result_of_the_in_flight_call() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    c.claim(claim(NS, "slow", "{}")).await.unwrap();
    let mut waiter = c.clone();
    let waiting = tokio::spawn(async move {
        let req = v1::ClaimRequest {
            wait: Some(ms(10_000)),
            ..claim(NS, "slow", "{}")
        };
        waiter.claim(req).await.unwrap().into_inner()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());
    c.complete(complete(NS, "slow", 1, result(200, b"slow result")))
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken on settle")
        .unwrap();
    assert_eq!(outcome(&answer), ClaimOutcome::Completed);
    assert_eq!(answer.record.unwrap().result.unwrap().body, b"slow result");

    // At the deadline the answer is IN_PROGRESS.
    c.claim(claim(NS, "stuck", "{}")).await.unwrap();
    let req = v1::ClaimRequest {
        wait: Some(ms(300)),
        ..claim(NS, "stuck", "{}")
    };
    let answer = c.claim(req).await.unwrap().into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::InProgress);
    assert_eq!(
        answer.record.unwrap().dedup_hits,
        1,
        "a waiting claim counts once"
    );
}
