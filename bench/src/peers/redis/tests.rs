//! The Lua scripts' rules, checked against a real Redis started by scripts/redis (these tests are
//! ignored by a plain `cargo test` and fail, never skip, when Redis cannot be started).

use super::*;
use crate::peers::test_support::{design, start};
use std::time::Duration;

async fn peer(lease: Duration) -> RedisPeer {
    let url = start("redis");
    RedisPeer::connect(&url, 2, design(lease, b"fingerprint-a"))
        .await
        .expect("connect to Redis")
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test bench-peers runs it"]
async fn first_claim_acquires_and_a_second_replays_after_complete() {
    let peer = peer(Duration::from_secs(60)).await;
    let mut a = peer.worker(0);
    let mut b = peer.worker(1);
    assert_eq!(a.claim("k").await, Ok(Claim::Acquired { token: 1 }));
    // A live lease: the other caller is told to wait, and nothing changes.
    assert_eq!(b.claim("k").await, Ok(Claim::InProgress));
    assert_eq!(a.complete("k", 1).await, Ok(()));
    let replay = Claim::Completed {
        code: 200,
        body: peer.shared.design.body.clone(),
    };
    assert_eq!(b.claim("k").await, Ok(replay.clone()));
    assert_eq!(a.claim("k").await, Ok(replay));
    // The same Complete again is accepted; the holder's token stays the only one that settles.
    assert_eq!(a.complete("k", 1).await, Ok(()));
    assert_eq!(a.complete("k", 2).await, Err(Refusal::LeaseLost));
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test bench-peers runs it"]
async fn another_fingerprint_is_refused() {
    let peer = peer(Duration::from_secs(60)).await;
    let mut a = peer.worker(0);
    assert_eq!(a.claim("k").await, Ok(Claim::Acquired { token: 1 }));
    let mut other_design = peer.shared.design.clone();
    other_design.fingerprint = Bytes::from_static(b"fingerprint-b");
    let other = RedisPeer::connect(&format!("redis://{}", peer.addr()), 1, other_design)
        .await
        .unwrap();
    assert_eq!(other.worker(0).claim("k").await, Err(Refusal::KeyReused));
    // Refused while in progress and after completion alike; the record is untouched.
    assert_eq!(a.complete("k", 1).await, Ok(()));
    assert_eq!(other.worker(0).claim("k").await, Err(Refusal::KeyReused));
    assert!(matches!(a.claim("k").await, Ok(Claim::Completed { .. })));
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test bench-peers runs it"]
async fn an_expired_lease_is_taken_over_with_the_next_token() {
    // A 1 ms lease has run out after the sleep, however slow the machine.
    let peer = peer(Duration::from_millis(1)).await;
    let mut a = peer.worker(0);
    let mut b = peer.worker(1);
    assert_eq!(a.claim("k").await, Ok(Claim::Acquired { token: 1 }));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(b.claim("k").await, Ok(Claim::Acquired { token: 2 }));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(a.claim("k").await, Ok(Claim::Acquired { token: 3 }));
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test bench-peers runs it"]
async fn a_stale_tokens_complete_is_refused() {
    let peer = peer(Duration::from_millis(1)).await;
    let mut a = peer.worker(0);
    let mut b = peer.worker(1);
    assert_eq!(a.claim("k").await, Ok(Claim::Acquired { token: 1 }));
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(b.claim("k").await, Ok(Claim::Acquired { token: 2 }));
    // The first holder lost its lease: its Complete is refused and stores nothing.
    assert_eq!(a.complete("k", 1).await, Err(Refusal::LeaseLost));
    assert_eq!(b.complete("k", 2).await, Ok(()));
    assert!(matches!(a.claim("k").await, Ok(Claim::Completed { .. })));
    // A Complete of a key never claimed is refused too.
    assert_eq!(a.complete("never", 1).await, Err(Refusal::LeaseLost));
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test bench-peers runs it"]
async fn another_result_after_completion_is_refused_and_scripts_reload() {
    let peer = peer(Duration::from_secs(60)).await;
    let mut a = peer.worker(0);
    assert_eq!(a.claim("k").await, Ok(Claim::Acquired { token: 1 }));
    assert_eq!(a.complete("k", 1).await, Ok(()));
    let mut other_design = peer.shared.design.clone();
    other_design.body = Bytes::from_static(b"another result");
    let other = RedisPeer::connect(&format!("redis://{}", peer.addr()), 1, other_design)
        .await
        .unwrap();
    assert_eq!(
        other.worker(0).complete("k", 1).await,
        Err(Refusal::AlreadySettled)
    );
    // After SCRIPT FLUSH the next EVALSHA gets NOSCRIPT, reloads and still answers.
    let mut admin = Resp::connect(peer.addr()).await.unwrap();
    admin.call(&[b"SCRIPT", b"FLUSH"]).await.unwrap();
    assert!(matches!(a.claim("k").await, Ok(Claim::Completed { .. })));
    assert!(cpu_seconds(peer.addr()).await.is_some_and(|s| s > 0.0));
}

#[test]
fn info_cpu_is_parsed() {
    let info = "# CPU\r\nused_cpu_sys:1.25\r\nused_cpu_user:2.5\r\nused_cpu_sys_children:9\r\n";
    assert_eq!(parse_cpu(info), Some(3.75));
    assert_eq!(parse_cpu("# CPU\r\n"), None);
}

#[test]
fn claim_replies_are_parsed() {
    let s = |t: &'static str| BytesFrame::BulkString(Bytes::from_static(t.as_bytes()));
    assert_eq!(
        parse_claim(BytesFrame::Array(vec![
            s("ACQUIRED"),
            BytesFrame::Integer(3)
        ])),
        Ok(Claim::Acquired { token: 3 })
    );
    assert_eq!(
        parse_claim(BytesFrame::Array(vec![
            s("COMPLETED"),
            BytesFrame::Integer(201),
            s("body")
        ])),
        Ok(Claim::Completed {
            code: 201,
            body: Bytes::from_static(b"body")
        })
    );
    assert_eq!(
        parse_claim(BytesFrame::Array(vec![s("IN_PROGRESS")])),
        Ok(Claim::InProgress)
    );
    assert!(parse_claim(BytesFrame::Array(vec![
        s("ACQUIRED"),
        BytesFrame::Integer(-1)
    ]))
    .is_err());
    assert!(parse_claim(s("OK")).is_err());
}
