//! A CQL-aware TCP fault proxy between `oncekey serve` and a node, run inside the test process.
//!
//! It forwards bytes both ways and parses CQL v4 frame headers: it learns which prepared
//! statements are conditional (`… IF …`) from PREPARE requests and their RESULT Prepared answers,
//! marks EXECUTEs of those, and applies the current [`Fault`] to the node's answer to them: drop it
//! and cut the connection (the LWT ran, the driver never hears: an unknown outcome), delay it, or
//! replace it with an `Unavailable` error (the LWT ran, the driver hears it did not); or it runs
//! one conditional write twice, answering with the second run (the condition failed on the row
//! the first run wrote).
//! For a single node the driver needs no address translation: it learns the node's address from
//! `system.local`'s `rpc_address` (127.0.0.1) with the port of its contact point, i.e. this proxy.
//! A group of proxies in front of a cluster's nodes needs the driver's address translation.
//!
//! Why not `scylla-proxy`: it pins scylla-cql 0.x/1.x versions that differ from the workspace's
//! driver, and mapping its per-node rules onto a single-node Cassandra adds nothing this small
//! proxy lacks for dropping and delaying LWT answers.

use super::Rng;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

const OP_RESULT: u8 = 0x08;
const OP_PREPARE: u8 = 0x09;
const OP_EXECUTE: u8 = 0x0A;
const OP_BATCH: u8 = 0x0D;
const RESULT_PREPARED: i32 = 0x0004;

/// What happens to the node's answers to conditional writes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Forward everything.
    None,
    /// With probability `p`, swallow the answer and close the connection.
    DropAndClose(f64),
    /// With probability `p`, hold the answer for up to `max_ms`.
    Delay(f64, u64),
    /// Replace the next answer (of any proxy of a group) with an `Unavailable` error, though the
    /// write ran: what a coordinator may answer when a Paxos round it gave up on had its proposal
    /// accepted. Then back to `None`.
    UnavailableOnce,
    /// Run the next conditional write whose statement starts with the given text (`"INSERT"`,
    /// `"UPDATE"`) twice: an identical copy first, whose answer is swallowed, then the request
    /// itself, whose answer (the condition failed, on the row the copy wrote) goes back. What
    /// Cassandra answers when its Paxos round, retried under contention, completes the write's own
    /// accepted proposal before evaluating the condition. Then back to `None`.
    DuplicateOnce(&'static str),
}

/// What the proxy did.
#[derive(Debug, Default)]
pub struct ProxyStats {
    /// Answers to conditional writes seen.
    pub lwt_answers: AtomicU64,
    /// Of those, dropped with the connection.
    pub dropped: AtomicU64,
    /// Of those, delayed.
    pub delayed: AtomicU64,
    /// Of those, replaced by an `Unavailable` error.
    pub forged: AtomicU64,
    /// Conditional writes sent twice.
    pub duplicated: AtomicU64,
    /// Client connections accepted.
    pub connections: AtomicU64,
}

struct Shared {
    upstream: SocketAddr,
    fault: Arc<Mutex<Fault>>,
    /// Prepared ids of conditional statements → their text.
    conditional: Mutex<HashMap<Vec<u8>, String>>,
    rng: Mutex<Rng>,
    stats: ProxyStats,
}

/// A running proxy (stops with the test's runtime).
pub struct CqlProxy {
    /// The address to give `--cql-nodes`.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl CqlProxy {
    /// Listens on a free local port and forwards to `upstream` (`host:port`).
    pub async fn start(upstream: &str, seed: u64) -> CqlProxy {
        Self::start_sharing(upstream, seed, Arc::new(Mutex::new(Fault::None))).await
    }

    /// One proxy per node of a cluster (`upstreams`), all under one fault: setting it on any
    /// sets it for all, and `Fault::UnavailableOnce` forges one answer in the whole group.
    pub async fn start_group(upstreams: &[&str], seed: u64) -> Vec<CqlProxy> {
        let fault = Arc::new(Mutex::new(Fault::None));
        let mut group = Vec::new();
        for (i, upstream) in upstreams.iter().enumerate() {
            group.push(Self::start_sharing(upstream, seed ^ i as u64, fault.clone()).await);
        }
        group
    }

