//! Request limits and defaults (docs/api.md#limits, #errors), set from the command line, and the
//! retention ceilings of `--retention-ceiling` (docs/api.md, "Retention ceilings").

use super::pattern::{ByNamespace, Pattern};
use crate::duration::parse_duration;
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
    /// The longest retention of the namespaces each pattern matches (`--retention-ceiling`).
    pub retention_ceilings: ByNamespace<Millis>,
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
            retention_ceilings: ByNamespace::default(),
        }
    }
}

impl Limits {
    /// The retention a Claim of `namespace` gets for the `asked` one (the default when it did
    /// not ask): lowered to the namespace's ceiling, never refused for it.
    pub fn retention(&self, namespace: &str, asked: Millis) -> Millis {
        match self.retention_ceilings.get(namespace) {
            Some(&ceiling) => asked.min(ceiling),
            None => asked,
        }
    }

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

/// Retention ceilings from several `--retention-ceiling` values, each one or more
/// comma-separated `PATTERN=DURATION`, each duration 1 min ..= `max_retention`. The error names
/// the rule, not the flag.
pub fn retention_ceilings(
    values: &[String],
    max_retention: Millis,
) -> Result<ByNamespace<Millis>, String> {
    let mut ceilings = ByNamespace::default();
    for item in values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (pattern, duration) = item.split_once('=').ok_or_else(|| {
            format!("retention ceiling {item:?}: expected PATTERN=DURATION, e.g. payments.*=7d")
        })?;
        let pattern =
            Pattern::parse(pattern).map_err(|e| format!("retention ceiling {item:?}: {e}"))?;
        let ms = parse_duration(duration)
            .map_err(|e| format!("retention ceiling {item:?}: duration: {e}"))?;
        if !(MIN_RETENTION..=max_retention).contains(&ms) {
            return Err(format!(
                "retention ceiling {item:?}: the duration must be 1m ..= --max-retention"
            ));
        }
        ceilings.push(pattern, ms);
    }
    Ok(ceilings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ceiling_lowers_what_a_namespace_gets_and_no_other() {
        let limits = Limits {
            retention_ceilings: retention_ceilings(
                &["payments.*=7d".into(), "payments.audit=30d,*=20d".into()],
                30 * 86_400_000,
            )
            .unwrap(),
            ..Limits::default()
        };
        assert_eq!(
            limits.retention("payments.charge", 30 * 86_400_000),
            7 * 86_400_000
        );
        assert_eq!(limits.retention("payments.charge", 86_400_000), 86_400_000);
        assert_eq!(
            limits.retention("payments.audit", 30 * 86_400_000),
            30 * 86_400_000
        );
        assert_eq!(limits.retention("email", 30 * 86_400_000), 20 * 86_400_000);
        assert_eq!(Limits::default().retention("email", 5), 5);
    }

    #[test]
    fn bad_ceilings_say_what_is_wrong() {
        for (text, says) in [
            ("payments", "PATTERN=DURATION"),
            ("Pay=7d", "pattern"),
            ("x=soon", "duration"),
            ("x=30s", "1m ..= --max-retention"),
            ("x=31d", "1m ..= --max-retention"),
        ] {
            let err = retention_ceilings(&[text.into()], 30 * 86_400_000).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        assert!(retention_ceilings(&["x=1m".into(), "*=30d".into()], 30 * 86_400_000).is_ok());
    }
}
