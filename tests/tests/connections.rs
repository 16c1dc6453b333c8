//! Connection limits end to end against the real binary: at the descriptor limit idle connections
//! neither make the server spin nor lock real clients out for good; a connection that never
//! finishes its HTTP/2 preface (or, on the admin port, its request headers) is closed after the
//! 10 s handshake limit; a connection beyond `--max-connections` is closed at once while the open
//! ones keep being served; and HTTP/2 refuses streams beyond `--max-concurrent-streams`.

use oncekey_api::v1::ClaimOutcome;
use oncekey_client::{Client, ConnectOptions};
use oncekey_tests::*;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "conn.test";
/// The client connection preface's magic (RFC 9113 §3.4).
const MAGIC: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Clock ticks per second of /proc/PID/stat (USER_HZ on Linux).
const TICKS_PER_SECOND: u64 = 100;

fn addr(url: &str) -> &str {
    url.trim_start_matches("http://")
}

/// CPU time (user + system) `pid` has used, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    // Fields 14 and 15 of the line; the slice starts at field 3.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The server's share of one core over `span`.
async fn cpu_share(pid: u32, span: Duration) -> f64 {
    let before = cpu_ticks(pid);
    tokio::time::sleep(span).await;
    let used = cpu_ticks(pid) - before;
    used as f64 / (span.as_secs_f64() * TICKS_PER_SECOND as f64)
}

/// Opens `n` TCP connections that send nothing.
async fn idle_connections(url: &str, n: usize) -> Vec<TcpStream> {
    let mut idle = Vec::with_capacity(n);
    for _ in 0..n {
        idle.push(TcpStream::connect(addr(url)).await.expect("connect"));
    }
    idle
}

/// How long until the server closes `stream` (reads whatever it sends meanwhile), at most `limit`.
async fn closed_after(stream: &mut TcpStream, since: Instant, limit: Duration) -> Option<Duration> {
    let mut buf = [0u8; 1024];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return since.elapsed(),
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, read_all).await.ok()
}

