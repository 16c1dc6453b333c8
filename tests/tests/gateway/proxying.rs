//! What the gateway does with upstream answers and its own limits: 5xx/408/425/429 returned as
//! is and not stored, 502/504 problems for an unreachable or slow upstream, 507 for a response too
//! large to store (returned once), 413 over the request limit, stored final failures as problems,
//! and the proxy headers (hop-by-hop removed, forwarding appended, Host).

use crate::setup;
use crate::support::{ledger_key, sha256, Gateway, Http, Upstream};
use oncekey_api::v1;
use oncekey_tests::{lookup, Server};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_upstream_answers_are_returned_as_is_and_not_stored() {
    let (server, up, gw, http) = setup(&[]).await;
    let mut ledger = server.client("gw").await;
    let mut calls = 0;
    for code in [500, 503, 408, 425, 429] {
        let url = format!("{}/status/{code}", gw.url);
        let key = format!("s-{code}");
        for _ in 0..2 {
            let r = http.post(&url, Some(&key), "{}", &[]).await;
            calls += 1;
            assert_eq!(r.status, code);
            assert!(!r.replayed());
            assert_eq!(&r.body[..], format!("status {code} #{calls}").as_bytes());
        }
        let record = ledger
            .lookup(lookup("http", &ledger_key("", &key)))
            .await
            .unwrap()
            .into_inner()
            .record
            .unwrap();
        assert_eq!(record.status, v1::RecordStatus::Retry as i32, "{code}");
        assert_eq!(record.error.unwrap().code, i32::from(code));
    }
    assert_eq!(up.calls(), calls as usize);
    // A 4xx that is not a "try again" is the answer: stored and replayed.
    let url = format!("{}/status/404", gw.url);
    let first = http.post(&url, Some("s-404"), "{}", &[]).await;
    let again = http.post(&url, Some("s-404"), "{}", &[]).await;
    assert_eq!((first.status, again.status), (404, 404));
    assert!(again.replayed());
    assert_eq!(again.body, first.body);
    assert_eq!(up.calls(), calls as usize + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_upstream_is_502_and_the_key_is_released() {
    let server = Server::start(&[]);
    // Nothing listens there: bind a port, then free it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gw = Gateway::start(&format!("http://127.0.0.1:{port}"), &server.grpc, &[]);
    let http = Http::h1();
    let url = format!("{}/v1/charges", gw.url);
    for _ in 0..2 {
        http.post(&url, Some("u-1"), "{}", &[])
            .await
            .problem(502, "upstream-unreachable");
    }
    let record = server
        .client("gw")
        .await
        .lookup(lookup("http", &ledger_key("", "u-1")))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(record.status, v1::RecordStatus::Retry as i32);
    assert_eq!(record.attempt, 2, "each request acquired the released key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_upstream_is_504_and_the_key_is_released() {
    let (server, up, gw, http) = setup(&["--upstream-timeout", "1s"]).await;
    let url = format!("{}/hold", gw.url);
    http.post(&url, Some("t-1"), "{}", &[])
        .await
        .problem(504, "upstream-timeout");
    assert_eq!(up.calls(), 1);
    let record = server
        .client("gw")
        .await
        .lookup(lookup("http", &ledger_key("", "t-1")))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(record.status, v1::RecordStatus::Retry as i32);
    up.release(1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_ledger_is_503_and_nothing_is_forwarded() {
    let mut server = Server::start(&[]);
    let up = Upstream::start().await;
    let gw = Gateway::start(&up.url, &server.grpc, &[]);
    server.kill9();
    let http = Http::h1();
    let url = format!("{}/v1/charges", gw.url);
    let r = http.post(&url, Some("l-1"), "{}", &[]).await;
    r.problem(503, "ledger-unavailable");
    assert!(r.header("retry-after").is_some());
    assert_eq!(up.calls(), 0, "never upstream unguarded");
    let (code, _) = oncekey_tests::http_get(&gw.admin, "/readyz").await;
    assert_eq!(code, 503);
    // Requests without a key do not need the ledger.
    let keyless = http.post(&url, None, "{}", &[]).await;
    assert_eq!(keyless.status, 201);
    assert_eq!(up.calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_too_large_to_store_is_returned_once_then_507() {
    let (server, up, gw, http) = setup(&["--max-response-bytes", "1000"]).await;
    too_large_once_then_507(&server, &up, &gw, &http).await;
}

/// The same when the ledger's own limit is the smaller one: the gateway learns it from the
/// ledger's TOO_LARGE answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ledgers_result_limit_gives_the_same_507() {
    let server = Server::start(&["--max-result-bytes", "1000"]);
    let up = Upstream::start().await;
    let gw = Gateway::start(&up.url, &server.grpc, &[]);
    too_large_once_then_507(&server, &up, &gw, &Http::h1()).await;
}

async fn too_large_once_then_507(server: &Server, up: &Upstream, gw: &Gateway, http: &Http) {
    let url = format!("{}/big?bytes=5000", gw.url);
    let first = http.post(&url, Some("big-1"), "{}", &[]).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body.len(), 5000, "returned whole, once");
    for _ in 0..2 {
        let later = http.post(&url, Some("big-1"), "{}", &[]).await;
        let body = later.problem(507, "response-too-large");
        assert_eq!(body["detail"], "response too large to store");
    }
    assert_eq!(up.calls(), 1, "never a second upstream call");
    let record = server
        .client("gw")
        .await
        .lookup(lookup("http", &ledger_key("", "big-1")))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(record.status, v1::RecordStatus::Failed as i32);
    let error = record.error.unwrap();
    assert_eq!(
        (error.code, error.message.as_str()),
        (507, "response too large to store")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_limit_is_413() {
    let (_server, up, gw, http) = setup(&["--max-request-bytes", "100"]).await;
    let url = format!("{}/v1/charges", gw.url);
    let body = format!("{{\"pad\":\"{}\"}}", "x".repeat(200));
    http.post(&url, Some("big-req"), &body, &[])
        .await
        .problem(413, "request-too-large");
    assert_eq!(up.calls(), 0);
    let small = http.post(&url, Some("big-req"), "{}", &[]).await;
    assert_eq!(
        small.status, 201,
        "nothing was claimed by the refused request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_failure_is_answered_with_its_code_and_message() {
    let (server, up, gw, http) = setup(&[]).await;
    // Someone (an approver, a reconciler) failed this request's key for good.
    let key = ledger_key("Bearer carol", "final-1");
    let canonical = r#"{"body_json":{"a":1},"content_type":"application/json","method":"POST","path":"/v1/charges","query":""}"#;
    let mut ledger = server.client("gw").await;
    let claimed = ledger
        .claim(v1::ClaimRequest {
            namespace: "http".into(),
            key: key.clone(),
            arguments: Some(v1::claim_request::Arguments::Fingerprint(sha256(canonical))),
            owner: "test".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let token = claimed.lease.unwrap().token;
    ledger
        .fail(v1::FailRequest {
            namespace: "http".into(),
            key,
            lease_token: token,
            error: Some(v1::OperationError {
                code: 403,
                message: "rejected by policy".into(),
                details: b"secret details".to_vec(),
            }),
            disposition: v1::Disposition::Final as i32,
            nothing_ran: false,
        })
        .await
        .unwrap();
    let r = http
        .post(
            &format!("{}/v1/charges", gw.url),
            Some("final-1"),
            r#"{"a":1}"#,
            &[("authorization", "Bearer carol")],
        )
        .await;
    let body = r.problem(403, "failed");
    assert_eq!(body["detail"], "rejected by policy");
    assert!(!body.to_string().contains("secret"), "{body}");
    assert_eq!(up.calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_by_hop_headers_are_removed_and_forwarding_headers_appended() {
    let (_server, up, gw, http) = setup(&[]).await;
    let r = http
        .post(
            &format!("{}/v1/charges", gw.url),
            Some("hdr-1"),
            "{}",
            &[
                ("connection", "x-hop"),
                ("x-hop", "1"),
                ("proxy-authorization", "Basic eDp5"),
                ("x-forwarded-for", "10.1.1.1"),
                ("x-end-to-end", "kept"),
            ],
        )
        .await;
    assert_eq!(r.status, 201);
    let seen = up.last_headers();
    assert!(seen.get("x-hop").is_none(), "{seen:?}");
    assert!(seen.get("proxy-authorization").is_none(), "{seen:?}");
    assert_eq!(seen["x-end-to-end"], "kept");
    assert_eq!(seen["idempotency-key"], "hdr-1");
    assert_eq!(seen["x-forwarded-for"], "10.1.1.1, 127.0.0.1");
    let forwarded = seen["forwarded"].to_str().unwrap();
    assert!(
        forwarded.starts_with("for=127.0.0.1;proto=http"),
        "{forwarded}"
    );
    assert!(seen["via"].to_str().unwrap().contains("oncekey-gateway"));
    assert_eq!(seen["host"], up.url.trim_start_matches("http://"));
    assert_eq!(
        seen["x-forwarded-host"],
        gw.url.trim_start_matches("http://")
    );
    // The upstream's hop-by-hop header does not reach the client; end-to-end ones do.
    assert_eq!(r.header("x-resp-hop"), None, "{r:?}");
    assert_eq!(r.header("x-upstream"), Some("yes"));
    assert!(r.header("via").unwrap().contains("oncekey-gateway"));
}
