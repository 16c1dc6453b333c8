//! The oncekey.v1 wire API: generated messages, the `Ledger` client and server stubs, the file
//! descriptor set for reflection, and what server and Rust client share beside them: the RFC
//! 8785 fingerprint and the HTTP/2 connections' write coalescing (`coalesce`).
//!
//! This crate holds definitions only, and that one I/O wrapper: no sockets, no policy.

pub mod coalesce;
pub mod fingerprint;

/// Generated code for `package oncekey.v1`.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("oncekey.v1");
}

/// The encoded `FileDescriptorSet` of `oncekey.v1` (with its imports), for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/oncekey_descriptor.bin"));

/// The ErrorInfo domain of every Oncekey error.
pub const ERROR_DOMAIN: &str = "oncekey";

/// The metadata header naming the tenant in unauthenticated (dev) mode.
pub const TENANT_HEADER: &str = "x-oncekey-tenant";
