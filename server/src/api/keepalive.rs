//! `KeepAlive`: the server renews a lease every lease_ttl/3 while the caller's stream stays open.
//!
//! The first message names the lease; its renewal answers at once (or fails the RPC with the usual
//! error). Renewals then continue until the caller closes its side or its connection dies, the
//! record settles (the stream ends OK), the lease is lost (the stream ends with LEASE_LOST), or the
//! server shuts down. Later messages may change lease_ttl; they must name the same lease.

use super::convert;
use super::error::ApiError;
use super::limits::Limits;
use crate::engine::{Engine, EngineError};
use crate::ledger::{LedgerError, Millis, RecordId, Status as RecordStatus};
use crate::store::Store;
use oncekey_api::v1;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// The stream of renewed leases.
pub type LeaseStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<v1::Lease, Status>> + Send>>;

struct Target {
    id: RecordId,
    token: u64,
    ttl: Millis,
}

fn target(tenant: &str, msg: &v1::KeepAliveRequest, limits: &Limits) -> Result<Target, ApiError> {
    Ok(Target {
        id: convert::record_id(tenant, &msg.namespace, &msg.key)?,
        token: convert::lease_token(msg.lease_token)?,
        ttl: convert::lease_ttl(msg.lease_ttl.as_ref(), limits)?,
    })
}

/// Reads the first message, renews once, and starts the renewal task.
pub async fn start<S: Store>(
    engine: Arc<Engine<S>>,
    limits: &Limits,
    tenant: String,
    mut inbound: Streaming<v1::KeepAliveRequest>,
) -> Result<LeaseStream, Status> {
    let first = inbound.message().await?.ok_or_else(|| {
        ApiError::invalid("lease_token", "the stream closed before its first message")
    })?;
    let mut target = target(&tenant, &first, limits)?;
    let lease = engine
        .renew(&target.id, target.token, target.ttl)
        .await
        .map_err(ApiError::from)?;
    let (tx, rx) = mpsc::channel(4);
    let _ = tx.try_send(Ok(convert::lease(&lease)));
    let limits = limits.clone();
    engine.metrics().keepalive(1);
    tokio::spawn(async move {
        let end = renew_loop(&engine, &limits, &tenant, &mut target, &mut inbound, &tx).await;
        engine.metrics().keepalive(-1);
        if let Some(status) = end {
            let _ = tx.send(Err(status)).await;
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// Renews until the stream should end; returns the error to end it with, if any.
async fn renew_loop<S: Store>(
    engine: &Engine<S>,
    limits: &Limits,
    tenant: &str,
    target: &mut Target,
    inbound: &mut Streaming<v1::KeepAliveRequest>,
    tx: &mpsc::Sender<Result<v1::Lease, Status>>,
) -> Option<Status> {
    loop {
        let period = Duration::from_millis(u64::try_from(target.ttl / 3).unwrap_or(1000).max(1));
        let settled = engine.settle_notify(&target.id).notified();
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = settled => match engine.lookup(&target.id).await {
                Ok(r) if r.fencing_token == target.token && r.status == RecordStatus::Processing => continue,
                _ => {} // settled, gone or taken: the renewal below says which
            },
            message = inbound.message() => match message {
                Ok(Some(msg)) => match target_update(tenant, &msg, limits, target) {
                    Ok(()) => {}
                    Err(e) => return Some(e.into()),
                },
                // The caller closed its side or the connection died: stop renewing.
                Ok(None) | Err(_) => return None,
            },
            _ = tx.closed() => return None,
            _ = engine.shutting_down() => return None,
        }
        match engine.renew(&target.id, target.token, target.ttl).await {
            Ok(lease) => {
                if tx.send(Ok(convert::lease(&lease))).await.is_err() {
                    return None;
                }
            }
            // Settled by this holder: the lease has done its job.
            Err(EngineError::Ledger(LedgerError::AlreadySettled)) => return None,
            Err(e) => return Some(ApiError::from(e).into()),
        }
    }
}

/// A later message may change lease_ttl; it must name the same lease.
fn target_update(
    tenant: &str,
    msg: &v1::KeepAliveRequest,
    limits: &Limits,
    current: &mut Target,
) -> Result<(), ApiError> {
    let next = target(tenant, msg, limits)?;
    if next.id != current.id || next.token != current.token {
        return Err(ApiError::invalid(
            "lease_token",
            "a keep-alive stream renews one lease: namespace, key and lease_token must not change",
        ));
    }
    current.ttl = next.ttl;
    Ok(())
}
