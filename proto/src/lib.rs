//! The oncekey.v1 wire API: generated messages, the `Ledger` client and server stubs, the file
//! descriptor set for reflection, and what server and Rust client share beside them: the RFC
//! 8785 fingerprint. (Their connections' write coalescing is the `oncekey-coalesce` crate beside
//! this one.)
//!
//! This crate holds definitions only: no I/O, no policy.

pub mod fingerprint;

/// Generated code for `package oncekey.v1`.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("oncekey.v1");
}

/// The encoded `FileDescriptorSet` of `oncekey.v1` (with its imports), for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/oncekey_descriptor.bin"));

impl v1::ErrorReason {
    /// The reason as `google.rpc.ErrorInfo` carries it on the wire: the value's name without its
    /// `ERROR_REASON_` prefix, e.g. `KEY_REUSED`.
    pub fn wire_name(self) -> &'static str {
        let name = self.as_str_name();
        name.strip_prefix("ERROR_REASON_").unwrap_or(name)
    }

    /// The reason an `ErrorInfo` names (`KEY_REUSED`), if this version knows it.
    pub fn from_wire_name(reason: &str) -> Option<Self> {
        match Self::from_str_name(&format!("ERROR_REASON_{reason}"))? {
            Self::Unspecified => None,
            known => Some(known),
        }
    }
}

/// The ErrorInfo domain of every Oncekey error.
pub const ERROR_DOMAIN: &str = "oncekey";

/// The metadata header naming the tenant in unauthenticated (dev) mode.
pub const TENANT_HEADER: &str = "x-oncekey-tenant";

#[cfg(test)]
mod tests {
    use super::v1::ErrorReason;

    #[test]
    fn reasons_travel_without_their_prefix_and_parse_back() {
        assert_eq!(ErrorReason::KeyReused.wire_name(), "KEY_REUSED");
        assert_eq!(
            ErrorReason::from_wire_name("UNSETTLED_AT_MOST_ONCE"),
            Some(ErrorReason::UnsettledAtMostOnce)
        );
        assert_eq!(ErrorReason::from_wire_name("UNSPECIFIED"), None);
        assert_eq!(ErrorReason::from_wire_name("ERROR_REASON_KEY_REUSED"), None);
        assert_eq!(ErrorReason::from_wire_name("NO_SUCH_REASON"), None);
    }
}
