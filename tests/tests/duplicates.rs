//! Concurrent duplicates over real gRPC against the real binary: Claims that `wait` on a key
//! nobody holds yet are all held until the first one's operation settles, on one server (embedded
//! store) and across two servers sharing a CQL keyspace.

use oncekey_api::v1::{self, ClaimOutcome};
use oncekey_client::LedgerRpc;
use oncekey_tests::*;
use std::time::Duration;

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
