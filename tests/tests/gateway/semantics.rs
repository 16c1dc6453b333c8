//! The Idempotency-Key rules: replay byte for byte, caller-scoped keys and the fingerprint, 422 on
//! reuse, 409 (or a held wait) in flight, 400 for missing or malformed keys, pass-through of
//! everything else, and 50 concurrent requests of one key making one upstream call.

use crate::setup;
use crate::support::{ledger_key, sha256, Http, Resp};
use oncekey_api::v1;
use oncekey_tests::lookup;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_gets_the_stored_response_byte_for_byte_marked_replayed() {
    let (_server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges?x=1", gw.url);
    let first = http
        .post(&url, Some("order-1"), r#"{"amount":100}"#, &[])
        .await;
    assert_eq!(first.status, 201, "{first:?}");
    assert!(!first.replayed());
    assert_eq!(first.header("set-cookie"), Some("session=s1"));
    assert_eq!(up.calls(), 1);

    // The sf-string form names the same key; an equivalent JSON body is the same request.
    for key in ["order-1", "\"order-1\""] {
        let again = http
            .post(&url, Some(key), "{ \"amount\" : 100.0 }", &[])
            .await;
        assert!(again.replayed(), "{again:?}");
        assert_eq!(again.status, 201);
        assert_eq!(again.body, first.body);
        assert_eq!(again.header("content-type"), first.header("content-type"));
        assert_eq!(again.header("location"), Some("/things/1"));
        // Not stored: cookies (unless listed) and other headers.
        assert_eq!(again.header("set-cookie"), None);
        assert_eq!(again.header("x-upstream"), None);
    }
    assert_eq!(up.calls(), 1);

    // A body that is not text is replayed exactly too.
    let bin = format!("{}/binary", gw.url);
    let first = http.post(&bin, Some("bin-1"), "{}", &[]).await;
    let again = http.post(&bin, Some("bin-1"), "{}", &[]).await;
    assert!(again.replayed());
    assert_eq!((again.status, &again.body), (first.status, &first.body));
    assert_eq!(
        again.header("content-type"),
        Some("application/octet-stream")
    );
    assert_eq!(up.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listed_headers_are_stored_and_cookies_only_when_listed() {
    let (_server, up, gw, http) = setup(&["--store-headers", "X-Upstream,set-cookie"]).await;
    let url = format!("{}/v1/things", gw.url);
    let first = http.post(&url, Some("h-1"), "{}", &[]).await;
    let again = http.post(&url, Some("h-1"), "{}", &[]).await;
    assert!(again.replayed());
    assert_eq!(again.header("x-upstream"), Some("yes"));
    assert_eq!(again.header("set-cookie"), first.header("set-cookie"));
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_scoped_to_the_caller_and_fingerprinted_by_the_written_rule() {
    let (server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges?x=1", gw.url);
    let body = r#"{"b":2,"a":1}"#;
    let alice = http
        .post(&url, Some("k"), body, &[("authorization", "Bearer alice")])
        .await;
    let bob = http
        .post(&url, Some("k"), body, &[("authorization", "Bearer bob")])
        .await;
    let nobody = http.post(&url, Some("k"), body, &[]).await;
    assert!(!alice.replayed() && !bob.replayed() && !nobody.replayed());
    assert_eq!(up.calls(), 3, "each caller's key is its own");
    let alice_again = http
        .post(&url, Some("k"), body, &[("authorization", "Bearer alice")])
        .await;
    assert!(alice_again.replayed());
    assert_eq!(alice_again.body, alice.body);
    assert_ne!(alice.body, bob.body);

    // The records sit under the caller-scoped keys, with the fingerprint of the canonical
    // request document.
    let canonical = r#"{"body_json":{"a":1,"b":2},"content_type":"application/json","method":"POST","path":"/v1/charges","query":"x=1"}"#;
    let mut ledger = server.client("gw").await;
    for caller in ["Bearer alice", "Bearer bob", ""] {
        let record = ledger
            .lookup(lookup("http", &ledger_key(caller, "k")))
            .await
            .unwrap_or_else(|e| panic!("no record for caller {caller:?}: {e:?}"))
            .into_inner()
            .record
            .unwrap();
        assert_eq!(record.fingerprint, sha256(canonical));
        assert_eq!(record.status, v1::RecordStatus::Succeeded as i32);
        let result = record.result.unwrap();
        assert_eq!(result.code, 201);
        assert_eq!(
            result.metadata.get("location").map(String::as_str),
            Some(match caller {
                "Bearer alice" => "/things/1",
                "Bearer bob" => "/things/2",
                _ => "/things/3",
            })
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_with_another_request_is_422_and_not_forwarded() {
    let (_server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges?x=1", gw.url);
    let first = http.post(&url, Some("r-1"), r#"{"amount":100}"#, &[]).await;
    assert_eq!(first.status, 201);
    let others = [
        (url.clone(), r#"{"amount":999}"#),
        (format!("{}/v1/refunds?x=1", gw.url), r#"{"amount":100}"#),
        (format!("{}/v1/charges?x=2", gw.url), r#"{"amount":100}"#),
    ];
    for (other_url, body) in others {
        let reused = http.post(&other_url, Some("r-1"), body, &[]).await;
        let problem = reused.problem(422, "key-reused");
        // Never the stored body.
        let text = problem.to_string();
        assert!(
            !text.contains("things") && !text.contains("\"n\""),
            "{text}"
        );
    }
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_flight_is_409_with_retry_after_then_replayed() {
    let (_server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/hold", gw.url);
    let first = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url, Some("f-1"), "{}", &[]).await }
    });
    up.arrival().await;
    let busy = http.post(&url, Some("f-1"), "{}", &[]).await;
    busy.problem(409, "in-progress");
    let after: u64 = busy.header("retry-after").unwrap().parse().unwrap();
    assert!(after >= 1, "{after}");
    up.release(1);
    let first = first.await.unwrap();
    assert_eq!(first.status, 201);
    let later = http.post(&url, Some("f-1"), "{}", &[]).await;
    assert!(later.replayed());
    assert_eq!(later.body, first.body);
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_wait_a_duplicate_is_held_until_the_first_answers_then_replayed() {
    let (_server, up, gw, http) = setup(&["--wait", "50s"]).await;
    let url = format!("{}/hold", gw.url);
    let first = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url, Some("w-1"), "{}", &[]).await }
    });
    up.arrival().await;
    let second = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move { http.post(&url, Some("w-1"), "{}", &[]).await }
    });
    // Without --wait it would have answered 409 at once; held, it cannot answer before the
    // first request does.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!second.is_finished(), "the duplicate was not held");
    up.release(1);
    let first = first.await.unwrap();
    let second = second.await.unwrap();
    assert_eq!(first.status, 201);
    assert!(second.replayed(), "{second:?}");
    assert_eq!(second.body, first.body);
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_key_refuses_keyless_requests_of_the_keyed_methods_only() {
    let (_server, up, gw, http) = setup(&["--require-key"]).await;
    let url = format!("{}/v1/charges", gw.url);
    http.post(&url, None, "{}", &[])
        .await
        .problem(400, "key-required");
    assert_eq!(up.calls(), 0);
    let get = http
        .send(http::Request::get(&url).body(Default::default()).unwrap())
        .await;
    assert_eq!(get.status, 201);
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyless_requests_and_other_methods_pass_through_untouched() {
    let (_server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges", gw.url);
    for _ in 0..2 {
        let r = http.post(&url, None, "{}", &[]).await;
        assert_eq!(r.status, 201);
        assert!(!r.replayed());
    }
    for _ in 0..2 {
        let put = http::Request::put(&url)
            .header("idempotency-key", "p-1")
            .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
            .unwrap();
        let r = http.send(put).await;
        assert_eq!(r.status, 201);
        assert!(!r.replayed());
    }
    assert_eq!(up.calls(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_keys_are_400_and_255_visible_characters_are_a_key() {
    let (_server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges", gw.url);
    let too_long = "k".repeat(256);
    for bad in ["", "\"\"", "\"a b\"", "a b", "\"open", too_long.as_str()] {
        http.post(&url, Some(bad), "{}", &[])
            .await
            .problem(400, "invalid-key");
    }
    let two = http::Request::post(&url)
        .header("idempotency-key", "a")
        .header("idempotency-key", "b")
        .body(Default::default())
        .unwrap();
    http.send(two).await.problem(400, "invalid-key");
    assert_eq!(up.calls(), 0);

    let longest: String = (0..255)
        .map(|i| char::from(b'!' + (i % 94) as u8))
        .collect();
    let longest = longest.replace('"', "q").replace('\\', "s");
    let first = http.post(&url, Some(&longest), "{}", &[]).await;
    assert_eq!(first.status, 201, "{first:?}");
    let sf = format!("\"{longest}\"");
    let again = http.post(&url, Some(&sf), "{}", &[]).await;
    assert!(again.replayed(), "{again:?}");
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_clients_get_the_same_semantics() {
    let (_server, up, gw, http) = setup(&[]).await;
    let h2 = Http::h2c();
    let url = format!("{}/v1/charges", gw.url);
    let first = h2.post(&url, Some("h2-1"), r#"{"a":1}"#, &[]).await;
    assert_eq!(first.status, 201, "{first:?}");
    let again = http.post(&url, Some("h2-1"), r#"{"a":1}"#, &[]).await;
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    let h2_again = h2.post(&url, Some("h2-1"), r#"{"a":1}"#, &[]).await;
    assert!(h2_again.replayed());
    assert_eq!(up.calls(), 1);
}

/// 50 concurrent requests of one key: one upstream call; the others are replayed or 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_requests_of_one_key_make_one_upstream_call() {
    let (_server, up, gw, http) = setup(&[]).await;
    let answers = fifty(&http, &format!("{}/slow?ms=300", gw.url)).await;
    assert_eq!(up.calls(), 1);
    let original: Vec<&Resp> = answers
        .iter()
        .filter(|r| r.status == 201 && !r.replayed())
        .collect();
    assert_eq!(original.len(), 1, "{:?}", summary(&answers));
    for r in &answers {
        if r.replayed() {
            assert_eq!(r.body, original[0].body);
        } else if r.status != 201 {
            r.problem(409, "in-progress");
        }
    }
}

/// The same with --wait: every duplicate is held and gets the one response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_requests_with_wait_all_get_the_one_response() {
    let (_server, up, gw, http) = setup(&["--wait", "55s"]).await;
    let answers = fifty(&http, &format!("{}/slow?ms=300", gw.url)).await;
    assert_eq!(up.calls(), 1);
    let replayed = answers.iter().filter(|r| r.replayed()).count();
    assert_eq!(replayed, 49, "{:?}", summary(&answers));
    for r in &answers {
        assert_eq!((r.status, &r.body), (201, &answers[0].body));
    }
}

/// (status, replayed) of each answer, for failure messages.
fn summary(answers: &[Resp]) -> Vec<(u16, bool)> {
    answers.iter().map(|r| (r.status, r.replayed())).collect()
}

async fn fifty(http: &Http, url: &str) -> Vec<Resp> {
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (http, url) = (http.clone(), url.to_owned());
            tokio::spawn(async move { http.post(&url, Some("storm-1"), r#"{"x":1}"#, &[]).await })
        })
        .collect();
    let mut answers = Vec::new();
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_repeated_under_a_new_key_is_refused_by_the_ledgers_intent_guard() {
    // The ledger guards the gateway's namespace: the same request under a made-up key within
    // the window is not forwarded again.
    let server = oncekey_tests::Server::start(&["--intent-guard", "http=refuse/10m"]);
    let up = crate::support::Upstream::start().await;
    let gw = crate::support::Gateway::start(&up.url, &server.grpc, &[]);
    let http = Http::h1();
    let url = format!("{}/v1/charges", gw.url);
    let first = http
        .post(&url, Some("order-9"), r#"{"amount":900}"#, &[])
        .await;
    assert_eq!(first.status, 201, "{first:?}");
    let again = http
        .post(&url, Some("retry-uuid-1"), r#"{"amount":900}"#, &[])
        .await;
    let problem = again.problem(409, "duplicate-intent");
    assert!(
        !problem["detail"].to_string().contains("order-9"),
        "{problem}"
    );
    assert_eq!(up.calls(), 1, "forwarded again under the new key");
    // The first key still replays; another request is another intent.
    assert!(http
        .post(&url, Some("order-9"), r#"{"amount":900}"#, &[])
        .await
        .replayed());
    let other = http
        .post(&url, Some("order-10"), r#"{"amount":901}"#, &[])
        .await;
    assert_eq!((other.status, up.calls()), (201, 2));
}
