//! Logging setup: structured `tracing` events to stderr as text or JSON, filtered by `RUST_LOG`
//! (default `info`). Never logs tokens, bodies or raw keys.

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (first call wins; later calls are no-ops).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
