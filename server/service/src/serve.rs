//! `oncekey serve`: wires the store, engine, gRPC services (Ledger, health, reflection), the admin
//! endpoint and background tasks together, then runs until SIGTERM/SIGINT and drains.
//!
//! Order: store, then engine, health and reflection, then listeners; once both listen, one line
//! `listening grpc=ADDR admin=ADDR` goes to stdout (scripts and tests read it to learn the ports).
//! On a signal: health NOT_SERVING, /readyz 503, waits and keep-alives end, in-flight RPCs drain
//! (at most --drain-timeout), the store flushes, exit 0.

use crate::admin::{self, AdminState};
use crate::api::auth::Auth;
use crate::api::privacy::KeyPrivacy;
use crate::api::LedgerService;
use crate::engine::{Clock, Engine};
use crate::inflight::InFlight;
use crate::settings::{ConfigError, ServeConfig, StoreKind, UnavailableError};
use crate::store::embedded::IntegrityError;
use crate::store::embedded::{self, EmbeddedStore};
use crate::store::{Store, StoreError};
use crate::telemetry::metrics::Metrics;
use oncekey_api::v1::ledger_server::LedgerServer;
use oncekey_sealing::Sealed;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::Server;
use tonic_health::ServingStatus;

/// How many expired records one sweep pass removes per transaction.
const SWEEP_BATCH: usize = 1000;
/// How often `oncekey_records_needing_attention` is counted again from the store's index.
pub const ATTENTION_REFRESH: Duration = Duration::from_secs(5);

