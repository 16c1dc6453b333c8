//! The same ledger as etcd v3 transactions over gRPC — etcd being the usual anchor for leases and
//! a gRPC service like Oncekey. One key per record; its value holds the fingerprint, the state,
//! the lease deadline and the stored result. The fencing token is etcd's own revision: the one at
//! which the Claim's write was applied, which is the key's mod revision while the holder keeps it.
//! - Claim: `Txn(if create_revision(key) == 0 then Put(key, processing) else Range(key))`; an
//!   existing record is checked for its fingerprint, replayed when completed, reported in progress
//!   while its lease runs, and taken over once it ran out with
//!   `Txn(if mod_revision(key) == seen then Put(key, processing))` — a later revision, so a
//!   greater token.
//! - Complete: `Txn(if mod_revision(key) == token then Put(key, completed))`: exactly the current
//!   holder settles; a taken-over holder's token no longer matches. Tokens are only ever the
//!   revisions of Claims' writes, and each revision is one transaction's, so no token handed out
//!   matches a completed record's mod revision (the Complete's own); a token made up to equal it
//!   would — as Oncekey's small-integer tokens can be guessed too.
//! - Retention: every record is attached to one etcd lease with the retention as its TTL, granted
//!   once per run (a lease per Claim would add a LeaseGrant — a Raft round and an fsync — to each).
//!   Like every etcd design, the lease deadline inside the record is read against the clients'
//!   clocks: etcd's comparisons have no notion of time.
//!
//! Durability: etcd fsyncs its write-ahead log before it applies and answers each write (Raft
//! batches share an fsync), which scripts/etcd leaves on.

use super::etcd_pb::{self as pb, request_op::Request, response_op::Response};
use super::{authority, Claim, Design, Refusal};
use anyhow::Context as _;
use bytes::Bytes;
use prost::Message as _;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use tonic::transport::{Channel, Endpoint};

/// The value stored under a key.
#[derive(Clone, PartialEq, ::prost::Message)]
struct Record {
    /// The fingerprint of the request that created it.
    #[prost(bytes = "bytes", tag = "1")]
    fingerprint: Bytes,
    /// Completed (the result is stored), or processing under a lease.
    #[prost(bool, tag = "2")]
    completed: bool,
    /// While processing: when the lease runs out (ms since the epoch, the clients' clock).
    #[prost(int64, tag = "3")]
    lease_until_ms: i64,
    /// Once completed: the stored result's code.
    #[prost(uint32, tag = "4")]
    code: u32,
    /// Once completed: the stored result's body.
    #[prost(bytes = "bytes", tag = "5")]
    body: Bytes,
    /// Once completed: the token that completed it (so the same Complete again is recognised).
    #[prost(int64, tag = "6")]
    token: i64,
}

/// A Claim that keeps losing races to other takeovers gives up after this many rounds.
const ROUNDS: usize = 8;

/// Connections to one etcd member running the design.
pub struct EtcdPeer {
    clients: Vec<pb::Client>,
    shared: Arc<Shared>,
    addr: String,
}

struct Shared {
    design: Design,
    /// The retention lease every record is attached to.
    lease: i64,
}

impl EtcdPeer {
    /// Opens `connections` HTTP/2 connections to `etcd://HOST:PORT` and grants the retention
    /// lease.
    pub async fn connect(url: &str, connections: usize, design: Design) -> anyhow::Result<Self> {
        let addr = authority(url, "etcd").map_err(anyhow::Error::msg)?;
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .with_context(|| format!("bad --peer {url}"))?
            .tcp_nodelay(true)
            .connect_timeout(std::time::Duration::from_secs(5));
        let mut clients = Vec::with_capacity(connections);
        for _ in 0..connections.max(1) {
            // The connector of Oncekey's own channels (writes coalesced): the same HTTP/2 client.
            let channel: Channel = endpoint
                .connect_with_connector(oncekey_client::transport::Connector::new())
                .await
                .with_context(|| format!("cannot connect to the etcd peer {url}"))?;
            clients.push(pb::Client::new(channel));
        }
        let ttl = i64::try_from(design.retention.as_secs().max(1)).unwrap_or(i64::MAX);
        let grant = clients[0]
            .lease_grant(pb::LeaseGrantRequest { ttl, id: 0 })
            .await
            .map_err(|s| anyhow::anyhow!("etcd LeaseGrant: {}", s.message()))?;
        anyhow::ensure!(
            grant.error.is_empty() && grant.id != 0,
            "etcd LeaseGrant: {}",
            grant.error
        );
        Ok(Self {
            clients,
            shared: Arc::new(Shared {
                design,
                lease: grant.id,
            }),
            addr: addr.to_owned(),
        })
    }

    /// Worker `i`'s client, on connection `i % connections`.
    pub fn worker(&self, i: usize) -> EtcdConn {
        EtcdConn {
            client: self.clients[i % self.clients.len()].clone(),
            shared: self.shared.clone(),
        }
    }

    /// etcd's Prometheus metrics, where its CPU time is read.
    pub fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }
}

