//! Data protection for the ledger (docs/api.md#data-protection): the key ring
//! (`--encryption-keys`), encryption at rest as a `Store` wrapper (`Sealed`), and key privacy
//! (`hash_key`).
//!
//! - `algorithm`: the AEADs a key seals with.
//! - `keyring`: the key ring file, parsed and checked once; secrets never appear in any text.
//! - `envelope`: one field sealed with AEAD, bound to its record and field by associated data.
//! - `fields`: which fields of a record are sealed, and how; opening them again.
//! - `privacy`: the HMAC of an idempotency key (`~h:` …).
//! - `sealer`: the running key ring, replaced on reload (never with another `hmac` key).
//! - `store`: `Sealed<S>`, sealing every write and opening every read of any store.
//! - `metrics`: the wrapper's counters.
//!
//! What is protected from whom, and what stays in clear, is in docs/security.md#data-at-rest.
//! This crate does no I/O of its own beyond reading the key ring file, and decides nothing about
//! records: the engine decides, the wrapped store stores.

#![warn(unreachable_pub)]

mod algorithm;
mod envelope;
mod fields;
mod keyring;
mod metrics;
mod privacy;
mod sealer;
mod store;

pub use algorithm::Algorithm;
pub use envelope::{MAGIC, TEXT_PREFIX};
pub use fields::{
    decode_metadata, encode_metadata, open_record, open_record_lenient, seal_record, sealed_with,
    ERROR_DETAILS, ERROR_MESSAGE, RESULT_BODY, RESULT_METADATA, SEALED_METADATA,
};
pub use keyring::{valid_id, KeyRing, RingError, MAX_ID_LEN, SECRET_LEN};
pub use metrics::SealingMetrics;
pub use privacy::{hash_key, is_hashed, HASHED_LEN, HASHED_PREFIX};
pub use sealer::Sealer;
pub use store::Sealed;

#[cfg(test)]
mod envelope_tests;
#[cfg(test)]
mod privacy_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod suite_tests;