    async fn start_sharing(upstream: &str, seed: u64, fault: Arc<Mutex<Fault>>) -> CqlProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            upstream: upstream.parse().expect("upstream host:port"),
            fault,
            conditional: Mutex::default(),
            rng: Mutex::new(Rng::new(seed)),
            stats: ProxyStats::default(),
        });
        let s = shared.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                s.stats.connections.fetch_add(1, Ordering::Relaxed);
                let s = s.clone();
                tokio::spawn(async move {
                    if let Ok(node) = TcpStream::connect(s.upstream).await {
                        let _ = client.set_nodelay(true);
                        let _ = node.set_nodelay(true);
                        connection(s, client, node).await;
                    }
                });
            }
        });
        CqlProxy { addr, shared }
    }

    /// Sets the fault for answers to conditional writes from now on.
    pub fn set(&self, fault: Fault) {
        *self.shared.fault.lock().unwrap() = fault;
    }

    /// What the proxy did so far.
    pub fn stats(&self) -> &ProxyStats {
        &self.shared.stats
    }
}

/// Per connection: stream id → the PREPARE's query if it was conditional; stream ids of
/// conditional EXECUTEs awaiting their answer; the wake-up of a request held until its swallowed
/// copy was answered.
#[derive(Default)]
struct Inflight {
    prepares: HashMap<i16, Option<String>>,
    lwts: HashSet<i16>,
    copy_answered: Option<tokio::sync::oneshot::Sender<()>>,
}

/// The stream id of a swallowed copy (the driver allocates its ids from 0 up).
const COPY_STREAM: i16 = 0x7f00;

async fn connection(shared: Arc<Shared>, client: TcpStream, node: TcpStream) {
    let (client_r, client_w) = client.into_split();
    let (node_r, node_w) = node.into_split();
    let inflight = Arc::new(Mutex::new(Inflight::default()));
    let up = tokio::spawn(requests(shared.clone(), client_r, node_w, inflight.clone()));
    answers(shared, node_r, client_w, inflight).await;
    up.abort();
}

async fn read_frame(r: &mut OwnedReadHalf) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut header = vec![0u8; 9];
    r.read_exact(&mut header).await.ok()?;
    let len = u32::from_be_bytes(header[5..9].try_into().unwrap()) as usize;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).await.ok()?;
    Some((header, body))
}

fn stream_id(header: &[u8]) -> i16 {
    i16::from_be_bytes([header[2], header[3]])
}

/// `[short bytes]` at the start of `b`.
/// The prepared id of a BATCH's first statement: `[byte] type`, `[short] n`, then per statement
/// `[byte] kind` (1: prepared) and `[short bytes] id`.
fn batch_first_id(b: &[u8]) -> Option<&[u8]> {
    if *b.get(3)? != 1 {
        return None;
    }
    short_bytes(b.get(4..)?)
}

fn short_bytes(b: &[u8]) -> Option<&[u8]> {
    let n = u16::from_be_bytes(b.get(0..2)?.try_into().ok()?) as usize;
    b.get(2..2 + n)
}

async fn requests(
    shared: Arc<Shared>,
    mut client: OwnedReadHalf,
    mut node: OwnedWriteHalf,
    inflight: Arc<Mutex<Inflight>>,
) {
    while let Some((header, body)) = read_frame(&mut client).await {
        assert_eq!(header[0] & 0x7f, 4, "the proxy speaks CQL protocol v4 only");
        assert_eq!(
            header[1] & 0x01,
            0,
            "the proxy cannot read compressed frames"
        );
        let stream = stream_id(&header);
        match header[4] {
            OP_PREPARE => {
                // [long string] query
                let n = body
                    .get(0..4)
                    .map_or(0, |b| u32::from_be_bytes(b.try_into().unwrap()) as usize);
                let query = String::from_utf8_lossy(body.get(4..4 + n).unwrap_or_default());
                let conditional = query.contains(" IF ").then(|| query.into_owned());
                inflight
                    .lock()
                    .unwrap()
                    .prepares
                    .insert(stream, conditional);
            }
            op @ (OP_EXECUTE | OP_BATCH) => {
                // A batch is conditional when its first statement is (the store's batches are
                // one conditional insert and updates of the same row).
                let id = if op == OP_EXECUTE {
                    short_bytes(&body)
                } else {
                    batch_first_id(&body)
                };
                let query = id.and_then(|id| shared.conditional.lock().unwrap().get(id).cloned());
                if let Some(query) = query {
                    inflight.lock().unwrap().lwts.insert(stream);
                    let duplicate = {
                        let mut fault = shared.fault.lock().unwrap();
                        match *fault {
                            Fault::DuplicateOnce(prefix) if query.starts_with(prefix) => {
                                *fault = Fault::None;
                                true
                            }
                            _ => false,
                        }
                    };
                    if duplicate {
                        shared.stats.duplicated.fetch_add(1, Ordering::Relaxed);
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        inflight.lock().unwrap().copy_answered = Some(tx);
                        let mut copy = header.clone();
                        copy[2..4].copy_from_slice(&COPY_STREAM.to_be_bytes());
                        if node.write_all(&copy).await.is_err()
                            || node.write_all(&body).await.is_err()
                        {
                            return;
                        }
                        let _ = rx.await;
                    }
                }
            }
            _ => {}
        }
        if node.write_all(&header).await.is_err() || node.write_all(&body).await.is_err() {
            return;
        }
    }
}