/// Why `serve` ended with an error; each kind is an exit code of `oncekey serve`.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A setting is wrong (exit 64): the message names the flag.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The CQL cluster did not become available before the start-up deadline (exit 69).
    #[error(transparent)]
    Unavailable(#[from] UnavailableError),
    /// The embedded store's data is damaged or missing (exit 65): the message says how to proceed.
    #[error(transparent)]
    Integrity(#[from] IntegrityError),
    /// A socket or signal handler could not be set up, or serving failed (exit 1).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The gRPC server failed (exit 1).
    #[error(transparent)]
    Transport(#[from] tonic::transport::Error),
    /// The reflection service could not be built (exit 1).
    #[error("the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// The store failed to flush at shutdown (exit 1).
    #[error("closing the store: {0}")]
    Store(#[from] StoreError),
}

/// Runs the server until a shutdown signal.
pub async fn run(args: ServeConfig) -> Result<(), ServeError> {
    args.validate()?;
    if args.testing.any_set() {
        tracing::warn!(knobs = ?args.testing, "test-only settings (ONCEKEY_TEST_*) are in effect: never in production");
    }
    survive_file_size_limit();
    let auth = match &args.tokens_file {
        Some(path) => {
            Auth::from_file(path).map_err(|e| ConfigError(format!("--tokens-file: {e}")))?
        }
        // Dev mode: every scope on a loopback address; only `ledger` when opened to others.
        None if args.listen.ip().is_loopback() => Auth::dev(),
        None => Auth::dev_open(),
    };
    // Before the store opens: a key ring that does not load is a configuration error.
    let privacy = args.protection.key_privacy()?;
    if args.protection.encryption_keys.is_some() {
        crate::reload::RingIds::of(&privacy.sealer().ring()).log("key ring loaded", "start");
    }
    match args.store {
        StoreKind::Embedded => {
            let options = embedded::OpenOptions {
                cache_bytes: args.embedded_cache_mib << 20,
                accept_data_loss: args.accept_data_loss,
                checkpoint_every: Duration::from_millis(
                    u64::try_from(args.testing.embedded_checkpoint_interval).unwrap_or(50),
                ),
            };
            let store = match EmbeddedStore::open_with_options(&args.data_dir, options) {
                Ok(store) => store,
                // Lost data: its own exit code, with the message saying how to proceed.
                Err(embedded::OpenError::Refused(refusal)) => return Err(refusal.into()),
                Err(embedded::OpenError::Store(e)) => {
                    let at = args.data_dir.display();
                    return Err(ConfigError(format!("--data-dir {at}: {e}")).into());
                }
            };
            tracing::info!(data_dir = %args.data_dir.display(), "embedded store open");
            serve_store(store, &args, Arc::new(auth), privacy, |_| {}).await
        }
        StoreKind::Cql => {
            use crate::reload::cql::{CqlTlsFiles, CqlTlsReloader};
            use crate::store::cql::{CqlStore, StartupError};
            if args.testing.planted_lost_update {
                crate::store::cql::plant_lost_update();
            }
            // Watched from before the store reads them: a change while it connects is reloaded.
            let tls = &args.cql.tls;
            let tls_files = CqlTlsFiles::new(
                [&tls.cert, &tls.key, &tls.ca]
                    .into_iter()
                    .flatten()
                    .cloned()
                    .collect(),
            );
            let patience =
                Duration::from_millis(u64::try_from(args.cql_startup_timeout).unwrap_or(0));
            let store = match CqlStore::connect_within(&args.cql, patience).await {
                Ok(store) => store,
                Err(StartupError::Refused(e)) => return Err(ConfigError(e.to_string()).into()),
                Err(e) => return Err(UnavailableError(e.to_string()).into()),
            };
            tracing::info!(keyspace = %args.cql.keyspace, local_dc = ?args.cql.local_dc, "cql store open");
            let every =
                Duration::from_millis(u64::try_from(args.reload_check_interval).unwrap_or(0));
            let reconnecting = store.clone();
            serve_store(store, &args, Arc::new(auth), privacy, move |metrics| {
                let reloader =
                    tls_files.and_then(|files| CqlTlsReloader::new(reconnecting, files, metrics));
                if let Some(reloader) = reloader {
                    tokio::spawn(crate::reload::cql::run(reloader, every));
                }
            })
            .await
        }
    }
}

/// A write past the file-size limit (`ulimit -f`) raises SIGXFSZ, whose default action kills the
/// process. Handled, the signal only makes the write fail (EFBIG), and the store's documented
/// answer to a failed write follows: it refuses writes until a restart, and says so.
fn survive_file_size_limit() {
    use tokio::signal::unix::{signal, SignalKind};
    let xfsz = SignalKind::from_raw(rustix::process::Signal::XFSZ.as_raw());
    match signal(xfsz) {
        Ok(mut signals) => {
            tokio::spawn(async move {
                while signals.recv().await.is_some() {
                    tracing::warn!("a write went past the file-size limit (SIGXFSZ); it fails");
                }
            });
        }
        Err(e) => tracing::warn!(
            error = %e,
            "cannot handle SIGXFSZ: a write past the file-size limit will end the process"
        ),
    }
}

/// The reflection service's builder, with every service this port serves.
fn reflection_builder() -> tonic_reflection::server::Builder<'static> {
    tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(oncekey_api::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
}

async fn bind(flag: &str, addr: std::net::SocketAddr) -> Result<TcpListener, ConfigError> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| ConfigError(format!("{flag} {addr}: {e}")))
}

/// Serves one store until shutdown, always sealed (`Sealed`) with the key ring of `privacy`'s
/// sealer: without `--encryption-keys` an empty ring, so that a sealed record is answered
/// UNREADABLE_RECORD, never served as garbage. `start_reloads` starts the store's own file
/// reloads (given the reload metrics) once the server's are running.
pub(crate) async fn serve_store<S: Store>(
    store: S,
    args: &ServeConfig,
    auth: Arc<Auth>,
    privacy: KeyPrivacy,
    start_reloads: impl FnOnce(crate::reload::ReloadMetrics),
) -> Result<(), ServeError> {
    let clock = match args.testing.clock_skew_ms {
        0 => Clock::System,
        skew => Clock::Skewed(skew),
    };
    let store = Sealed::new(store, privacy.sealer().clone());
    // The store's metrics, and the sealing wrapper's beside them.
    let collectors = [store.collector(), Some(store.metrics().collector())];
    let metrics = Metrics::with_collectors(
        Metrics::DEFAULT_MAX_SERIES,
        collectors.into_iter().flatten(),
    );
    let engine = Arc::new(Engine::with_metrics(store, clock, Arc::new(metrics)));
    let (health, health_service) = tonic_health::server::health_reporter();
    health
        .set_serving::<LedgerServer<LedgerService<Sealed<S>>>>()
        .await;
    // v1, and v1alpha for the tools that only speak it (grpcio-reflection, Postman, older grpcurl).
    let reflection = reflection_builder().build_v1()?;
    let reflection_v1alpha = reflection_builder().build_v1alpha()?;
    let admission =
        crate::api::admission::Admission::from_config(&args.admission, engine.metrics().clone())?;
    admission.reload_on_sighup()?;
    let sealer = privacy.sealer().clone();
    let ledger = LedgerService::new(engine.clone(), args.limits()?)
        .with_admission(admission)
        .with_privacy(privacy)
        .into_server(auth.clone());

    let tls = crate::tls::Tls::from_config(args)?.map(Arc::new);
    let grpc_listener = bind("--listen", args.listen).await?;
    let admin_listener = bind("--admin-listen", args.admin_listen).await?;
    println!(
        "listening grpc={} admin={}",
        grpc_listener.local_addr()?,
        admin_listener.local_addr()?
    );
    let gate = crate::conn::Gate::new("grpc", args.max_connections());
    tracing::info!(grpc = %grpc_listener.local_addr()?, admin = %admin_listener.local_addr()?, tls = args.tls_cert.is_some(), authenticated = auth.has_tokens(), max_connections = gate.max(), max_concurrent_streams = args.max_concurrent_streams, "oncekey serving");
    if let Some(soft) = crate::conn::descriptor_soft_limit() {
        if gate.max() as u64 >= soft {
            tracing::warn!(
                max_connections = gate.max(),
                open_files_limit = soft,
                "--max-connections is not below the open-files limit: when descriptors run out, new connections wait in the backlog instead of being closed, and the store may fail to open files"
            );
        }
    }
    if !auth.has_tokens() && !args.admin_listen.ip().is_loopback() {
        tracing::warn!(
            admin = %admin_listener.local_addr()?,
            "the admin port (/metrics, /healthz, /readyz) listens on a non-loopback address and no --tokens-file is set: this dev-mode server is reachable beyond this host; bind --admin-listen to 127.0.0.1 or set --tokens-file"
        );
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let admin_state = Arc::new(AdminState {
        engine: engine.clone(),
        draining: false.into(),
    });
    let admin_task = tokio::spawn(admin::serve(admin_listener, admin_state.clone(), stopped()));
    let sweeper = tokio::spawn(sweep_loop(engine.clone(), args.sweep_interval));
    let attention = tokio::spawn(attention_loop(engine.clone()));
    let mut reloader =
        crate::reload::Reloader::new(args, auth, tls.clone(), engine.metrics().reload().clone());
    if let Some(path) = &args.protection.encryption_keys {
        reloader = reloader.with_key_ring(path.clone(), sealer);
    }
    let reload_every =
        Duration::from_millis(u64::try_from(args.reload_check_interval).unwrap_or(0));
    tokio::spawn(crate::reload::run(reloader, reload_every));
    start_reloads(engine.metrics().reload().clone());

    let inflight = InFlight::new(engine.metrics().clone());
    let router = Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .max_concurrent_streams(args.max_concurrent_streams)
        .layer(inflight.clone())
        .add_service(health_service)
        .add_service(reflection)
        .add_service(reflection_v1alpha)
        .add_service(ledger);
    let mut server: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send>> =
        match tls {
            Some(tls) => Box::pin(router.serve_with_incoming_shutdown(
                crate::tls::incoming(grpc_listener, gate, tls),
                stopped(),
            )),
            None => Box::pin(router.serve_with_incoming_shutdown(
                crate::conn::plaintext(grpc_listener, gate),
                stopped(),
            )),
        };

    tokio::select! {
        result = &mut server => result?,
        () = shutdown_signal() => {
            tracing::info!("shutdown signal: draining");
            admin_state.draining.store(true, Ordering::Relaxed);
            health.set_service_status("", ServingStatus::NotServing).await;
            health.set_not_serving::<LedgerServer<LedgerService<Sealed<S>>>>().await;
            engine.begin_shutdown();
            stop_tx.send_replace(true);
            // Done when the server closed every connection, or when no RPC is in flight (idle
            // keep-alive connections need not hold us), or at the drain timeout.
            let drain = Duration::from_millis(u64::try_from(args.drain_timeout).unwrap_or(0));
            let drained = async {
                tokio::select! {
                    result = &mut server => result,
                    () = inflight.idle() => Ok(()),
                }
            };
            match tokio::time::timeout(drain, drained).await {
                Ok(result) => result?,
                Err(_) => tracing::warn!(in_flight = inflight.active(), "drain timeout: exiting with RPCs still open"),
            }
        }
    }
    stop_tx.send_replace(true);
    sweeper.abort();
    attention.abort();
    let _ = admin_task.await;
    engine.flush_parked_hits().await;
    engine.store().close().await?;
    tracing::info!("stopped");
    Ok(())
}

async fn sweep_loop<S: Store>(engine: Arc<Engine<S>>, every: i64) {
    let mut tick = tokio::time::interval(Duration::from_millis(
        u64::try_from(every).unwrap_or(1000).max(10),
    ));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match engine.sweep(SWEEP_BATCH).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(removed = n, "swept expired records"),
            Err(e) => tracing::warn!(error = %e, "sweep failed"),
        }
    }
}

/// Counts the records needing attention every `ATTENTION_REFRESH` (first at once) for
/// `/metrics`; a failed count keeps the last values and is logged.
async fn attention_loop<S: Store>(engine: Arc<Engine<S>>) {
    let mut tick = tokio::time::interval(ATTENTION_REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        match engine.attention().await {
            Ok(counts) => engine.metrics().needing_attention(&counts),
            Err(e) => tracing::warn!(error = %e, "counting the records needing attention failed"),
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
