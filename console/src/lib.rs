//! `oncekey console`: the operator console. A stateless web app that shows what needs a person
//! (operations to reconcile, to approve, whose lease lapsed), every record's story, and the
//! actions on them, rendered on the server as plain HTML (assets compiled in, no inline script).
//! Every read and action is a gRPC call to the ledger with the signed-in operator's own token, so
//! the ledger's scopes, tenancy and receipts apply unchanged.
//!
//! - `args`: the flags; `serve`: listening, TLS, drain.
//! - `routes`: the HTTP surface (`views`, `actions`, `signin`, `assets`); `guard`: cookies,
//!   same-origin and CSRF checks; `session`: the sealed session cookie.
//! - `ledger`: the calls; `pages` and `render`: the HTML.
//!
//! docs/console.md says how to deploy it and what protects it.

mod args;
mod guard;
mod ledger;
mod pages;
mod render;
mod routes;
mod serve;
mod session;

pub use args::{parse_duration, ConfigError, ConsoleArgs};
pub use serve::{run, Error, LedgerConnection};