async fn answers(
    shared: Arc<Shared>,
    mut node: OwnedReadHalf,
    mut client: OwnedWriteHalf,
    inflight: Arc<Mutex<Inflight>>,
) {
    while let Some((header, body)) = read_frame(&mut node).await {
        let stream = stream_id(&header);
        if stream == COPY_STREAM {
            // The answer to a copy: swallowed; the request itself may go now.
            if let Some(tx) = inflight.lock().unwrap().copy_answered.take() {
                let _ = tx.send(());
            }
            continue;
        }
        let (prepare, lwt) = {
            let mut i = inflight.lock().unwrap();
            (i.prepares.remove(&stream), i.lwts.remove(&stream))
        };
        if let (Some(Some(query)), OP_RESULT) = (prepare, header[4]) {
            if let Some(id) = prepared_id(header[1], &body) {
                shared.conditional.lock().unwrap().insert(id, query);
            }
        }
        if lwt {
            shared.stats.lwt_answers.fetch_add(1, Ordering::Relaxed);
            let fault = {
                let mut current = shared.fault.lock().unwrap();
                let fault = *current;
                if fault == Fault::UnavailableOnce {
                    *current = Fault::None;
                }
                fault
            };
            let (hit, delay) = {
                let mut rng = shared.rng.lock().unwrap();
                match fault {
                    Fault::None => (false, 0),
                    Fault::UnavailableOnce => (true, 0),
                    Fault::DuplicateOnce(_) => (false, 0),
                    Fault::DropAndClose(p) | Fault::Delay(p, _) if !rng.chance(p) => (false, 0),
                    Fault::DropAndClose(_) => (true, 0),
                    Fault::Delay(_, max) => (true, rng.range(1, max)),
                }
            };
            match fault {
                Fault::DropAndClose(_) if hit => {
                    shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    let _ = client.shutdown().await;
                    return;
                }
                Fault::Delay(..) if hit => {
                    shared.stats.delayed.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(delay)).await;
                }
                Fault::UnavailableOnce => {
                    shared.stats.forged.fetch_add(1, Ordering::Relaxed);
                    let (header, body) = unavailable(&header);
                    if client.write_all(&header).await.is_err()
                        || client.write_all(&body).await.is_err()
                    {
                        return;
                    }
                    continue;
                }
                _ => {}
            }
        }
        if client.write_all(&header).await.is_err() || client.write_all(&body).await.is_err() {
            return;
        }
    }
    let _ = client.shutdown().await;
}

/// An ERROR frame answering the request of `header`: Unavailable at QUORUM, 2 required, 1 alive.
fn unavailable(header: &[u8]) -> (Vec<u8>, Vec<u8>) {
    const OP_ERROR: u8 = 0x00;
    const UNAVAILABLE: i32 = 0x1000;
    const QUORUM: u16 = 0x0004;
    let message = b"Cannot achieve consistency level QUORUM (forged by the test proxy)";
    let mut body = UNAVAILABLE.to_be_bytes().to_vec();
    body.extend((message.len() as u16).to_be_bytes());
    body.extend(message);
    body.extend(QUORUM.to_be_bytes());
    body.extend(2i32.to_be_bytes());
    body.extend(1i32.to_be_bytes());
    let mut out = vec![0x84, 0x00, header[2], header[3], OP_ERROR];
    out.extend((body.len() as u32).to_be_bytes());
    (out, body)
}

/// The id of a RESULT Prepared body, skipping the tracing id and warnings the flags announce.
fn prepared_id(flags: u8, body: &[u8]) -> Option<Vec<u8>> {
    let mut b = body;
    if flags & 0x02 != 0 {
        b = b.get(16..)?; // tracing id
    }
    if flags & 0x08 != 0 {
        // [string list] warnings
        let n = u16::from_be_bytes(b.get(0..2)?.try_into().ok()?);
        b = b.get(2..)?;
        for _ in 0..n {
            let len = u16::from_be_bytes(b.get(0..2)?.try_into().ok()?) as usize;
            b = b.get(2 + len..)?;
        }
    }
    if flags & 0x04 != 0 {
        return None; // custom payloads: never sent to this driver
    }
    let kind = i32::from_be_bytes(b.get(0..4)?.try_into().ok()?);
    if kind != RESULT_PREPARED {
        return None;
    }
    short_bytes(&b[4..]).map(<[u8]>::to_vec)
}
