//! Failures around a forwarded request: the ledger killed while the upstream works, the gateway
//! killed (SIGKILL) between the upstream's answer and the Complete — at-least-once goes upstream
//! again once the lease lapses, at-most-once answers 409 "outcome unknown, must be reconciled" —
//! and SIGTERM draining a request in flight.

use crate::support::{eventually, Gateway, Http, Upstream};
use oncekey_tests::Server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledger_killed_mid_request() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start_on(&data, &[]);
    let grpc_addr = server.grpc.trim_start_matches("http://").to_owned();
    let up = Upstream::start().await;
    let gw = Gateway::start(&up.url, &server.grpc, &["--lease", "1s"]);
    let http = Http::h1();
    let url = format!("{}/hold", gw.url);

    let first = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url, Some("lk-1"), "{}", &[]).await }
    });
    up.arrival().await;
    server.kill9();
    up.release(1);
    // The upstream acted: its answer is returned even though the ledger could not record it.
    let first = first.await.unwrap();
    assert_eq!(first.status, 201, "{first:?}");
    assert!(!first.replayed());

    // While the ledger is down, nothing goes upstream.
    http.post(&url, Some("lk-1"), "{}", &[])
        .await
        .problem(503, "ledger-unavailable");
    assert_eq!(up.calls(), 1);

    // Back on the same port and data: the unrecorded request's lease has lapsed, so (at least
    // once) the key goes upstream again, and from then on is replayed.
    let _server = Server::start_on(&data, &["--listen", &grpc_addr]);
    up.release(1);
    let second = eventually("the ledger to answer again", || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.post(&url, Some("lk-1"), "{}", &[]).await;
            (r.status != 503 && r.status != 409).then_some(r)
        }
    })
    .await;
    assert_eq!(second.status, 201, "{second:?}");
    assert!(!second.replayed());
    assert_eq!(up.calls(), 2);
    let third = http.post(&url, Some("lk-1"), "{}", &[]).await;
    assert!(third.replayed());
    assert_eq!(third.body, second.body);
}

/// SIGKILL of the gateway after the upstream acted and before Complete; a new gateway then sees
/// the key. Returns the first answer that is not "in progress" and the upstream's call count.
async fn kill_between_answer_and_complete(semantics: &str) -> (crate::support::Resp, usize) {
    let server = Server::start(&[]);
    let up = Upstream::start().await;
    let flags = ["--lease", "1s", "--semantics", semantics];
    let mut gw = Gateway::start(&up.url, &server.grpc, &flags);
    let http = Http::h1();
    let pending = tokio::spawn({
        let (http, url) = (http.clone(), format!("{}/hold", gw.url));
        async move {
            // The connection dies with the gateway: no answer.
            let answer = http.try_post(&url, Some("kill-1"), "{}").await;
            assert!(answer.is_err(), "{answer:?}");
        }
    });
    up.arrival().await;
    gw.kill9();
    up.release(1);
    pending.await.unwrap();
    assert_eq!(up.calls(), 1);

    let gw2 = Gateway::start(&up.url, &server.grpc, &flags);
    up.release(1);
    let url = format!("{}/hold", gw2.url);
    let answer = eventually("the dead gateway's lease to lapse", || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.post(&url, Some("kill-1"), "{}", &[]).await;
            let in_progress =
                r.status == 409 && r.json()["type"] == "urn:oncekey:gateway:in-progress";
            (!in_progress).then_some(r)
        }
    })
    .await;
    (answer, up.calls())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_before_complete_at_least_once_goes_upstream_again() {
    let (answer, calls) = kill_between_answer_and_complete("at-least-once").await;
    assert_eq!(answer.status, 201, "{answer:?}");
    assert!(!answer.replayed());
    assert_eq!(calls, 2, "the lapsed key was forwarded again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_killed_before_complete_at_most_once_needs_reconciliation() {
    let (answer, calls) = kill_between_answer_and_complete("at-most-once").await;
    let body = answer.problem(409, "outcome-unknown");
    let title = body["title"].as_str().unwrap().to_lowercase();
    assert!(
        title.contains("unknown") && title.contains("reconcil"),
        "{title}"
    );
    assert_eq!(calls, 1, "never forwarded twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_request_in_flight_finish_and_record_its_response() {
    let server = Server::start(&[]);
    let up = Upstream::start().await;
    let mut gw = Gateway::start(&up.url, &server.grpc, &[]);
    let http = Http::h1();
    let url = format!("{}/hold", gw.url);
    let first = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url, Some("drain-1"), "{}", &[]).await }
    });
    up.arrival().await;
    let exit = gw.terminate();
    // Draining: not ready, but the request in flight goes on.
    let admin = gw.admin.clone();
    eventually("/readyz to say draining", || {
        let admin = admin.clone();
        async move {
            let (code, body) = oncekey_tests::http_get(&admin, "/readyz").await;
            (code == 503 && body.contains("draining")).then_some(())
        }
    })
    .await;
    up.release(1);
    let first = first.await.unwrap();
    assert_eq!(first.status, 201, "{first:?}");
    let status = tokio::task::spawn_blocking(move || exit.join().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    // The response was recorded before the exit: a new gateway replays it.
    let gw2 = Gateway::start(&up.url, &server.grpc, &[]);
    let again = http
        .post(&format!("{}/hold", gw2.url), Some("drain-1"), "{}", &[])
        .await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(again.body, first.body);
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_still_gets_its_response_recorded_for_the_retry() {
    let (_server, up, gw, http) = crate::setup(&[]).await;
    let url = format!("{}/hold", gw.url);
    let gone = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url, Some("gone-1"), "{}", &[]).await }
    });
    up.arrival().await;
    // The client hangs up while the upstream works.
    gone.abort();
    let _ = gone.await;
    up.release(1);
    let retry = eventually("the response to be recorded", || {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let r = http.post(&url, Some("gone-1"), "{}", &[]).await;
            (r.status != 409).then_some(r)
        }
    })
    .await;
    assert!(retry.replayed(), "{retry:?}");
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_kept_alive_while_the_upstream_works_longer_than_it() {
    let (_server, up, gw, http) = crate::setup(&["--lease", "3s"]).await;
    let url = format!("{}/hold", gw.url);
    let first = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url, Some("long-1"), "{}", &[]).await }
    });
    up.arrival().await;
    // Well past the lease: without renewals the key would be taken over and forwarded again.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    http.post(&url, Some("long-1"), "{}", &[])
        .await
        .problem(409, "in-progress");
    up.release(1);
    assert_eq!(first.await.unwrap().status, 201);
    assert_eq!(up.calls(), 1);
}
