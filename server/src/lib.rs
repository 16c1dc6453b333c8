//! Oncekey server library: the ledger state machine, its stores, the engine that joins them, the
//! gRPC API and `serve`, which wires them together. The `oncekey` command line (the `oncekey`
//! crate) parses flags into `settings::ServeConfig` and calls `serve::run`; tools such as the
//! load generator live in crates of their own and use only what is public here.
//!
//! Data flows one way: api → engine → ledger (decisions) and store (conditional writes).

pub(crate) mod admin;
pub mod api;
pub mod conn;
pub mod engine;
pub(crate) mod inflight;
pub mod ledger;
pub(crate) mod reload;
pub mod serve;
pub mod settings;
pub mod store;
pub mod telemetry;
pub mod testing;
pub(crate) mod tls;
