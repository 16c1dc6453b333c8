//! KeepAlive streams through the API layer over an engine on the embedded store: a newer stream
//! of a lease replaces the older, the streams of a lease share its renewals, other leases are
//! unaffected, and the registry forgets every stream that ended.

use super::*;
use crate::engine::Clock;
use crate::ledger::{ClaimArgs, EventKind, Semantics};
use crate::store::embedded::EmbeddedStore;
use tonic::Code;
use tonic_types::StatusExt;

type Inbound = mpsc::Sender<Result<v1::KeepAliveRequest, Status>>;

struct Fixture {
    engine: Arc<Engine<EmbeddedStore>>,
    registry: Arc<Registry>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path()).unwrap();
        Self {
            engine: Arc::new(Engine::new(store, Clock::System)),
            registry: Arc::default(),
            _dir: dir,
        }
    }

    /// Claims `key` with a lease of `ttl` ms; returns its token.
    async fn claim(&self, key: &str, ttl: Millis) -> u64 {
        let args = ClaimArgs::for_test([3; 32], Semantics::AtLeastOnce, ttl, 600_000, "worker");
        let id = RecordId::new("acme", "ka.ns", key);
        let reply = self.engine.claim(&id, &args, None).await.unwrap();
        reply.lease.unwrap().token
    }

    /// Opens a stream on (`key`, `token`) renewing to `ttl`; returns the caller's side of it.
    async fn open(&self, key: &str, token: u64, ttl: Millis) -> (Inbound, LeaseStream) {
        open(&self.engine, &self.registry, key, token, ttl).await
    }

    /// How many renewals `key`'s record holds receipts of.
    async fn renewals(&self, key: &str) -> usize {
        let id = RecordId::new("acme", "ka.ns", key);
        let record = self.engine.lookup(&id).await.unwrap();
        let renewals = record.history.iter().filter(|e| e.kind == EventKind::Renew);
        renewals.count()
    }

    /// Waits until the registry holds `n` leases.
    async fn registry_holds(&self, n: usize) {
        for _ in 0..500 {
            if self.registry.len() == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(self.registry.len(), n, "registry entries");
    }
}

/// Opens a stream on (`key`, `token`) renewing to `ttl`; returns the caller's side of it.
async fn open(
    engine: &Arc<Engine<EmbeddedStore>>,
    registry: &Arc<Registry>,
    key: &str,
    token: u64,
    ttl: Millis,
) -> (Inbound, LeaseStream) {
    let (tx, rx) = mpsc::channel(1);
    tx.send(Ok(v1::KeepAliveRequest {
        namespace: "ka.ns".into(),
        key: key.into(),
        lease_token: token,
        lease_ttl: Some(prost_types::Duration {
            seconds: ttl / 1000,
            nanos: 0,
        }),
    }))
    .await
    .unwrap();
    let stream = start(
        engine.clone(),
        registry,
        &Limits::default(),
        &crate::api::privacy::KeyPrivacy::off(),
        "acme".into(),
        ReceiverStream::new(rx),
    )
    .await
    .unwrap();
    (tx, stream)
}

/// The next item of `stream`, within a generous deadline.
async fn next(stream: &mut LeaseStream) -> Option<Result<v1::Lease, Status>> {
    tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the stream answers")
}

fn reason(status: &Status) -> String {
    status.get_details_error_info().unwrap().reason
}

#[tokio::test]
async fn a_newer_stream_replaces_the_older_one() {
    let f = Fixture::new();
    let token = f.claim("k", 30_000).await;
    let (_a_in, mut a) = f.open("k", token, 30_000).await;
    let first = next(&mut a).await.unwrap().unwrap();
    let (b_in, mut b) = f.open("k", token, 30_000).await;
    let inherited = next(&mut b).await.unwrap().unwrap();
    assert_eq!(inherited, first, "answered with the lease's fresh renewal");
    let end = next(&mut a).await.unwrap().unwrap_err();
    assert_eq!(
        (end.code(), reason(&end).as_str()),
        (Code::Aborted, "KEEPALIVE_REPLACED")
    );
    assert!(next(&mut a).await.is_none(), "the replaced stream ends");
    assert_eq!(f.renewals("k").await, 1, "two streams, one renewal");
    f.registry_holds(1).await;

    // The caller closes the newer stream: the registry forgets the lease.
    drop(b_in);
    assert!(next(&mut b).await.is_none());
    f.registry_holds(0).await;
}

#[tokio::test]
async fn many_streams_on_one_lease_cost_one_renewal_and_spare_other_leases() {
    let f = Fixture::new();
    let token = f.claim("busy", 30_000).await;
    let other = f.claim("quiet", 30_000).await;
    let (_quiet_in, mut quiet) = f.open("quiet", other, 30_000).await;
    next(&mut quiet).await.unwrap().unwrap();

    // Twenty streams open at once on one lease: one renewal between them; every stream but the
    // newest is replaced.
    let opened = open_many(&f, "busy", token, 20).await;
    assert_eq!(f.renewals("busy").await, 1);
    let mut replaced = 0;
    let mut live = Vec::new();
    for (inbound, mut stream) in opened {
        next(&mut stream).await.unwrap().unwrap();
        match tokio::time::timeout(Duration::from_millis(200), stream.next()).await {
            Ok(Some(Err(status))) => {
                assert_eq!(reason(&status), "KEEPALIVE_REPLACED");
                replaced += 1;
            }
            Ok(other) => panic!("unexpected {other:?}"),
            Err(_) => live.push((inbound, stream)),
        }
    }
    assert_eq!((replaced, live.len()), (19, 1));
    assert_eq!(f.registry.len(), 2, "one entry per lease");

    // The other lease's stream was never touched.
    let untouched = tokio::time::timeout(Duration::from_millis(100), quiet.next()).await;
    assert!(untouched.is_err(), "{untouched:?}");
    assert_eq!(f.renewals("quiet").await, 1);

    // Settling ends the live stream cleanly; closing the other ends it: nothing is left behind.
    let id = RecordId::new("acme", "ka.ns", "busy");
    f.engine
        .complete(&id, token, &crate::ledger::OpResult::default())
        .await
        .unwrap();
    let (_inbound, mut stream) = live.pop().unwrap();
    loop {
        match next(&mut stream).await {
            Some(Ok(_)) => continue,
            Some(Err(status)) => panic!("{status:?}"),
            None => break,
        }
    }
    drop(_quiet_in);
    assert!(next(&mut quiet).await.is_none());
    f.registry_holds(0).await;
}

/// Opens `n` streams on one lease concurrently.
async fn open_many(f: &Fixture, key: &str, token: u64, n: usize) -> Vec<(Inbound, LeaseStream)> {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (engine, registry) = (f.engine.clone(), f.registry.clone());
            let key = key.to_owned();
            tokio::spawn(async move { open(&engine, &registry, &key, token, 30_000).await })
        })
        .collect();
    let mut opened = Vec::new();
    for task in tasks {
        opened.push(task.await.unwrap());
    }
    opened
}
