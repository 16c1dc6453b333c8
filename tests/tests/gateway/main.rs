//! `oncekey gateway` end to end: the real `oncekey serve` and `oncekey gateway` processes, a real
//! upstream HTTP server written here that counts its calls, and real HTTP/1.1 and h2c clients.
//! Each test checks one rule of the gateway's contract (docs/gateway.md); the ledger key and the
//! fingerprint are computed here from the written rule, not with the gateway's code.

mod admin;
mod connections;
mod faults;
mod hardening;
mod outcomes;
mod proxying;
mod raw;
mod semantics;
mod support;

use oncekey_tests::Server;
use support::{Gateway, Http, Upstream};

/// A ledger, an upstream and a gateway in front of it with `extra` flags.
async fn setup(extra: &[&str]) -> (Server, Upstream, Gateway, Http) {
    let server = Server::start(&[]);
    let upstream = Upstream::start().await;
    let gateway = Gateway::start(&upstream.url, &server.grpc, extra);
    (server, upstream, gateway, Http::h1())
}
