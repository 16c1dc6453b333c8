//! Ways around the gateway's rules that an attacker or a sloppy client could take, each closed:
//! a short key that spells a long key's hash, a keyed method in another letter case, a caller
//! header the upstream never sees (`Connection: authorization`), and a ledger token without the
//! `ledger` scope (which `/readyz` and the 503 must name).

use crate::setup;
use crate::support::{ledger_key, Gateway, Http, Upstream};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::Full;
use oncekey_api::v1;
use oncekey_tests::{http_get, lookup, Server};
use sha2::{Digest, Sha256};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_keys_hash_spelled_as_a_short_key_is_another_key() {
    let (server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges", gw.url);
    let long = "L".repeat(240);
    let first = http.post(&url, Some(&long), "{}", &[]).await;
    assert_eq!(first.status, 201, "{first:?}");
    let digest = hex::encode(Sha256::digest(long.as_bytes()));
    for short in [
        format!("sha256-{digest}"),
        format!("sha256:{digest}"),
        digest.clone(),
    ] {
        let r = http.post(&url, Some(&short), "{}", &[]).await;
        assert_eq!(r.status, 201, "{short}: {r:?}");
        assert!(
            !r.replayed(),
            "{short} answered with the long key's response"
        );
    }
    assert_eq!(up.calls(), 4);
    // The long key is stored as SCOPE#sha256:HEX.
    let scope = &hex::encode(Sha256::digest(b""))[..16];
    let record = server
        .client("gw")
        .await
        .lookup(lookup("http", &format!("{scope}#sha256:{digest}")))
        .await
        .expect("the long key's record")
        .into_inner()
        .record
        .unwrap();
    assert_eq!(record.status, v1::RecordStatus::Succeeded as i32);
    assert!(http.post(&url, Some(&long), "{}", &[]).await.replayed());
}

fn with_method(method: &[u8], url: &str, key: Option<&str>) -> Request<Full<Bytes>> {
    let mut b = Request::builder()
        .method(Method::from_bytes(method).unwrap())
        .uri(url)
        .header("content-type", "application/json");
    if let Some(key) = key {
        b = b.header("idempotency-key", key);
    }
    b.body(Full::new(Bytes::from_static(b"{}"))).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyed_method_in_another_letter_case_is_refused() {
    let (_server, up, gw, http) = setup(&["--require-key"]).await;
    let url = format!("{}/v1/charges", gw.url);
    // Without a key: not let through around --require-key.
    for method in [&b"post"[..], b"Post", b"patch"] {
        http.send(with_method(method, &url, None))
            .await
            .problem(400, "method-case");
    }
    // With a key, twice: never forwarded (an upstream that upper-cases would run it twice).
    for _ in 0..2 {
        http.send(with_method(b"post", &url, Some("case-1")))
            .await
            .problem(400, "method-case");
    }
    assert_eq!(up.calls(), 0);
    // Methods that are not keyed pass through in any case; the keyed ones work as spelled.
    let get = http.send(with_method(b"get", &url, None)).await;
    assert_eq!(get.status, 201, "{get:?}");
    let post = http.send(with_method(b"POST", &url, Some("case-1"))).await;
    assert_eq!((post.status, post.replayed()), (201, false));
    assert_eq!(up.calls(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_scope_is_the_one_the_upstream_sees() {
    let (server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges", gw.url);
    let alice = ("authorization", "Bearer alice");
    // `Connection: authorization` makes the header hop-by-hop: the upstream never sees it.
    let stripped = http
        .post(
            &url,
            Some("c-1"),
            "{}",
            &[alice, ("connection", "authorization")],
        )
        .await;
    assert_eq!(stripped.status, 201, "{stripped:?}");
    assert!(!up.last_headers().contains_key("authorization"));
    // So the response was made for a caller without credentials, and is stored as theirs.
    let record = server
        .client("gw")
        .await
        .lookup(lookup("http", &ledger_key("", "c-1")))
        .await
        .expect("stored under the scope of a caller without Authorization")
        .into_inner()
        .record
        .unwrap();
    assert_eq!(record.status, v1::RecordStatus::Succeeded as i32);
    // Alice's own request with the key is hers; an anonymous retry gets the stored one.
    let mine = http.post(&url, Some("c-1"), "{}", &[alice]).await;
    assert!(!mine.replayed(), "{mine:?}");
    assert_eq!(up.calls(), 2);
    let anonymous = http.post(&url, Some("c-1"), "{}", &[]).await;
    assert!(anonymous.replayed());
    assert_eq!(anonymous.body, stripped.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_the_ledger_scope_is_not_ready_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let hash = |t: &str| hex::encode(Sha256::digest(t.as_bytes()));
    std::fs::write(
        &tokens,
        format!(
            "gw:approver:{}:approve\ngw:{}\n",
            hash("tok-approve-only"),
            hash("tok-ledger")
        ),
    )
    .unwrap();
    let server = Server::start(&["--tokens-file", tokens.to_str().unwrap()]);
    let up = Upstream::start().await;
    let http = Http::h1();

    let ledger = [
        "--server",
        server.grpc.as_str(),
        "--token",
        "tok-approve-only",
    ];
    let gw = Gateway::launch(&up.url, &ledger, &[], None);
    let (code, body) = http_get(&gw.admin, "/readyz").await;
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("`ledger` scope"), "{body}");
    let url = format!("{}/v1/charges", gw.url);
    let refused = http.post(&url, Some("scope-1"), "{}", &[]).await;
    let detail = refused.problem(503, "ledger-unavailable")["detail"].to_string();
    assert!(detail.contains("`ledger` scope"), "{detail}");
    assert!(!detail.contains("cannot be reached"), "{detail}");
    assert_eq!(up.calls(), 0);

    let ledger = ["--server", server.grpc.as_str(), "--token", "tok-ledger"];
    let gw = Gateway::launch(&up.url, &ledger, &[], None);
    assert_eq!(http_get(&gw.admin, "/readyz").await.0, 200);
    let url = format!("{}/v1/charges", gw.url);
    let served = http.post(&url, Some("scope-1"), "{}", &[]).await;
    assert_eq!(served.status, 201, "{served:?}");
}

/// Two amounts a double cannot tell apart would share a fingerprint: a JSON body with such a
/// number is refused, naming its path, and never forwarded; sent as a string it is a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_number_a_double_cannot_hold_is_refused_and_not_forwarded() {
    let (_server, up, gw, http) = setup(&[]).await;
    let url = format!("{}/v1/charges", gw.url);
    for body in [
        r#"{"amount":9007199254740993}"#,
        r#"{"amount":9007199254740992}"#,
    ] {
        let r = http.post(&url, Some("order-1"), body, &[]).await;
        let problem = r.problem(400, "inexact-number");
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains("body_json.$.amount"), "{detail}");
        assert!(detail.contains("send it as a string"), "{detail}");
    }
    let r = http
        .post(
            &url,
            Some("order-2"),
            r#"{"rate":0.1000000000000000055511151231257827}"#,
            &[],
        )
        .await;
    r.problem(400, "inexact-number");
    assert_eq!(up.calls(), 0, "nothing was forwarded");
    let r = http
        .post(
            &url,
            Some("order-1"),
            r#"{"amount":"9007199254740993"}"#,
            &[],
        )
        .await;
    assert_eq!(r.status, 201, "{r:?}");
    assert_eq!(up.calls(), 1);
    let other = http
        .post(
            &url,
            Some("order-1"),
            r#"{"amount":"9007199254740992"}"#,
            &[],
        )
        .await;
    other.problem(422, "key-reused");
}
