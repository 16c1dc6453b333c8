//! Oncekey server library: the ledger state machine, its stores, the engine that joins them, the
//! gRPC API, configuration and the `oncekey` command line. `main.rs` only parses and dispatches.
//!
//! Data flows one way: api → engine → ledger (decisions) and store (conditional writes).

pub mod admin;
pub mod api;
pub mod bench;
pub mod cli;
pub mod config;
pub mod conn;
pub mod engine;
pub mod inflight;
pub mod ledger;
pub mod reload;
pub mod serve;
pub mod store;
pub mod telemetry;
pub mod tls;
