//! Unit tests of the service's RPC plumbing (the parent module).

use super::*;
use tracing_subscriber::layer::SubscriberExt;

#[test]
fn no_rpc_span_is_made_when_spans_are_not_exported() {
    let subscriber =
        tracing_subscriber::registry().with(tracing_subscriber::EnvFilter::new("info"));
    tracing::subscriber::with_default(subscriber, || {
        assert!(!otel::exporting());
        let req = Request::new(());
        assert!(rpc_span("oncekey.v1.Ledger/Claim", &req, "ns", "k").is_disabled());
        // This subscriber takes spans of that level: leaving it out is the server's choice.
        assert!(!tracing::info_span!("other").is_disabled());
    });
}
