//! `KeepAlive`: the server renews a lease every lease_ttl/3 while the caller's stream stays open.
//!
//! The first message names the lease; its renewal answers at once (or fails the RPC with the usual
//! error). Renewals then continue until the caller closes its side or its connection dies, the
//! record settles (the stream ends OK), the lease is lost (the stream ends with LEASE_LOST), a
//! newer stream for the same lease replaces this one (ABORTED, KEEPALIVE_REPLACED), or the server
//! shuts down. Later messages may change lease_ttl; they must name the same lease.
//!
//! A lease has at most one stream on this server (`registry`), and its streams share their
//! renewals: a newer stream answers its first message with the last renewal while that is fresh
//! (younger than a third of the lease), so however many streams a lease gets, it is renewed as
//! often as by one.

mod registry;
#[cfg(test)]
mod tests;

pub(super) use registry::Registry;

use super::convert;
use super::error::ApiError;
use super::limits::Limits;
use super::privacy::KeyPrivacy;
use crate::engine::{Engine, EngineError};
use crate::ledger::{Lease, LedgerError, Millis, RecordId, Status as RecordStatus};
use crate::store::Store;
use oncekey_api::v1;
use registry::{Registration, Renewed};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::Status;

/// The stream of renewed leases.
pub(super) type LeaseStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<v1::Lease, Status>> + Send>>;

struct Target {
    id: RecordId,
    token: u64,
    ttl: Millis,
}

/// How a stream's messages are read: for the caller's tenant, under the server's limits, with
/// keys as stored (key privacy).
struct Reader {
    tenant: String,
    limits: Limits,
    privacy: KeyPrivacy,
}

impl Reader {
    /// What a message names: the record, the lease, the length to renew to.
    fn target(&self, msg: &v1::KeepAliveRequest) -> Result<Target, ApiError> {
        Ok(Target {
            id: self
                .privacy
                .record_id(&self.tenant, &msg.namespace, &msg.key)?,
            token: convert::lease_token(msg.lease_token)?,
            ttl: convert::lease_ttl(msg.lease_ttl.as_ref(), &self.limits)?,
        })
    }
}

/// Reads the first message, registers the stream (replacing an older one of the same lease),
/// renews once (or answers with the lease's fresh last renewal), and starts the renewal task.
pub(super) async fn start<S: Store, In>(
    engine: Arc<Engine<S>>,
    registry: &Arc<Registry>,
    limits: &Limits,
    privacy: &KeyPrivacy,
    tenant: String,
    mut inbound: In,
) -> Result<LeaseStream, Status>
where
    In: Stream<Item = Result<v1::KeepAliveRequest, Status>> + Send + Unpin + 'static,
{
    let first = inbound.next().await.transpose()?.ok_or_else(|| {
        ApiError::invalid("lease_token", "the stream closed before its first message")
    })?;
    let reader = Reader {
        tenant,
        limits: limits.clone(),
        privacy: privacy.clone(),
    };
    let mut target = reader.target(&first)?;
    let mut registration = registry.register((target.id.clone(), target.token));
    let lease = renew(&engine, &target, &registration, false)
        .await
        .map_err(ApiError::from)?;
    let (tx, rx) = mpsc::channel(4);
    let _ = tx.try_send(Ok(convert::lease(&lease)));
    engine.metrics().keepalive(1);
    tokio::spawn(async move {
        let end = renew_loop(
            &engine,
            &reader,
            &mut target,
            &mut inbound,
            &mut registration,
            &tx,
        )
        .await;
        // Leave the registry before the caller learns the stream ended.
        drop(registration);
        engine.metrics().keepalive(-1);
        if let Some(status) = end {
            let _ = tx.send(Err(status)).await;
        }
    });
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// When the lease renewed by `last` is due again for a stream renewing to `ttl`: a third of the
/// shorter of the two lease lengths after that renewal.
fn due(last: &Renewed, ttl: Millis) -> Instant {
    last.at + period(last.ttl.min(ttl))
}

fn period(ttl: Millis) -> Duration {
    Duration::from_millis(u64::try_from(ttl / 3).unwrap_or(1000).max(1))
}

/// Renews the lease, unless (without `force`) one of its streams did so recently enough: then
/// that renewal's lease is the answer. Concurrent callers wait for one another, so a burst of
/// new streams costs one renewal.
async fn renew<S: Store>(
    engine: &Engine<S>,
    target: &Target,
    registration: &Registration,
    force: bool,
) -> Result<Lease, EngineError> {
    let mut last = registration.renewals.lock().await;
    if let Some(fresh) = last.filter(|r| !force && Instant::now() < due(r, target.ttl)) {
        return Ok(fresh.lease);
    }
    let lease = engine.renew(&target.id, target.token, target.ttl).await?;
    *last = Some(Renewed {
        lease,
        at: Instant::now(),
        ttl: target.ttl,
    });
    Ok(lease)
}

/// Renews until the stream should end; returns the error to end it with, if any.
async fn renew_loop<S: Store, In>(
    engine: &Engine<S>,
    reader: &Reader,
    target: &mut Target,
    inbound: &mut In,
    registration: &mut Registration,
    tx: &mpsc::Sender<Result<v1::Lease, Status>>,
) -> Option<Status>
where
    In: Stream<Item = Result<v1::KeepAliveRequest, Status>> + Unpin,
{
    let settles = engine.listen_settles(&target.id);
    loop {
        let next = match *registration.renewals.lock().await {
            Some(last) => due(&last, target.ttl),
            None => Instant::now() + period(target.ttl),
        };
        let settled = settles.notified();
        let mut force = false;
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = settled => match engine.lookup(&target.id).await {
                Ok(r) if r.fencing_token == target.token && r.status == RecordStatus::Processing => continue,
                _ => force = true, // settled, gone or taken: the renewal below says which
            },
            message = inbound.next() => match message {
                Some(Ok(msg)) => match target_update(reader, &msg, target) {
                    Ok(()) => force = true,
                    Err(e) => return Some(e.into()),
                },
                // The caller closed its side or the connection died: stop renewing.
                None | Some(Err(_)) => return None,
            },
            // A newer stream keeps this lease alive now (the sender is gone only then, too).
            _ = &mut registration.replaced => return Some(ApiError::KeepAliveReplaced.into()),
            _ = tx.closed() => return None,
            _ = engine.shutting_down() => return None,
        }
        match renew(engine, target, registration, force).await {
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
    reader: &Reader,
    msg: &v1::KeepAliveRequest,
    current: &mut Target,
) -> Result<(), ApiError> {
    let next = reader.target(msg)?;
    if next.id != current.id || next.token != current.token {
        return Err(ApiError::invalid(
            "lease_token",
            "a keep-alive stream renews one lease: namespace, key and lease_token must not change",
        ));
    }
    current.ttl = next.ttl;
    Ok(())
}
