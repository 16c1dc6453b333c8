//! The etcd design's rules, checked against a real etcd started by scripts/etcd (ignored by a
//! plain `cargo test`; they fail, never skip, when etcd cannot be started).

use super::*;
use crate::peers::test_support::{design, start};
use std::time::Duration;

async fn peer(lease: Duration, fingerprint: &[u8]) -> EtcdPeer {
    EtcdPeer::connect(&start("etcd"), 1, design(lease, fingerprint))
        .await
        .expect("connect to etcd")
}

fn acquired(claim: Result<Claim, Refusal>) -> u64 {
    match claim {
        Ok(Claim::Acquired { token }) => token,
        other => panic!("expected ACQUIRED, got {other:?}"),
    }
}

#[tokio::test]
#[ignore = "needs etcd: scripts/test bench-peers runs it"]
async fn first_claim_acquires_and_a_second_replays_after_complete() {
    let peer = peer(Duration::from_secs(60), b"fingerprint-a").await;
    let (mut a, mut b) = (peer.worker(0), peer.worker(1));
    let token = acquired(a.claim("k").await);
    assert_eq!(b.claim("k").await, Ok(Claim::InProgress));
    assert_eq!(a.complete("k", token).await, Ok(()));
    let replay = Claim::Completed {
        code: 200,
        body: peer.shared.design.body.clone(),
    };
    assert_eq!(b.claim("k").await, Ok(replay.clone()));
    assert_eq!(a.claim("k").await, Ok(replay));
    // The same Complete again is accepted; a token issued for another key settles nothing here.
    assert_eq!(a.complete("k", token).await, Ok(()));
    let elsewhere = acquired(b.claim("other").await);
    assert_eq!(a.complete("k", elsewhere).await, Err(Refusal::LeaseLost));
    assert_eq!(a.complete("k", token - 1).await, Err(Refusal::LeaseLost));
}

#[tokio::test]
#[ignore = "needs etcd: scripts/test bench-peers runs it"]
async fn another_fingerprint_is_refused() {
    let peer = peer(Duration::from_secs(60), b"fingerprint-a").await;
    let mut a = peer.worker(0);
    let token = acquired(a.claim("k").await);
    let mut other_design = peer.shared.design.clone();
    other_design.fingerprint = Bytes::from_static(b"fingerprint-b");
    let other = EtcdPeer::connect(&start("etcd"), 1, other_design)
        .await
        .unwrap();
    assert_eq!(other.worker(0).claim("k").await, Err(Refusal::KeyReused));
    assert_eq!(a.complete("k", token).await, Ok(()));
    assert_eq!(other.worker(0).claim("k").await, Err(Refusal::KeyReused));
    assert!(matches!(a.claim("k").await, Ok(Claim::Completed { .. })));
}

#[tokio::test]
#[ignore = "needs etcd: scripts/test bench-peers runs it"]
async fn an_expired_lease_is_taken_over_with_a_greater_token_and_the_stale_one_is_refused() {
    // A 1 ms lease has run out after the sleep, however slow the machine.
    let peer = peer(Duration::from_millis(1), b"fingerprint-a").await;
    let (mut a, mut b) = (peer.worker(0), peer.worker(1));
    let first = acquired(a.claim("k").await);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second = acquired(b.claim("k").await);
    assert!(second > first, "{second} after {first}");
    // The first holder lost its lease: its Complete is refused and stores nothing.
    assert_eq!(a.complete("k", first).await, Err(Refusal::LeaseLost));
    assert_eq!(b.complete("k", second).await, Ok(()));
    assert!(matches!(a.claim("k").await, Ok(Claim::Completed { .. })));
    assert_eq!(a.complete("never", first).await, Err(Refusal::LeaseLost));
}

#[tokio::test]
#[ignore = "needs etcd: scripts/test bench-peers runs it"]
async fn another_result_after_completion_is_refused() {
    let peer = peer(Duration::from_secs(60), b"fingerprint-a").await;
    let mut a = peer.worker(0);
    let token = acquired(a.claim("k").await);
    assert_eq!(a.complete("k", token).await, Ok(()));
    let mut other_design = peer.shared.design.clone();
    other_design.body = Bytes::from_static(b"another result");
    let other = EtcdPeer::connect(&start("etcd"), 1, other_design)
        .await
        .unwrap();
    assert_eq!(
        other.worker(0).complete("k", token).await,
        Err(Refusal::AlreadySettled)
    );
}
