//! Concurrent duplicates over real gRPC against the real binary: Claims that `wait` on a key
//! nobody holds yet are all held until the first one's operation settles, on one server (embedded
//! store) and across two servers sharing a CQL keyspace; and KeepAlive streams opened again and
//! again on one lease, of which only the newest lives and which together renew it as often as one.

use oncekey_api::v1::{self, ClaimOutcome, EventKind};
use oncekey_client::LedgerRpc;
use oncekey_tests::*;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;

const NS: &str = "dup.test";

/// `waiters` concurrent Claims with a 30 s wait on `key`, spread over `servers`' clients; the
/// one that acquires completes after a moment. Returns every answer.
async fn race(clients: &[LedgerRpc], key: &str, waiters: usize) -> Vec<v1::ClaimResponse> {
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(waiters));
    let tasks: Vec<_> = (0..waiters)
        .map(|i| {
            let mut client = clients[i % clients.len()].clone();
            let (start, key) = (start.clone(), key.to_owned());
            tokio::spawn(async move {
                let req = v1::ClaimRequest {
                    wait: Some(ms(30_000)),
                    ..claim(NS, &key, r#"{"n":1}"#)
                };
                start.wait().await;
                let answer = client.claim(req).await.unwrap().into_inner();
                if outcome(&answer) == ClaimOutcome::Acquired {
                    // The holder works a moment, so the others are held meanwhile.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let token = answer.lease.unwrap().token;
                    client
                        .complete(complete(NS, &key, token, result(201, b"made once")))
                        .await
                        .unwrap();
                }
                answer
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        let answer = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("every waiter is answered")
            .unwrap();
        answers.push(answer);
    }
    answers
}

/// Exactly one ACQUIRED, every other answer COMPLETED with the holder's result.
fn check_answers(answers: &[v1::ClaimResponse]) {
    let outcomes: Vec<_> = answers.iter().map(outcome).collect();
    let acquired = outcomes
        .iter()
        .filter(|o| **o == ClaimOutcome::Acquired)
        .count();
    assert_eq!(acquired, 1, "{outcomes:?}");
    for answer in answers {
        if outcome(answer) != ClaimOutcome::Acquired {
            assert_eq!(
                outcome(answer),
                ClaimOutcome::Completed,
                "held until the holder completed: {outcomes:?}"
            );
            let record = answer.record.as_ref().unwrap();
            assert_eq!(record.result.as_ref().unwrap().body, b"made once");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_duplicates_of_a_fresh_key_all_get_the_result() {
    let server = Server::start(&[]);
    let clients = [server.client("acme").await, server.client("acme").await];
    for round in 0..3 {
        let key = format!("fresh-{round}");
        check_answers(&race(&clients, &key, 8).await);
        let mut c = clients[0].clone();
        let record = c.lookup(lookup(NS, &key)).await.unwrap().into_inner();
        assert_eq!(record.record.unwrap().dedup_hits, 7, "one hit per waiter");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn waiting_duplicates_over_two_cql_servers_all_get_the_result() {
    let keyspace = migrated_keyspace(cql_node());
    let server = |keyspace: &str| {
        Server::start(&[
            "--store",
            "cql",
            "--cql-nodes",
            cql_node(),
            "--cql-keyspace",
            keyspace,
        ])
    };
    let (a, b) = (server(&keyspace), server(&keyspace));
    let clients = [a.client("acme").await, b.client("acme").await];
    for round in 0..2 {
        check_answers(&race(&clients, &format!("fresh-{round}"), 8).await);
    }
}

type Leases = tonic::Streaming<v1::Lease>;

/// Opens a KeepAlive stream on (`key`, token 1) renewing to `ttl_ms`; returns the caller's side.
async fn keep_alive(
    c: &mut LedgerRpc,
    key: &str,
    ttl_ms: i64,
) -> (mpsc::Sender<v1::KeepAliveRequest>, Leases) {
    let (tx, rx) = mpsc::channel(1);
    tx.send(v1::KeepAliveRequest {
        namespace: NS.into(),
        key: key.into(),
        lease_token: 1,
        lease_ttl: Some(ms(ttl_ms)),
    })
    .await
    .unwrap();
    let leases = c
        .keep_alive(ReceiverStream::new(rx))
        .await
        .unwrap()
        .into_inner();
    (tx, leases)
}

/// The next message of `leases`, within a generous deadline.
async fn next(leases: &mut Leases) -> Result<Option<v1::Lease>, tonic::Status> {
    tokio::time::timeout(Duration::from_secs(30), leases.message())
        .await
        .expect("the stream answers")
}

/// Renewal receipts in `key`'s history.
async fn renewals(c: &mut LedgerRpc, key: &str) -> usize {
    let found = c
        .lookup(v1::LookupRequest {
            include_history: true,
            ..lookup(NS, key)
        })
        .await
        .unwrap()
        .into_inner();
    let renew = found
        .history
        .iter()
        .filter(|e| e.kind == EventKind::Renew as i32);
    renew.count()
}

#[tokio::test]
async fn a_newer_keep_alive_stream_replaces_the_older_one() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    let acquired = c
        .claim(v1::ClaimRequest {
            lease_ttl: Some(ms(3_000)),
            ..claim(NS, "ka", "{}")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&acquired), ClaimOutcome::Acquired);
    let (_a_in, mut a) = keep_alive(&mut c, "ka", 3_000).await;
    next(&mut a).await.unwrap().unwrap();
    let (_b_in, mut b) = keep_alive(&mut c, "ka", 3_000).await;
    next(&mut b).await.unwrap().unwrap();
    // A renewal may still be on its way; then the older stream ends.
    let mut end = next(&mut a).await;
    for _ in 0..3 {
        if !matches!(end, Ok(Some(_))) {
            break;
        }
        end = next(&mut a).await;
    }
    let status = end.expect_err("the older stream was replaced");
    assert_eq!(
        (status.code(), reason(&status).as_str()),
        (Code::Aborted, "KEEPALIVE_REPLACED")
    );
    // The newer stream goes on renewing.
    let renewed = next(&mut b).await.unwrap().unwrap();
    assert_eq!(renewed.token, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_keep_alive_streams_on_a_lease_cost_one_streams_renewals() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    for key in ["one-stream", "ten-streams"] {
        c.claim(v1::ClaimRequest {
            lease_ttl: Some(ms(1_500)),
            ..claim(NS, key, "{}")
        })
        .await
        .unwrap();
    }
    let (single_in, mut single) = keep_alive(&mut c, "one-stream", 1_500).await;
    let mut many = Vec::new();
    for _ in 0..10 {
        many.push(keep_alive(&mut c, "ten-streams", 1_500).await);
    }
    // Both leases are kept alive over the same few renewal periods.
    let mut received = 0;
    let until = tokio::time::Instant::now() + Duration::from_millis(2_600);
    while tokio::time::Instant::now() < until {
        match tokio::time::timeout_at(until, single.message()).await {
            Ok(message) => {
                message
                    .expect("the single stream is never replaced")
                    .unwrap();
                received += 1;
            }
            Err(_) => break,
        }
    }
    drop(single_in);
    drop(many);
    let one = renewals(&mut c, "one-stream").await;
    let ten = renewals(&mut c, "ten-streams").await;
    assert!(
        received >= 2 && one >= 2,
        "kept alive: {received} leases, {one} renewals"
    );
    assert!(
        ten <= one + 1,
        "ten streams renewed {ten} times where one stream renewed {one} times"
    );
}
