//! `oncekey console` over plain HTTP against a real server (the browser stage, `scripts/test
//! console`, drives it in Chromium): sign-in with tokens and their probed scopes, the session
//! cookie's flags and sealing (shared by replicas with one key, refused by others), the CSRF and
//! same-origin checks refusing before the ledger is called, an approval and a purge through the
//! forms, the ledger refusing what a token's scopes do not allow, stored strings escaped, the
//! and the start-up refusals (the agent-safety views: `console_agent_safety.rs`).

mod console_support;
use console_support::*;

#[tokio::test]
async fn operators_sign_in_with_their_tokens_and_act_within_their_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--tokens-file", &tokens_file(dir.path())]);
    let console = Console::start(&server.grpc, &[]);
    let mut ledger = server.client_with_token(BOB).await;
    ledger.claim(gated("c-1")).await.unwrap();
    let key = "c-<script>alert(1)</script>";
    ledger.claim(gated(key)).await.unwrap();

    let mut alice = Browser::new(&console.base);
    let page = alice.get("/").await;
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.headers[LOCATION], "/signin");
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );

    // A wrong token is refused, and nothing is kept.
    let page = alice
        .sign_in(&[("name", "Alice"), ("token", "not-a-token")])
        .await;
    assert_eq!(page.status, StatusCode::UNAUTHORIZED);
    assert!(page.body.contains("did not accept"), "{}", page.body);
    assert!(
        !page.body.contains("not-a-token"),
        "the token is never echoed"
    );

    let page = alice.sign_in(&[("name", "Alice"), ("token", ALICE)]).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let set = page
        .headers
        .get_all(SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    let session = set
        .iter()
        .find(|c| c.starts_with("oncekey_console="))
        .expect("a session cookie");
    assert!(
        session.contains("HttpOnly") && session.contains("SameSite=Strict"),
        "{session}"
    );
    assert!(!session.contains(ALICE), "the cookie is sealed: {session}");

    // Needs attention lists both, the scripted key as text.
    let home = alice.get("/").await;
    assert_eq!(home.status, StatusCode::OK);
    assert!(
        home.body
            .contains("c-&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        home.body
    );
    assert!(
        !home.body.contains("<script>alert"),
        "stored strings are escaped"
    );
    assert!(!home.body.contains(ALICE), "the token never reaches a page");

    // Approve c-1 through the form: the ledger records alice's label.
    let view = alice.get("/record?namespace=payouts.send&key=c-1").await;
    assert!(view.body.contains("id=\"approve\""), "alice may approve");
    assert!(view.body.contains("id=\"purge-button\""), "alice may purge");
    let csrf = hidden(&view.body, "csrf");
    let fingerprint = hidden(&view.body, "fingerprint");
    // Without the CSRF token, or from another origin: refused before the ledger is asked.
    let fields = [
        ("namespace", NS),
        ("key", "c-1"),
        ("fingerprint", fingerprint.as_str()),
        ("note", "ok"),
    ];
    let page = alice.post("/record/approve", &fields).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    let mut with_csrf = fields.to_vec();
    with_csrf.push(("csrf", &csrf));
    let page = alice
        .send(
            Method::POST,
            "/record/approve",
            Some(encode(&with_csrf)),
            Some("http://evil.example"),
        )
        .await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert_eq!(
        status(&record(&server, "c-1").await.unwrap()),
        v1::RecordStatus::AwaitingApproval
    );
    let page = alice.post("/record/approve", &with_csrf).await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    let approved = record(&server, "c-1").await.unwrap();
    assert_eq!(status(&approved), v1::RecordStatus::Approved);
    let approval = approved.approval.unwrap();
    assert_eq!(
        (approval.decided_by.as_str(), approval.note.as_str()),
        ("alice", "ok")
    );

    // Bob's token has `ledger` only: no buttons, and a forged approval is refused by the ledger.
    let mut bob = Browser::signed_in(&console.base, "Bob", ("token", BOB)).await;
    let path = format!("/record?namespace={NS}&key={}", urlencode(key));
    let view = bob.get(&path).await;
    assert_eq!(view.status, StatusCode::OK);
    assert!(!view.body.contains("id=\"approve\"") && !view.body.contains("id=\"purge-button\""));
    let bob_csrf = hidden(&view.body, "csrf");
    let forged = [
        ("namespace", NS),
        ("key", key),
        ("fingerprint", ""),
        ("note", "x"),
        ("csrf", bob_csrf.as_str()),
    ];
    let page = bob.post("/record/approve", &forged).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.body);
    assert!(page.body.contains("MISSING_SCOPE"), "{}", page.body);
    assert_eq!(
        status(&record(&server, key).await.unwrap()),
        v1::RecordStatus::AwaitingApproval
    );
    // Alice's CSRF token in Bob's session is not Bob's.
    let stolen = [
        ("namespace", NS),
        ("key", key),
        ("fingerprint", ""),
        ("note", "x"),
        ("csrf", csrf.as_str()),
    ];
    assert_eq!(
        bob.post("/record/approve", &stolen).await.status,
        StatusCode::FORBIDDEN
    );

    // Purge needs the key typed back.
    let view = alice.get(&path).await;
    let csrf = hidden(&view.body, "csrf");
    let page = alice
        .post(
            "/record/purge",
            &[
                ("namespace", NS),
                ("key", key),
                ("confirm", "c-"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(record(&server, key).await.is_some());
    let page = alice
        .post(
            "/record/purge",
            &[
                ("namespace", NS),
                ("key", key),
                ("confirm", key),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
    assert!(record(&server, key).await.is_none());

    // Signed out, the pages send Alice to sign in again.
    assert_eq!(
        alice.post("/signout", &[("csrf", &csrf)]).await.status,
        StatusCode::SEE_OTHER
    );
    assert_eq!(alice.get("/").await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn replicas_with_one_session_key_share_sessions_and_others_refuse_them() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&["--tokens-file", &tokens_file(dir.path())]);
    let key_file = dir.path().join("session-key");
    std::fs::write(&key_file, format!("{}\n", "5a".repeat(32))).unwrap();
    let key_flag = ["--session-key-file", key_file.to_str().unwrap()];
    let one = Console::start(&server.grpc, &key_flag);
    let two = Console::start(&server.grpc, &key_flag);
    let other = Console::start(&server.grpc, &[]);

    let mut browser = Browser::signed_in(&one.base, "Alice", ("token", ALICE)).await;
    assert_eq!(browser.get("/records").await.status, StatusCode::OK);
    browser.base = two.base.clone();
    assert_eq!(
        browser.get("/records").await.status,
        StatusCode::OK,
        "the other replica reads the session"
    );
    browser.base = other.base.clone();
    assert_eq!(
        browser.get("/records").await.status,
        StatusCode::SEE_OTHER,
        "another key does not"
    );
}

#[test]
fn a_public_listen_address_needs_tls_or_consent() {
    let (code, _, stderr) = run_cli(&["console", "--listen", "0.0.0.0:0"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("--listen") && stderr.contains("--allow-plaintext"),
        "{stderr}"
    );
    let (code, _, stderr) = run_cli(&["console", "--session-key-file", "/nonexistent/key"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("--session-key-file"), "{stderr}");
}

/// One HTTP/1.1 request over TLS (OpenSSL, trusting `ca`): the response head and body.
fn https(addr: &str, ca: &std::path::Path, request: &str) -> String {
    use openssl::ssl::{SslConnector, SslMethod};
    use std::io::{Read, Write};
    let mut connector = SslConnector::builder(SslMethod::tls_client()).unwrap();
    connector.set_ca_file(ca).unwrap();
    connector.set_alpn_protos(b"\x08http/1.1").unwrap();
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let mut tls = connector
        .build()
        .connect("localhost", tcp)
        .expect("TLS handshake");
    tls.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = tls.read_to_string(&mut response);
    response
}

#[test]
fn served_over_tls_the_cookies_are_secure() {
    let dir = tempfile::tempdir().unwrap();
    make_certificates(dir.path());
    let server = Server::start(&[]);
    let (cert, key) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    let console = Console::start(
        &server.grpc,
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let addr = console
        .base
        .strip_prefix("https://")
        .expect(&console.base)
        .to_owned();
    let response = https(
        &addr,
        &dir.path().join("ca.pem"),
        &format!(
            "GET /signin HTTP/1.1\r\nHost: localhost:{}\r\nConnection: close\r\n\r\n",
            addr.rsplit(':').next().unwrap()
        ),
    );
    drop(console);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let cookie = response
        .lines()
        .find(|l| {
            l.to_ascii_lowercase()
                .starts_with("set-cookie: __host-oncekey_console_signin=")
        })
        .unwrap_or_else(|| panic!("no __Host- sign-in cookie: {response}"));
    assert!(
        cookie.contains("Secure") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed() {
    use tokio::io::AsyncReadExt;
    let server = Server::start(&[]);
    let console = Console::start(&server.grpc, &[]);
    let mut idle = tokio::net::TcpStream::connect(console.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    // The head-read limit is 10 s; give a loaded machine room, but not forever.
    let read = tokio::time::timeout(std::time::Duration::from_secs(40), idle.read(&mut buf))
        .await
        .expect("the console closes a silent connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(9),
        "not before its time"
    );
}

#[tokio::test]
async fn a_revoked_token_ends_its_console_session() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens_file(dir.path());
    let server = Server::start(&["--tokens-file", &tokens]);
    let console = Console::start(&server.grpc, &[]);
    let mut browser = Browser::signed_in(&console.base, "Bob", ("token", BOB)).await;
    assert_eq!(browser.get("/records").await.status, StatusCode::OK);
    // Bob's line leaves the tokens file; the server reloads it on SIGHUP.
    let alice_only: String = std::fs::read_to_string(&tokens)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("acme:alice:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&tokens, alice_only).unwrap();
    let ok = Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let page = browser.get("/records").await;
        if page.status == StatusCode::SEE_OTHER {
            assert_eq!(page.headers[LOCATION], "/signin");
            break;
        }
        assert_eq!(page.status, StatusCode::OK);
        assert!(
            std::time::Instant::now() < deadline,
            "the revocation did not end the session"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        browser.cookies.iter().all(|(k, _)| k != "oncekey_console"),
        "the session cookie is cleared"
    );
}

#[tokio::test]
async fn an_idle_session_ends() {
    let server = Server::start(&[]);
    // Session times count whole seconds: 3 s is idle for 2 to 3 s.
    let flags = ["--idle-timeout", "3s", "--session-lifetime", "1h"];
    let console = Console::start(&server.grpc, &flags);
    let mut browser = Browser::signed_in(&console.base, "Ann", ("tenant", "acme")).await;
    let pause = |ms| tokio::time::sleep(std::time::Duration::from_millis(ms));
    // Page views keep it alive past the idle timeout...
    for _ in 0..5 {
        assert_eq!(browser.get("/records").await.status, StatusCode::OK);
        pause(900).await;
    }
    // ...the live refresh does not: refreshed every 0.9 s, the session still ends.
    assert_eq!(browser.get("/attention").await.status, StatusCode::OK);
    for _ in 0..5 {
        pause(900).await;
        browser.get("/attention").await;
    }
    assert_eq!(
        browser.get("/attention").await.status,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(browser.get("/records").await.status, StatusCode::SEE_OTHER);
}
