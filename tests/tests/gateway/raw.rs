//! Byte-level peers of the gateway, for what a well-behaved HTTP library cannot do: an upstream
//! that breaks off in the ways real ones do (never answers, resets the connection, closes it
//! without an answer, cuts its body short, stalls in its body, switches protocols), and a client
//! that sends half a request head and waits.

use crate::support::PATIENCE;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP server speaking just enough HTTP/1.1 to misbehave. It reads a whole request, counts it,
/// and by the path:
/// - `/hang`: never answers (holds the connection open);
/// - `/reset`: resets the connection (RST) without a byte;
/// - `/close`: closes the connection without a byte;
/// - `/cut`: a 200 head announcing 100 bytes, 7 of them, then closes;
/// - `/stall`: a 200 head announcing 100 bytes, 7 of them, then holds the connection open;
/// - `/upgrade`: `101 Switching Protocols`, then closes after a second;
/// - anything else: 200 `ok`.
pub struct RawUpstream {
    /// `http://ADDR`.
    pub url: String,
    calls: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl RawUpstream {
    /// Starts the server on a free port.
    pub async fn start() -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let calls = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn({
            let calls = calls.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(misbehave(stream, calls.clone()));
                }
            }
        });
        RawUpstream { url, calls, task }
    }

    /// How many whole requests arrived.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Drop for RawUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const PARTIAL_200: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 100\r\n\r\npartial";

async fn misbehave(mut stream: TcpStream, calls: Arc<AtomicUsize>) {
    let Some(path) = read_request(&mut stream).await else {
        return;
    };
    calls.fetch_add(1, Ordering::SeqCst);
    let hold = || tokio::time::sleep(PATIENCE * 2);
    match path.as_str() {
        "/hang" => hold().await,
        "/reset" => {
            let _ = stream.set_zero_linger();
        }
        "/close" => {}
        "/cut" => {
            let _ = stream.write_all(PARTIAL_200).await;
        }
        "/stall" => {
            let _ = stream.write_all(PARTIAL_200).await;
            hold().await;
        }
        "/upgrade" => {
            let _ = stream
                .write_all(b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: x-test\r\n\r\n")
                .await;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        _ => {
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                .await;
        }
    }
}

/// Reads one request (head and `content-length` body); its path, or `None` if the connection
/// ended first.
async fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let path = head
        .split_whitespace()
        .nth(1)?
        .split('?')
        .next()?
        .to_owned();
    Some(path)
}

/// `ADDR` of an `http://ADDR` URL.
pub fn addr(url: &str) -> &str {
    url.trim_start_matches("http://")
}

/// True when the peer closes `stream` within `limit` (whatever it sends before).
pub async fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let closed = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, closed).await.is_ok()
}

/// A connection to `url` that has sent `bytes` (e.g. half a request head) and waits.
pub async fn sent(url: &str, bytes: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr(url)).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    stream
}

/// Sends a whole HTTP/1.1 `request` on a new connection to `url` and reads the answer's status,
/// as a client that gives up after `limit` does; `None` when the connection is closed first or the
/// limit passes.
pub async fn try_exchange(url: &str, request: &str, limit: Duration) -> Option<u16> {
    let attempt = async {
        let mut stream = TcpStream::connect(addr(url)).await.ok()?;
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(2).any(|w| w == b"\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let line = String::from_utf8_lossy(&buf).into_owned();
        line.split_whitespace().nth(1)?.parse().ok()
    };
    tokio::time::timeout(limit, attempt).await.ok().flatten()
}

/// Sends a whole HTTP/1.1 `request` on `stream` (kept alive) and reads the answer's status
/// and body (`content-length` framed).
pub async fn exchange(stream: &mut TcpStream, request: &str) -> (u16, String) {
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let read = async {
        loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).to_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if buf.len() >= i + 4 + length {
                    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
                    let body = String::from_utf8_lossy(&buf[i + 4..i + 4 + length]).into_owned();
                    return (status, body);
                }
            }
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the connection closed before the whole answer");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .expect("an answer in time")
}
