//! Oncekey service: the gRPC API, connections, TLS, reloads, settings and `serve`, which wires the
//! layers below it together. Those layers are crates of their own under `server/` and appear here
//! under their module names: `ledger` (the state machine), `store` (the contract, with
//! `store::embedded` and `store::cql`), `engine` and `telemetry`. The `oncekey` command line
//! (the `oncekey` crate) parses flags into `settings::ServeConfig` and calls `serve::run`; tools
//! such as the load generator live in crates of their own and use only what is public here.
//!
//! Data flows one way: api → engine → ledger (decisions) and store (conditional writes).

#![warn(unreachable_pub)]

pub(crate) mod admin;
pub mod api;
pub mod conn;
mod duration;
pub use oncekey_engine as engine;
pub(crate) mod inflight;
pub use oncekey_ledger as ledger;
pub(crate) mod reload;
pub mod serve;
pub mod settings;
/// The storage contract and its backends.
pub mod store {
    pub use oncekey_store::*;
    pub use oncekey_store_cql as cql;
    pub use oncekey_store_embedded as embedded;
}
pub use oncekey_telemetry as telemetry;
pub mod testing;
pub(crate) mod tls;
