//! Telemetry: structured `tracing` logs to stderr as text or JSON (filtered by `RUST_LOG`, default
//! `info`), spans exported over OTLP when configured (`otel`), and Prometheus metrics (`metrics`).
//! Never logs tokens, bodies or raw keys: keys appear only as `key_hash`.

#![warn(unreachable_pub)]

pub mod metrics;
pub mod otel;
pub mod process;
pub mod reload;

use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber (first call wins); with an OTLP endpoint also the exporter,
/// returned so that shutdown can flush it.
pub fn init(format: LogFormat, otlp_endpoint: Option<&str>) -> Result<Option<otel::Otel>, String> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,scylla=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt.json().flatten_event(true).boxed(),
    };
    // The per-RPC span is for traces: formatting its fields for a log line that is almost never
    // written cost ~5 % of a replay's CPU. Log lines about a failed RPC carry their own context
    // (`api::rpc_context`).
    let fmt = fmt.with_filter(tracing_subscriber::filter::filter_fn(|meta| {
        !(meta.is_span() && meta.name() == RPC_SPAN)
    }));
    let registry = tracing_subscriber::registry().with(filter).with(fmt);
    match otlp_endpoint {
        None => {
            let _ = registry.try_init();
            Ok(None)
        }
        Some(endpoint) => {
            let (otel, layer) = otel::Otel::new(endpoint)?;
            if registry.with(layer).try_init().is_ok() {
                otel::set_exporting();
            }
            Ok(Some(otel))
        }
    }
}

/// The name of the span each RPC runs in; exported to OpenTelemetry, not written to the log.
pub const RPC_SPAN: &str = "rpc";

/// A short, stable, non-reversible stand-in for a key in logs and spans (keys may carry business
/// identifiers).
pub fn key_hash(key: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(key.as_bytes())[..8])
}
