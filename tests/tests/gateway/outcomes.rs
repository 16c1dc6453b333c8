//! What each upstream outcome does to the key under each `--semantics` (the table in
//! docs/gateway.md): at-most-once never forwards a request that may have reached the upstream
//! again by itself — a timeout, a reset or closed connection, a body cut short or stalled leave
//! the record UNKNOWN, not failed, and the key answers 409 "outcome unknown" — and stores every
//! complete answer except the `--retryable-status` ones; a request that never left stays
//! retryable; at-least-once releases all of those; a 101 is never stored.

use crate::raw::RawUpstream;
use crate::setup;
use crate::support::{eventually, ledger_key, Gateway, Http};
use oncekey_api::v1;
use oncekey_client::LedgerRpc;
use oncekey_tests::{lookup, Server};

/// The record of the gateway's key `key` (caller without `Authorization`).
async fn record(ledger: &mut LedgerRpc, key: &str) -> v1::Record {
    ledger
        .lookup(lookup("http", &ledger_key("", key)))
        .await
        .unwrap_or_else(|e| panic!("no record for {key}: {e:?}"))
        .into_inner()
        .record
        .unwrap()
}

/// The ways an upstream can leave a request without a complete answer after it arrived, with the
/// gateway's answer to the client.
const NO_COMPLETE_ANSWER: [(&str, u16, &str); 5] = [
    ("/hang", 504, "upstream-timeout"),
    ("/reset", 502, "upstream-unreachable"),
    ("/close", 502, "upstream-unreachable"),
    ("/cut", 502, "upstream-unreachable"),
    ("/stall", 504, "upstream-timeout"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_once_never_forwards_a_request_that_may_have_arrived_again() {
    let server = Server::start(&[]);
    let up = RawUpstream::start().await;
    let flags = ["--semantics", "at-most-once", "--upstream-timeout", "1s"];
    let gw = Gateway::start(&up.url, &server.grpc, &flags);
    let http = Http::h1();
    let ledger = server.client("gw").await;
    for (path, status, slug) in NO_COMPLETE_ANSWER {
        let url = format!("{}{path}", gw.url);
        let key = format!("amo-{}", &path[1..]);
        let before = up.calls();
        let first = http.post(&url, Some(&key), "{}", &[]).await;
        let detail = first.problem(status, slug)["detail"].to_string();
        assert_eq!(up.calls(), before + 1, "{path}");
        // At once (the gateway knows) and once the ledger does: outcome unknown, not forwarded.
        http.post(&url, Some(&key), "{}", &[])
            .await
            .problem(409, "outcome-unknown");
        assert!(detail.contains("unknown"), "{path}: {detail}");
        let unknown = eventually("the record to turn UNKNOWN", || {
            let (mut ledger, key) = (ledger.clone(), key.clone());
            async move {
                let r = record(&mut ledger, &key).await;
                (r.status == v1::RecordStatus::Unknown as i32).then_some(r)
            }
        })
        .await;
        assert_eq!(unknown.error, None, "{path}: the record was failed");
        http.post(&url, Some(&key), "{}", &[])
            .await
            .problem(409, "outcome-unknown");
        assert_eq!(up.calls(), before + 1, "{path}: forwarded again");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_releases_a_request_without_a_complete_answer() {
    let server = Server::start(&[]);
    let up = RawUpstream::start().await;
    let gw = Gateway::start(&up.url, &server.grpc, &["--upstream-timeout", "1s"]);
    let http = Http::h1();
    let mut ledger = server.client("gw").await;
    for (path, status, slug) in NO_COMPLETE_ANSWER {
        let url = format!("{}{path}", gw.url);
        let key = format!("alo-{}", &path[1..]);
        let before = up.calls();
        for _ in 0..2 {
            let answer = http.post(&url, Some(&key), "{}", &[]).await;
            let detail = answer.problem(status, slug)["detail"].to_string();
            assert!(!detail.contains("unknown"), "{path}: {detail}");
        }
        assert_eq!(up.calls(), before + 2, "{path}: released for the retry");
        let r = record(&mut ledger, &key).await;
        assert_eq!(r.status, v1::RecordStatus::Retry as i32, "{path}");
        assert_eq!(r.error.unwrap().code, i32::from(status), "{path}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_once_a_request_that_never_left_stays_retryable() {
    let server = Server::start(&[]);
    // Nothing listens there: bind a port, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let upstream = format!("http://127.0.0.1:{port}");
    let gw = Gateway::start(&upstream, &server.grpc, &["--semantics", "at-most-once"]);
    let http = Http::h1();
    for _ in 0..2 {
        http.post(
            &format!("{}/v1/charges", gw.url),
            Some("never-1"),
            "{}",
            &[],
        )
        .await
        .problem(502, "upstream-unreachable");
    }
    let r = record(&mut server.client("gw").await, "never-1").await;
    assert_eq!(r.status, v1::RecordStatus::Retry as i32);
    assert_eq!(r.attempt, 2, "each request acquired the released key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_once_stores_every_complete_answer_except_the_listed_statuses() {
    let flags = ["--semantics", "at-most-once", "--retryable-status", "503"];
    let (server, up, gw, http) = setup(&flags).await;
    let mut ledger = server.client("gw").await;
    for code in [500, 502, 429, 408, 425, 404] {
        let url = format!("{}/status/{code}", gw.url);
        let key = format!("stored-{code}");
        let first = http.post(&url, Some(&key), "{}", &[]).await;
        assert_eq!((first.status, first.replayed()), (code, false));
        let again = http.post(&url, Some(&key), "{}", &[]).await;
        assert!(again.replayed(), "{code}: {again:?}");
        assert_eq!((again.status, &again.body), (code, &first.body));
        let r = record(&mut ledger, &key).await;
        assert_eq!(r.status, v1::RecordStatus::Succeeded as i32, "{code}");
    }
    let calls = up.calls();
    let url = format!("{}/status/503", gw.url);
    for n in 1..=2 {
        let r = http.post(&url, Some("listed-503"), "{}", &[]).await;
        assert_eq!((r.status, r.replayed()), (503, false));
        assert_eq!(up.calls(), calls + n, "a listed status releases the key");
    }
    let r = record(&mut ledger, "listed-503").await;
    assert_eq!(r.status, v1::RecordStatus::Retry as i32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_once_adds_the_listed_statuses_to_its_retryable_ones() {
    let (server, up, gw, http) = setup(&["--retryable-status", "409"]).await;
    let mut ledger = server.client("gw").await;
    for code in [409, 500] {
        let url = format!("{}/status/{code}", gw.url);
        let key = format!("alo-{code}");
        for _ in 0..2 {
            let r = http.post(&url, Some(&key), "{}", &[]).await;
            assert_eq!((r.status, r.replayed()), (code, false));
        }
        let r = record(&mut ledger, &key).await;
        assert_eq!(r.status, v1::RecordStatus::Retry as i32, "{code}");
    }
    assert_eq!(up.calls(), 4);
    let url = format!("{}/status/404", gw.url);
    http.post(&url, Some("alo-404"), "{}", &[]).await;
    assert!(http.post(&url, Some("alo-404"), "{}", &[]).await.replayed());
    assert_eq!(up.calls(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_switches_protocols_is_neither_stored_nor_proxied() {
    let server = Server::start(&[]);
    let up = RawUpstream::start().await;
    let http = Http::h1();
    let mut ledger = server.client("gw").await;

    let gw = Gateway::start(&up.url, &server.grpc, &[]);
    let url = format!("{}/upgrade", gw.url);
    for _ in 0..2 {
        http.post(&url, Some("switch-alo"), "{}", &[])
            .await
            .problem(502, "upstream-upgrade");
    }
    assert_eq!(up.calls(), 2, "at least once: released, forwarded again");
    let r = record(&mut ledger, "switch-alo").await;
    assert_eq!(r.status, v1::RecordStatus::Retry as i32);
    // Without a key it is not proxied either.
    http.post(&url, None, "{}", &[])
        .await
        .problem(502, "upstream-upgrade");
    assert_eq!(up.calls(), 3);

    let amo = Gateway::start(&up.url, &server.grpc, &["--semantics", "at-most-once"]);
    let url = format!("{}/upgrade", amo.url);
    http.post(&url, Some("switch-amo"), "{}", &[])
        .await
        .problem(502, "upstream-upgrade");
    http.post(&url, Some("switch-amo"), "{}", &[])
        .await
        .problem(409, "outcome-unknown");
    assert_eq!(up.calls(), 4, "at most once: never forwarded again");
}