/// A Claim of a fresh key on a fresh connection, retried (new connection each time) until it is
/// served or `limit` passes; returns how long that took.
async fn served_within(url: &str, key: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < limit {
        let options = ConnectOptions {
            tenant: Some("real".into()),
            connect_timeout: Some(Duration::from_secs(5)),
            timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        };
        match Client::connect(url, options).await {
            Ok(client) => match client.ledger().claim(claim(NS, key, "{}")).await {
                Ok(r) => {
                    assert_eq!(outcome(r.get_ref()), ClaimOutcome::Acquired);
                    return started.elapsed();
                }
                Err(e) => last = format!("{e:?}"),
            },
            Err(e) => last = format!("{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("a real client was not served within {limit:?}; last error: {last}");
}

/// Waits until the server's log has a line containing `text`, and returns that line.
async fn log_line(server: &Server, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(line) = server.stderr().lines().find(|l| l.contains(text)) {
            return line.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {text:?}:\n{}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The server's CPU use stays far from a spinning core: a correctness check ("not spinning"), not
/// a benchmark. CPU time used does not grow with the machine's load; the fixed server measures
/// well under 1 %, the spinning one (before the fix) measured 34 % of a core on a machine with
/// load 10 on 2 cores, and ~95 % on an idle one.
const NOT_SPINNING: f64 = 0.15;

#[tokio::test]
async fn at_the_descriptor_limit_idle_connections_neither_spin_the_server_nor_lock_clients_out() {
    // With 256 descriptors the default limit is 204 connections: the other 96 of 300 idle ones
    // are closed at once; the 204 are closed when their 10 s for the preface run out.
    let capped = Server::start_with_descriptor_limit(&[], 256);
    let serving = log_line(&capped, "oncekey serving").await;
    assert!(serving.contains("max_connections=204"), "{serving}");
    // And with a limit above the descriptors, accepting fails (EMFILE): the server must wait
    // between tries, not spin on the listening socket.
    let uncapped = Server::start_with_descriptor_limit(&["--max-connections", "10000"], 256);

    for (name, server) in [("capped", &capped), ("uncapped", &uncapped)] {
        let idle = idle_connections(&server.grpc, 300).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let share = cpu_share(server.pid(), Duration::from_secs(3)).await;
        println!(
            "{name}: server CPU {:.1} % of a core with 300 idle connections",
            share * 100.0
        );
        assert!(
            share < NOT_SPINNING,
            "{name}: the server uses {:.0} % of a core with idle connections",
            share * 100.0
        );
        let took = served_within(&server.grpc, name, Duration::from_secs(90)).await;
        println!("{name}: a real client was served after {took:.1?}");
        // Still quiet, and the health endpoint answers.
        let share = cpu_share(server.pid(), Duration::from_secs(2)).await;
        assert!(share < NOT_SPINNING, "{name}: {:.0} %", share * 100.0);
        let (code, _) = http_get(&server.admin, "/healthz").await;
        assert_eq!(code, 200, "{name}");
        drop(idle);
    }
    log_line(&uncapped, "not below the open-files limit").await;
    log_line(&uncapped, "accepting connections fails").await;
    log_line(&capped, "connection limit reached").await;
    assert!(!capped.stderr().contains("panicked") && !uncapped.stderr().contains("panicked"));
}

#[tokio::test]
async fn connections_that_never_finish_their_preface_or_headers_are_closed_after_ten_seconds() {
    let server = Server::start(&[]);
    let started = Instant::now();
    // A real client's connection (it sent its preface) stays.
    let mut real = server.client("real").await;
    // Half a preface, nothing at all, and the magic without the SETTINGS frame after it.
    let mut half = TcpStream::connect(addr(&server.grpc)).await.unwrap();
    half.write_all(&MAGIC[..12]).await.unwrap();
    let mut silent = TcpStream::connect(addr(&server.grpc)).await.unwrap();
    let mut magic_only = TcpStream::connect(addr(&server.grpc)).await.unwrap();
    magic_only.write_all(MAGIC).await.unwrap();
    // On the admin port: half a request line, and an idle keep-alive connection.
    let mut admin_half = TcpStream::connect(addr(&server.admin)).await.unwrap();
    admin_half.write_all(b"GET /healthz HT").await.unwrap();
    let mut admin_idle = TcpStream::connect(addr(&server.admin)).await.unwrap();
    admin_idle
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();

    let limit = Duration::from_secs(60);
    for (name, stream) in [
        ("half a preface", &mut half),
        ("no preface", &mut silent),
        ("magic without SETTINGS", &mut magic_only),
        ("admin: half a request", &mut admin_half),
        ("admin: idle keep-alive", &mut admin_idle),
    ] {
        let after = closed_after(stream, started, limit)
            .await
            .unwrap_or_else(|| panic!("{name}: still open after {limit:?}"));
        println!("{name}: closed after {after:.1?}");
        assert!(
            after >= Duration::from_secs(9),
            "{name}: closed after {after:?}, before its 10 s"
        );
    }
    // The real client's connection, older than 10 s, still serves.
    assert!(started.elapsed() >= Duration::from_secs(10));
    let r = real.claim(claim(NS, "after", "{}")).await.unwrap();
    assert_eq!(outcome(r.get_ref()), ClaimOutcome::Acquired);
}

#[tokio::test]
async fn a_connection_beyond_max_connections_is_closed_at_once_and_open_ones_keep_being_served() {
    let server = Server::start(&["--max-connections", "2"]);
    let mut first = server.client("a").await;
    let mut second = server.client("b").await;
    first.claim(claim(NS, "1", "{}")).await.unwrap();
    second.claim(claim(NS, "2", "{}")).await.unwrap();

    let started = Instant::now();
    let mut third = TcpStream::connect(addr(&server.grpc)).await.unwrap();
    let _ = third.write_all(MAGIC).await;
    let after = closed_after(&mut third, started, Duration::from_secs(60))
        .await
        .expect("the connection over the limit is closed");
    assert!(
        after < Duration::from_secs(5),
        "closed only after {after:?}: by the preface timeout, not at once"
    );
    // The two open connections keep being served.
    first.claim(claim(NS, "1b", "{}")).await.unwrap();
    second.claim(claim(NS, "2b", "{}")).await.unwrap();
    // One closes: a new connection is served again.
    drop(first);
    served_within(&server.grpc, "3", Duration::from_secs(30)).await;

    // The admin port has its own limit (32): the 33rd connection is closed at once; once the
    // idle ones go, the port answers again.
    let idle = idle_connections(&server.admin, 32).await;
    let started = Instant::now();
    let mut over = TcpStream::connect(addr(&server.admin)).await.unwrap();
    let _ = over
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let after = closed_after(&mut over, started, Duration::from_secs(60))
        .await
        .expect("the admin connection over the limit is closed");
    assert!(after < Duration::from_secs(5), "closed after {after:?}");
    drop(idle);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut s = TcpStream::connect(addr(&server.admin)).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        let _ = s.read_to_string(&mut text).await;
        if text.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "the admin port stays closed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// An HPACK string literal (no Huffman coding); `s` is shorter than 127 bytes.
fn hpack_string(s: &str) -> Vec<u8> {
    let mut out = vec![s.len() as u8];
    out.extend(s.as_bytes());
    out
}

/// The header block of a gRPC request to `path` (HPACK, static table and literals only).
fn request_headers(path: &str) -> Vec<u8> {
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.push(0x04); // :path, literal value
    block.extend(hpack_string(path));
    block.push(0x01); // :authority, literal value
    block.extend(hpack_string("localhost"));
    block.extend([0x0f, 0x10]); // content-type (static index 31), literal value
    block.extend(hpack_string("application/grpc"));
    block.push(0x00); // te: trailers, literal name and value
    block.extend(hpack_string("te"));
    block.extend(hpack_string("trailers"));
    block
}

/// Reads one frame: (type, flags, stream, payload).
async fn read_frame(stream: &mut TcpStream) -> (u8, u8, u32, Vec<u8>) {
    let mut header = [0u8; 9];
    stream.read_exact(&mut header).await.expect("a frame");
    let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
    let id = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).await.expect("a payload");
    (header[3], header[4], id, payload)
}

const SETTINGS: u8 = 0x4;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const GOAWAY: u8 = 0x7;
const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const REFUSED_STREAM: u32 = 0x7;

#[tokio::test]
async fn streams_beyond_max_concurrent_streams_are_refused_by_http2() {
    let server = Server::start(&["--max-concurrent-streams", "4"]);
    // A client that ignores the advertised limit (honest HTTP/2 clients queue instead): five
    // requests at once on one connection, none sending its body, so the first four stay open.
    let mut h2 = TcpStream::connect(addr(&server.grpc)).await.unwrap();
    h2.write_all(MAGIC).await.unwrap();
    h2.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    let advertised = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let (kind, flags, _, payload) = read_frame(&mut h2).await;
            if kind == SETTINGS && flags & 1 == 0 {
                return payload
                    .chunks(6)
                    .find(|s| u16::from_be_bytes([s[0], s[1]]) == SETTINGS_MAX_CONCURRENT_STREAMS)
                    .map(|s| u32::from_be_bytes([s[2], s[3], s[4], s[5]]));
            }
        }
    })
    .await
    .expect("the server's SETTINGS");
    assert_eq!(advertised, Some(4), "SETTINGS_MAX_CONCURRENT_STREAMS");
    h2.write_all(&frame(SETTINGS, 1, 0, &[])).await.unwrap(); // ACK
    let block = request_headers("/grpc.health.v1.Health/Check");
    for id in [1u32, 3, 5, 7, 9] {
        h2.write_all(&frame(HEADERS, 0x4, id, &block))
            .await
            .unwrap(); // END_HEADERS
    }
    let refused = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let (kind, _, id, payload) = read_frame(&mut h2).await;
            assert_ne!(kind, GOAWAY, "the connection was closed: {payload:x?}");
            if kind == RST_STREAM {
                let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                return (id, code);
            }
            assert!(kind != HEADERS, "stream {id} was answered");
        }
    })
    .await
    .expect("a stream reset");
    assert_eq!(
        refused,
        (9, REFUSED_STREAM),
        "the fifth stream is refused (RST_STREAM REFUSED_STREAM)"
    );
    // The connection is still up, and other clients are served.
    h2.write_all(&frame(0x6, 0, 0, &[0; 8])).await.unwrap(); // PING
    let pong = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let (kind, flags, _, _) = read_frame(&mut h2).await;
            if kind == 0x6 && flags & 1 == 1 {
                return;
            }
        }
    })
    .await;
    assert!(pong.is_ok(), "no PING answer: the connection is gone");
    let mut other = server.client("other").await;
    let r = other.claim(claim(NS, "other", "{}")).await.unwrap();
    assert_eq!(outcome(r.get_ref()), ClaimOutcome::Acquired);
}
