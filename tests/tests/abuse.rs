//! Abuse, end to end against the real binary: oversized, deeply nested, non-UTF-8 and malformed
//! requests, and unary calls without their message, are refused with INVALID_ARGUMENT (never a
//! panic or a bare INTERNAL), other clients keep being served and the process stays up; and 10 000 concurrent KeepAlive streams from one client stay within a stated
//! memory bound (the server's VmRSS).

use oncekey_api::v1::{self, ClaimOutcome};
use oncekey_tests::*;
use prost::bytes::{Buf, BufMut};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::Code;
use tonic_types::StatusExt;

const NS: &str = "email.send";

/// Sends and receives raw bytes, so a test can put anything on the wire (the generated types can
/// hold neither invalid UTF-8 nor malformed protobuf).
#[derive(Clone, Copy, Default)]
struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

async fn raw_call(server: &Server, method: &'static str, body: Vec<u8>) -> tonic::Status {
    let channel = tonic::transport::Endpoint::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(body);
    req.metadata_mut()
        .insert("x-oncekey-tenant", "acme".parse().unwrap());
    match grpc
        .unary(req, PathAndQuery::from_static(method), Raw)
        .await
    {
        Ok(_) => panic!("{method} accepted a bad message"),
        Err(status) => status,
    }
}

/// A call to a unary `method` whose request stream ends before its one message.
async fn call_without_a_message(server: &Server, method: &'static str) -> tonic::Status {
    let channel = tonic::transport::Endpoint::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(tokio_stream::empty::<Vec<u8>>());
    req.metadata_mut()
        .insert("x-oncekey-tenant", "acme".parse().unwrap());
    match grpc
        .client_streaming(req, PathAndQuery::from_static(method), Raw)
        .await
    {
        Ok(_) => panic!("{method} answered a call without a message"),
        Err(status) => status,
    }
}

/// One length-delimited protobuf field.
fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![(number << 3) | 2];
    let mut len = bytes.len();
    loop {
        let byte = (len & 0x7f) as u8;
        len >>= 7;
        if len == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(bytes);
    out
}

fn alive(server: &Server) -> bool {
    std::path::Path::new(&format!("/proc/{}", server.pid())).exists()
}

