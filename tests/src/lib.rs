//! The one test harness of the workspace (`oncekey-tests`), used by the end-to-end tests in
//! `tests/tests/`, the Rust client's tests and the server's CQL store tests:
//!
//! - `server`, `restart`: the real `oncekey` binary — `oncekey serve` on free ports, killed,
//!   stopped or restarted on the same port and data; any other command run to completion;
//! - `requests`: gRPC request builders and status readers; `http`: plain HTTP to the admin port;
//! - `certs`: certificates made for the run; `mount`: a directory laid out like a Kubernetes
//!   Secret volume; `relay`: a TCP relay in front of a node that can cut every connection;
//!   `cql`: Cassandra nodes and test keyspaces (the one keyspace-name generator);
//! - `client`: fixtures of the Rust client's tests; `drivers`: the Python, Go and TypeScript
//!   conformance drivers; `faults`: the crash and store-fault trials' workload, effect ledger,
//!   verdicts and CQL fault proxy.
//!
//! The most used items are re-exported here, so a test says `use oncekey_tests::*;`.

pub mod certs;
pub mod client;
pub mod cql;
pub mod drivers;
pub mod faults;
pub mod http;
pub mod mount;
pub mod relay;
pub mod requests;
mod restart;
pub mod server;

pub use certs::{client_certificate_until, make_certificates, make_certificates_valid_for};
pub use cql::{
    cassandra, migrated_keyspace, migrated_keyspace_with, node as cql_node,
    tls_node as cql_tls_node,
};
pub use http::{http_get, metric};
pub use mount::SecretMount;
pub use relay::Relay;
pub use requests::*;
pub use restart::free_addr;
pub use server::{binary, run_cli, Server};
