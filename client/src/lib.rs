//! The Rust client for Oncekey.
pub use oncekey_api as api;