/// A client on its own connection that claims and completes fresh keys until stopped; counts
/// successes and failures.
fn bystander(
    server: &Server,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(usize, usize)> {
    let url = server.grpc.clone();
    tokio::spawn(async move {
        let mut c = oncekey_client::Client::connect(
            &url,
            oncekey_client::ConnectOptions {
                tenant: Some("bystander".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .ledger();
        let (mut ok, mut failed) = (0, 0);
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            i += 1;
            let key = format!("b-{i}");
            let done = match c.claim(claim(NS, &key, "{}")).await {
                Ok(_) => c
                    .complete(complete(NS, &key, 1, result(200, b"ok")))
                    .await
                    .is_ok(),
                Err(_) => false,
            };
            if done {
                ok += 1
            } else {
                failed += 1
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (ok, failed)
    })
}

#[tokio::test]
async fn bad_messages_are_refused_and_others_keep_being_served() {
    let server = Server::start(&[]);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let other = bystander(&server, stop.clone());
    let mut c = server.client("acme").await;

    // Over the gRPC message limit (about 1.1 MiB by default): refused by the transport's decoder,
    // with the contract's TOO_LARGE naming the request rather than tonic's bare OUT_OF_RANGE; for
    // a unary RPC and for the first message of a stream.
    let huge = format!(r#"{{"a":"{}"}}"#, "x".repeat(3 * 1024 * 1024));
    let e = c.claim(claim(NS, "huge", &huge)).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str(), bad_field(&e).as_str()),
        (Code::InvalidArgument, "TOO_LARGE", "request"),
        "{e:?}"
    );
    let e = c
        .keep_alive(tokio_stream::iter(vec![v1::KeepAliveRequest {
            namespace: NS.into(),
            key: "k".repeat(3 * 1024 * 1024),
            lease_token: 1,
            lease_ttl: None,
        }]))
        .await
        .map(|_| ())
        .unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str()),
        (Code::InvalidArgument, "TOO_LARGE"),
        "{e:?}"
    );
    // Within the message limit but over payload_json's: INVALID_ARGUMENT TOO_LARGE.
    let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(1024 * 1024));
    let e = c.claim(claim(NS, "big", &big)).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e).as_str(), bad_field(&e).as_str()),
        (Code::InvalidArgument, "TOO_LARGE", "payload_json")
    );
    // 10 000 levels of nesting: INVALID_ARGUMENT naming payload_json, no stack overflow.
    for (open, close) in [("[", "]"), (r#"{"a":"#, "}")] {
        let deep = format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
        let e = c.claim(claim(NS, "deep", &deep)).await.unwrap_err();
        assert_eq!(
            (e.code(), reason(&e).as_str(), bad_field(&e).as_str()),
            (Code::InvalidArgument, "INVALID_FIELD", "payload_json")
        );
    }
    // 128 levels is the documented maximum: accepted; 129 is refused.
    for (open, close, key) in [("[", "]", "deep-array"), (r#"{"a":"#, "}", "deep-object")] {
        let at_max = format!("{}1{}", open.repeat(128), close.repeat(128));
        let r = c.claim(claim(NS, key, &at_max)).await.unwrap();
        assert_eq!(outcome(r.get_ref()), ClaimOutcome::Acquired);
        let over = format!("{}1{}", open.repeat(129), close.repeat(129));
        let e = c.claim(claim(NS, "deep", &over)).await.unwrap_err();
        assert_eq!(
            (e.code(), reason(&e).as_str(), bad_field(&e).as_str()),
            (Code::InvalidArgument, "INVALID_FIELD", "payload_json")
        );
    }
    // An error about a payload says what and where, never what the payload holds.
    let e = c
        .claim(claim(NS, "dup", r#"{"card-4111":1,"card-4111":2}"#))
        .await
        .unwrap_err();
    assert_eq!(bad_field(&e), "payload_json");
    assert!(e.message().contains("duplicate"), "{}", e.message());
    let details = format!("{:?}", e.get_details_bad_request());
    assert!(
        !e.message().contains("4111") && !details.contains("4111"),
        "the error echoes the payload: {} {details}",
        e.message()
    );
    // A result body over --max-result-bytes.
    c.claim(claim(NS, "held", "{}")).await.unwrap();
    let e = c
        .complete(complete(
            NS,
            "held",
            1,
            result(200, &vec![0; 1024 * 1024 + 1]),
        ))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "TOO_LARGE");
    // A content type is a short header value: no CR/LF to split a header with, at most 256 bytes.
    for (content_type, want) in [
        ("text/plain\r\nSet-Cookie: a=b".to_owned(), "INVALID_FIELD"),
        ("text/plain\n".to_owned(), "INVALID_FIELD"),
        (format!("application/{}", "x".repeat(250)), "TOO_LARGE"),
    ] {
        let mut r = result(200, b"ok");
        r.content_type = content_type;
        let e = c.complete(complete(NS, "held", 1, r)).await.unwrap_err();
        assert_eq!(
            (e.code(), reason(&e).as_str(), bad_field(&e).as_str()),
            (Code::InvalidArgument, want, "result.content_type")
        );
    }

    // Non-UTF-8 in string fields, and malformed protobuf: refused by decoding, before any handler.
    let json = field(4, b"{}");
    let cases: Vec<(&'static str, Vec<u8>)> = vec![
        (
            "/oncekey.v1.Ledger/Claim",
            [field(1, &[0xff, 0xfe]), field(2, b"k"), json.clone()].concat(),
        ),
        (
            "/oncekey.v1.Ledger/Claim",
            [field(1, b"ns"), field(2, &[b'k', 0xc3]), json.clone()].concat(),
        ),
        (
            "/oncekey.v1.Ledger/Claim",
            [
                field(1, b"ns"),
                field(2, b"k"),
                field(4, &[b'{', 0x80, b'}']),
            ]
            .concat(),
        ),
        (
            "/oncekey.v1.Ledger/Lookup",
            [field(1, b"ns"), field(2, &[0xed, 0xa0, 0x80])].concat(),
        ),
        ("/oncekey.v1.Ledger/Claim", vec![0x0a, 0x7f, b'a']), // length past the end
        ("/oncekey.v1.Ledger/Claim", vec![0xff; 12]),         // varint overflow
        ("/oncekey.v1.Ledger/Complete", vec![0x0f]),          // wire type 7
        ("/oncekey.v1.Ledger/Renew", vec![0x00]),             // field number 0
    ];
    for (method, body) in cases {
        let status = raw_call(&server, method, body.clone()).await;
        // The request never reaches a handler and nothing changes; never a panic or a reset.
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{method} {body:x?}: {status:?}"
        );
        assert_eq!(reason(&status), "INVALID_FIELD", "{status:?}");
        assert_eq!(bad_field(&status), "request", "{status:?}");
    }
    // Nothing was created by any of it.
    for key in ["huge", "big", "deep", "dup", "k", "ns"] {
        assert_eq!(
            c.lookup(lookup(NS, key)).await.unwrap_err().code(),
            Code::NotFound
        );
    }

    stop.store(true, Ordering::Relaxed);
    let (ok, failed) = other.await.unwrap();
    assert!(
        ok > 0 && failed == 0,
        "the other client: {ok} ok, {failed} failed"
    );
    assert!(alive(&server), "the server process is alive");
    let again = c
        .claim(claim(NS, "after", "{}"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&again), ClaimOutcome::Acquired);
    assert!(!server.stderr().contains("panicked"), "{}", server.stderr());
}

fn vm_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A metric's value from the admin endpoint.
fn metric(server: &Server, name: &str) -> f64 {
    let addr = server.admin.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The bound this test holds the server to: RSS growth for 10 000 open KeepAlive streams (each a
/// lease, an HTTP/2 stream and a renewal task) on one connection, in a debug build.
const STREAMS: usize = 10_000;
const RSS_GROWTH_BOUND_MIB: u64 = 256;

#[tokio::test]
async fn ten_thousand_keepalive_streams_stay_within_the_memory_bound() {
    let started = Instant::now();
    // One connection may carry this many streams only when allowed to (default 1024).
    let server = Server::start(&["--max-concurrent-streams", "10000"]);
    let c = server.client("acme").await;
    let baseline = vm_rss_kib(server.pid());

    // 10 000 leases, claimed 500 at a time over the one connection.
    let mut tokens = Vec::with_capacity(STREAMS);
    for chunk in (0..STREAMS).collect::<Vec<_>>().chunks(500) {
        let calls: Vec<_> = chunk
            .iter()
            .map(|i| {
                let mut c = c.clone();
                let key = format!("ka-{i}");
                tokio::spawn(async move {
                    let reply = c.claim(claim(NS, &key, "{}")).await.unwrap().into_inner();
                    (key, reply.lease.unwrap().token)
                })
            })
            .collect();
        for call in calls {
            tokens.push(call.await.unwrap());
        }
    }

    // One KeepAlive stream per lease, all open at once, each waiting for the server's renewals.
    let first_leases = Arc::new(AtomicUsize::new(0));
    let (close_tx, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut streams = Vec::with_capacity(STREAMS);
    for (n, (key, token)) in tokens.into_iter().enumerate() {
        // Opened 500 at a time, each batch answered before the next.
        while first_leases.load(Ordering::Relaxed) + 500 <= n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut c = c.clone();
        let first_leases = first_leases.clone();
        let mut close = close_tx.subscribe();
        streams.push(tokio::spawn(async move {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tx.send(v1::KeepAliveRequest {
                namespace: NS.into(),
                key,
                lease_token: token,
                lease_ttl: Some(ms(60_000)),
            })
            .await
            .unwrap();
            let mut inbound = c
                .keep_alive(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await
                .unwrap()
                .into_inner();
            inbound.message().await.unwrap().expect("the first lease");
            first_leases.fetch_add(1, Ordering::Relaxed);
            let _ = close.recv().await; // keep the stream (and `tx`) open until told
            drop(tx);
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while first_leases.load(Ordering::Relaxed) < STREAMS {
        assert!(
            Instant::now() < deadline,
            "only {} streams opened",
            first_leases.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open = metric(&server, "oncekey_keepalive_streams_open");
    assert_eq!(
        open as usize, STREAMS,
        "the server counts every stream open"
    );
    let loaded = vm_rss_kib(server.pid());
    let growth_mib = loaded.saturating_sub(baseline) / 1024;
    println!(
        "VmRSS: {} MiB idle, {} MiB with {STREAMS} KeepAlive streams (+{growth_mib} MiB, {:.1} KiB a stream)",
        baseline / 1024,
        loaded / 1024,
        loaded.saturating_sub(baseline) as f64 / STREAMS as f64
    );
    assert!(
        growth_mib <= RSS_GROWTH_BOUND_MIB,
        "{STREAMS} streams grew the server by {growth_mib} MiB (bound {RSS_GROWTH_BOUND_MIB} MiB)"
    );

    // Closing them ends the renewals; the server is still fine.
    let _ = close_tx.send(());
    for s in streams {
        s.await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while metric(&server, "oncekey_keepalive_streams_open") > 0.0 {
        assert!(
            Instant::now() < deadline,
            "streams still open on the server"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut c = c;
    let r = c
        .claim(claim(NS, "after", "{}"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&r), ClaimOutcome::Acquired);
    assert!(alive(&server));
    println!("took {:.1?}", started.elapsed());
}

/// A unary call whose body holds no message: tonic refuses it before any handler with a bare
/// INTERNAL ("Missing request message."); the server answers INVALID_ARGUMENT naming the request.
#[tokio::test]
async fn a_unary_call_without_its_message_is_invalid_argument() {
    let server = Server::start(&[]);
    for method in [
        "/oncekey.v1.Ledger/Claim",
        "/oncekey.v1.Ledger/Complete",
        "/oncekey.v1.Ledger/Lookup",
    ] {
        let status = call_without_a_message(&server, method).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{method}: {status:?}");
        assert_eq!(reason(&status), "INVALID_FIELD", "{status:?}");
        assert_eq!(bad_field(&status), "request", "{status:?}");
    }
    assert!(alive(&server), "the server process is alive");
}
