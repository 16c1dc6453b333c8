//! The gateway's client connections, like `oncekey serve`'s: beyond `--max-connections` (by
//! default 80 % of the descriptors) new connections are closed at once while open ones keep being
//! served; a connection without a whole request head within `--header-read-timeout` is closed, so
//! is one without a request for `--idle-timeout`; a request in flight is never cut by them.

use crate::raw::{addr, closed_within, exchange, sent, try_exchange};
use crate::setup;
use crate::support::{eventually, Gateway, Http, Upstream, PATIENCE};
use oncekey_tests::Server;
use std::time::Duration;
use tokio::net::TcpStream;

/// Half a request head: the attacker's opening.
const HALF_HEAD: &[u8] = b"POST /v1/charges HTTP/1.1\r\nHost: gw\r\nIdempotency-Key: ";

/// A whole keyed POST on a kept-alive connection.
fn keyed_post(key: &str) -> String {
    format!(
        "POST /v1/charges HTTP/1.1\r\nhost: gw\r\nidempotency-key: {key}\r\n\
         content-type: application/json\r\ncontent-length: 2\r\n\r\n{{}}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_heads_neither_exhaust_descriptors_nor_keep_a_keyed_post_out() {
    let server = Server::start(&[]);
    let up = Upstream::start().await;
    // 256 descriptors: the default limit is 204 connections. No flag: the defaults protect.
    let ledger = ["--server", server.grpc.as_str(), "--tenant", "gw"];
    let gw = Gateway::launch(&up.url, &ledger, &[], Some(256));
    let http = Http::h1();

    // A client connected before the attack.
    let mut kept = TcpStream::connect(addr(&gw.url)).await.unwrap();
    assert_eq!(exchange(&mut kept, &keyed_post("kept-1")).await.0, 201);

    // 300 connections each holding half a request head: more than the descriptors allow.
    let mut attack = Vec::new();
    for _ in 0..300 {
        attack.push(sent(&gw.url, HALF_HEAD).await);
    }
    // The open connection keeps being served at the limit.
    assert_eq!(exchange(&mut kept, &keyed_post("kept-2")).await.0, 201);
    // A new client gets through: at once or, while the attack holds every slot, once its
    // connections' time for their heads has run out. Like a real client it gives up on an
    // attempt after a while and tries again on a new connection.
    let status = eventually("a keyed POST to be served", || {
        let url = gw.url.clone();
        async move {
            try_exchange(&url, &keyed_post("legit-1"), Duration::from_secs(5))
                .await
                .filter(|s| *s == 201)
        }
    })
    .await;
    assert_eq!(status, 201);
    // It was forwarded and recorded: a retry with the key is replayed.
    let replay = http
        .post(
            &format!("{}/v1/charges", gw.url),
            Some("legit-1"),
            "{}",
            &[],
        )
        .await;
    assert!(replay.replayed(), "{replay:?}");
    // Every half head was closed by the gateway (at once beyond the limit, the others after
    // their time ran out); the attacker never closed one.
    for stream in &mut attack {
        assert!(closed_within(stream, PATIENCE).await, "a half head is open");
    }
    assert_eq!(up.calls(), 3);
    assert!(
        gw.stderr().contains("connection limit reached"),
        "{}",
        gw.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_a_request_are_closed_after_their_time_limits() {
    let flags = ["--header-read-timeout", "1s", "--idle-timeout", "2s"];
    let (_server, up, gw, http) = setup(&flags).await;
    // Silent, half a head, half an HTTP/2 preface; and on the admin port, half a head.
    let mut waiting = [
        TcpStream::connect(addr(&gw.url)).await.unwrap(),
        sent(&gw.url, HALF_HEAD).await,
        sent(&gw.url, b"PRI * HTTP/2.0\r\n").await,
        sent(&gw.admin, b"GET /metrics HTTP/1.1\r\n").await,
    ];
    for (i, stream) in waiting.iter_mut().enumerate() {
        assert!(closed_within(stream, PATIENCE).await, "connection {i} open");
    }

    // A kept-alive connection is closed once idle, also with half of a second head.
    let mut idle = TcpStream::connect(addr(&gw.url)).await.unwrap();
    assert_eq!(exchange(&mut idle, &keyed_post("idle-1")).await.0, 201);
    assert!(
        closed_within(&mut idle, PATIENCE).await,
        "idle connection open"
    );
    let mut stalled = TcpStream::connect(addr(&gw.url)).await.unwrap();
    assert_eq!(exchange(&mut stalled, &keyed_post("idle-2")).await.0, 201);
    tokio::io::AsyncWriteExt::write_all(&mut stalled, HALF_HEAD)
        .await
        .unwrap();
    assert!(
        closed_within(&mut stalled, PATIENCE).await,
        "half head open"
    );

    // A request that takes longer than both limits is not cut, over HTTP/1.1 or HTTP/2.
    let slow = format!("{}/slow?ms=3500", gw.url);
    let h1 = http.post(&slow, Some("slow-1"), "{}", &[]).await;
    assert_eq!(h1.status, 201, "{h1:?}");
    let h2 = Http::h2c().post(&slow, Some("slow-2"), "{}", &[]).await;
    assert_eq!(h2.status, 201, "{h2:?}");
    assert_eq!(up.calls(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_max_connections_new_connections_are_closed_at_once() {
    // Time limits far beyond the test: only the connection limit can close anything.
    let flags = [
        "--max-connections",
        "2",
        "--header-read-timeout",
        "1h",
        "--idle-timeout",
        "1h",
    ];
    let (_server, _up, gw, _http) = setup(&flags).await;
    let mut first = TcpStream::connect(addr(&gw.url)).await.unwrap();
    let _second = TcpStream::connect(addr(&gw.url)).await.unwrap();
    assert_eq!(exchange(&mut first, &keyed_post("max-1")).await.0, 201);
    // The third is closed without an answer.
    let mut third = sent(&gw.url, keyed_post("max-2").as_bytes()).await;
    assert!(closed_within(&mut third, PATIENCE).await);
    // The open ones are still served.
    assert_eq!(exchange(&mut first, &keyed_post("max-3")).await.0, 201);
}
