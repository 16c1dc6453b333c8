//! The listing index's bucket codes: the stored status's code, and one of its own for
//! AT_MOST_ONCE PROCESSING (see `ledger::Bucket`).

use super::{status_code, status_from};
use oncekey_ledger::{Bucket, Status};

/// The code of a listing bucket in the embedded index: the stored status's code, and one of its
/// own for AT_MOST_ONCE PROCESSING.
pub(crate) fn bucket_code(bucket: Bucket) -> u8 {
    match bucket {
        // Status codes are small (see `status_code`).
        Bucket::Stored(status) => u8::try_from(status_code(status)).unwrap_or(u8::MAX),
        Bucket::ProcessingAtMostOnce => PROCESSING_AT_MOST_ONCE,
    }
}

/// `bucket_code` of `Bucket::ProcessingAtMostOnce`.
const PROCESSING_AT_MOST_ONCE: u8 = 0x81;

/// `bucket_code` of the bucket of a record stored with `status` and `semantics` codes (`None`: a
/// tombstone, never listed).
pub(super) fn bucket_of_codes(status: i32, semantics: i32) -> Option<u8> {
    match (status_from(status).ok()?, semantics) {
        (Status::Abandoned | Status::Purged, _) => None,
        (Status::Processing, 2) => Some(PROCESSING_AT_MOST_ONCE),
        (status, _) => Some(bucket_code(Bucket::Stored(status))),
    }
}
