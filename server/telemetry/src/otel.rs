//! OpenTelemetry: spans exported over OTLP/gRPC when `--otlp-endpoint` is set, and W3C trace
//! context (`traceparent`) taken from incoming gRPC metadata so a caller's trace continues through
//! Oncekey. Without an endpoint nothing is exported and extraction is a no-op.

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicBool, Ordering};
use tonic::metadata::MetadataMap;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Whether spans are exported: set once the OTLP layer is installed.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether this process exports spans (`--otlp-endpoint`); without it, the per-RPC span would
/// be built for nobody (no log line shows it) and is not made at all.
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// Notes that spans are exported from now on.
pub(super) fn set_exporting() {
    EXPORTING.store(true, Ordering::Relaxed);
}

/// The exporter pipeline; `shutdown` flushes pending spans.
pub struct Otel {
    provider: SdkTracerProvider,
}

impl Otel {
    /// Builds the OTLP/gRPC exporter to `endpoint` and the tracing layer feeding it.
    pub fn new<S>(
        endpoint: &str,
    ) -> Result<
        (
            Self,
            tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry_sdk::trace::Tracer>,
        ),
        String,
    >
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| format!("--otlp-endpoint {endpoint}: {e}"))?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name("oncekey").build())
            .build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("oncekey"));
        Ok((Self { provider }, layer))
    }

    /// Flushes and stops the exporter (bounded by the SDK's own export timeout).
    pub fn shutdown(&self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "trace export shutdown failed");
        }
    }
}

struct Metadata<'a>(&'a MetadataMap);

impl Extractor for Metadata<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

/// Makes `span` a child of the caller's trace when the request carries `traceparent`.
pub fn continue_trace(span: &tracing::Span, metadata: &MetadataMap) {
    if metadata.get("traceparent").is_none() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&Metadata(metadata));
    let _ = span.set_parent(parent);
}
