//! `oncekey gateway`: an HTTP reverse proxy that gives any upstream HTTP service
//! `Idempotency-Key` semantics (draft-ietf-httpapi-idempotency-key-header), with the Oncekey
//! ledger behind it.
//!
//! A request of a `--methods` method with an `Idempotency-Key` header is claimed in the ledger
//! under a caller-scoped key with the request's fingerprint; it is forwarded upstream only when
//! acquired, and the response settles the key before the client sees it. A retry gets the stored
//! response byte for byte (`Idempotent-Replayed: true`); the same key with another request gets
//! 422, a key in flight 409 (or is held with `--wait`), and when the ledger cannot answer nothing
//! is forwarded (503). Everything else passes through. See `docs/gateway.md`.
//!
//! The library holds the whole gateway; the `oncekey` binary only parses the command line (these
//! [`GatewayArgs`] plus the client commands' ledger connection flags) and calls [`run`].

mod admin;
mod args;
mod body;
mod config;
mod conn;
mod fingerprint;
mod forward;
mod headers;
mod key;
mod ledger;
mod metrics;
mod policy;
mod problem;
mod proxy;
mod serve;
mod tracker;
mod unknown;
mod upstream;

pub use args::{parse_duration, GatewayArgs, SemanticsArg};
pub use config::ConfigError;
pub use conn::{serve_connection, Timeouts};
pub use fingerprint::{
    document as fingerprint_document, fingerprint as request_fingerprint, RequestParts,
};
pub use key::{caller_scope, ledger_key};
pub use serve::{run, serve, shutdown_signal, Error, LedgerConnection};

use std::sync::atomic::AtomicBool;

/// Everything a request handler reads.
pub(crate) struct Gateway {
    config: config::Config,
    policy: policy::Policy,
    ledger: ledger::Ledger,
    upstream: upstream::Upstream,
    unknowns: unknown::Unknowns,
    metrics: metrics::Metrics,
    tracker: tracker::Tracker,
    draining: AtomicBool,
}
