//! Request limits and defaults (docs/api.md#limits, #errors), set from the command line.

use crate::ledger::Millis;

/// Shortest and longest lease a caller may ask for.
pub const MIN_LEASE: Millis = 1_000;
/// Longest lease (the ledger bounds every lease by it: `ledger::MAX_LEASE_TTL`).
pub const MAX_LEASE: Millis = crate::ledger::MAX_LEASE_TTL;
/// Shortest retention.
pub const MIN_RETENTION: Millis = 60_000;
/// Longest `Claim.wait`.
pub const MAX_WAIT: Millis = 60_000;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Longest namespace, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 128;
/// Longest error message, in bytes.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 16 * 1024;
/// Longest `result.content_type`, in bytes.
pub const MAX_CONTENT_TYPE_BYTES: usize = 256;
/// Longest note of an Approve or Reject, in bytes.
pub const MAX_NOTE_BYTES: usize = 1024;

/// What requests may ask for, and what they get when they do not say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Lease when a request leaves `lease_ttl` unset.
    pub default_lease: Millis,
    /// Retention when a Claim leaves `retention` unset.
    pub default_retention: Millis,
    /// Longest retention a Claim may ask for.
    pub max_retention: Millis,
    /// Largest `result.body`.
    pub max_result_bytes: usize,
    /// Largest `error.details`.
    pub max_error_details_bytes: usize,
    /// Most `result.metadata` entries.
    pub max_metadata_entries: usize,
    /// Largest metadata entry (name + value).
    pub max_metadata_entry_bytes: usize,
    /// Largest `payload_json`.
    pub max_payload_json_bytes: usize,
    /// Largest `owner`.
    pub max_owner_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            default_lease: 30_000,
            default_retention: 24 * 3_600_000,
            max_retention: 30 * 24 * 3_600_000,
            max_result_bytes: 1024 * 1024,
            max_error_details_bytes: 64 * 1024,
            max_metadata_entries: 32,
            max_metadata_entry_bytes: 1024,
            max_payload_json_bytes: 1024 * 1024,
            max_owner_bytes: 256,
        }
    }
}

impl Limits {
    /// The largest gRPC message a valid request can be, with room for the other fields.
    pub fn max_message_bytes(&self) -> usize {
        let metadata = self.max_metadata_entries * (self.max_metadata_entry_bytes + 16);
        let largest = self
            .max_result_bytes
            .saturating_add(metadata)
            .max(self.max_payload_json_bytes)
            .max(self.max_error_details_bytes + MAX_ERROR_MESSAGE_BYTES);
        largest.saturating_add(64 * 1024)
    }
}