/// One worker's client.
pub struct EtcdConn {
    client: pb::Client,
    shared: Arc<Shared>,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn failed(status: tonic::Status) -> Refusal {
    Refusal::Failed(format!(
        "etcd {} {}",
        oncekey_server::telemetry::metrics::code_name(status.code()),
        status.message()
    ))
}

fn compare(key: &Bytes, target: i32, union: pb::compare::TargetUnion) -> pb::Compare {
    pb::Compare {
        result: pb::EQUAL,
        target,
        key: key.clone(),
        target_union: Some(union),
    }
}

impl EtcdConn {
    fn put(&self, key: &Bytes, record: &Record) -> pb::RequestOp {
        pb::RequestOp {
            request: Some(Request::RequestPut(pb::PutRequest {
                key: key.clone(),
                value: record.encode_to_vec().into(),
                lease: self.shared.lease,
            })),
        }
    }

    /// `Txn(if compare then put else range)`: `Ok(revision)` when the put applied, else the key
    /// as it is (`None`: absent).
    async fn txn(
        &mut self,
        key: &Bytes,
        compare: pb::Compare,
        record: &Record,
    ) -> Result<Result<i64, Option<pb::KeyValue>>, Refusal> {
        let range = pb::RequestOp {
            request: Some(Request::RequestRange(pb::RangeRequest { key: key.clone() })),
        };
        let reply = self
            .client
            .txn(pb::TxnRequest {
                compare: vec![compare],
                success: vec![self.put(key, record)],
                failure: vec![range],
            })
            .await
            .map_err(failed)?;
        if reply.succeeded {
            let revision = reply.header.map_or(0, |h| h.revision);
            if revision <= 0 {
                return Err(Refusal::Failed("etcd: a Txn without a revision".into()));
            }
            return Ok(Ok(revision));
        }
        let kv = reply.responses.into_iter().find_map(|r| match r.response {
            Some(Response::ResponseRange(range)) => Some(range.kvs.into_iter().next()),
            _ => None,
        });
        match kv {
            Some(kv) => Ok(Err(kv)),
            None => Err(Refusal::Failed(
                "etcd: a failed Txn without its Range".into(),
            )),
        }
    }

    fn processing(&self, now: i64) -> Record {
        let design = &self.shared.design;
        Record {
            fingerprint: design.fingerprint.clone(),
            lease_until_ms: now.saturating_add(design.lease.as_millis() as i64),
            ..Default::default()
        }
    }

    /// The result body this connection stores (what a replay must return).
    pub fn body(&self) -> &[u8] {
        &self.shared.design.body
    }

    /// The design's Claim of `key`.
    pub async fn claim(&mut self, key: &str) -> Result<Claim, Refusal> {
        let name = Bytes::from(self.shared.design.key(key));
        let mut check = compare(
            &name,
            pb::CREATE,
            pb::compare::TargetUnion::CreateRevision(0),
        );
        for _ in 0..ROUNDS {
            let now = now_ms();
            let kv = match self.txn(&name, check, &self.processing(now)).await? {
                Ok(revision) => {
                    return Ok(Claim::Acquired {
                        token: token(revision)?,
                    })
                }
                Err(kv) => kv,
            };
            let Some(kv) = kv else {
                // Gone between the compare and the read (retention ran out): create it.
                check = compare(
                    &name,
                    pb::CREATE,
                    pb::compare::TargetUnion::CreateRevision(0),
                );
                continue;
            };
            let record = decode(&kv.value)?;
            if record.fingerprint != self.shared.design.fingerprint {
                return Err(Refusal::KeyReused);
            }
            if record.completed {
                return Ok(Claim::Completed {
                    code: record.code,
                    body: record.body,
                });
            }
            if record.lease_until_ms > now {
                return Ok(Claim::InProgress);
            }
            // The lease ran out: take over, if nobody changed the key since it was read.
            check = compare(
                &name,
                pb::MOD,
                pb::compare::TargetUnion::ModRevision(kv.mod_revision),
            );
        }
        Err(Refusal::Failed(
            "etcd: the Claim kept losing races for the key".into(),
        ))
    }

    /// The design's Complete of `key` with the lease's `token`, storing the run's result.
    pub async fn complete(&mut self, key: &str, token: u64) -> Result<(), Refusal> {
        let name = Bytes::from(self.shared.design.key(key));
        let design = &self.shared.design;
        let revision = i64::try_from(token).map_err(|_| Refusal::LeaseLost)?;
        let completed = Record {
            fingerprint: design.fingerprint.clone(),
            completed: true,
            lease_until_ms: 0,
            code: design.code,
            body: design.body.clone(),
            token: revision,
        };
        let check = compare(
            &name,
            pb::MOD,
            pb::compare::TargetUnion::ModRevision(revision),
        );
        let Err(kv) = self.txn(&name, check, &completed).await? else {
            return Ok(());
        };
        let Some(kv) = kv else {
            return Err(Refusal::LeaseLost);
        };
        let stored = decode(&kv.value)?;
        match stored.completed && stored.token == revision {
            true if stored == completed => Ok(()),
            true => Err(Refusal::AlreadySettled),
            false => Err(Refusal::LeaseLost),
        }
    }
}

fn token(revision: i64) -> Result<u64, Refusal> {
    u64::try_from(revision).map_err(|_| Refusal::Failed("etcd: a negative revision".into()))
}

fn decode(value: &[u8]) -> Result<Record, Refusal> {
    Record::decode(value)
        .map_err(|_| Refusal::Failed("etcd: a value this design never wrote".into()))
}

#[cfg(test)]
mod tests;
