//! The label sets of the Prometheus metrics, the `_other` label of pairs past the series cap,
//! and the canonical names of gRPC codes used as label values.

use prometheus_client::encoding::EncodeLabelSet;

/// The label for (tenant, namespace) pairs past the cap.
pub const OTHER: &str = "_other";

/// Labels of an RPC counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// The RPC, e.g. `Claim`.
    pub method: &'static str,
    /// The gRPC status code name, e.g. `OK` or `FAILED_PRECONDITION`.
    pub code: &'static str,
}

/// Labels of an RPC latency histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// The RPC.
    pub method: &'static str,
}

/// Labels of the Claim outcome counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClaimLabels {
    /// Tenant (or `_other`).
    pub tenant: String,
    /// Namespace (or `_other`).
    pub namespace: String,
    /// What the Claim answered (`ClaimOutcome::name`).
    pub outcome: &'static str,
}

/// Labels of the admission refusal counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    /// `rate` or `inflight`.
    pub limit: &'static str,
}

/// Labels of store metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    /// `get`, `insert`, `replace`, `delete`, `sweep`, `list` or `attention`.
    pub op: &'static str,
}

/// Labels of the needs-attention gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttentionLabels {
    /// `UNKNOWN`, `AWAITING_APPROVAL` or `PROCESSING_LAPSED` (`ledger::Attention::name`).
    pub status: &'static str,
}

/// The canonical upper-snake name of a gRPC code.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::Unknown => "UNKNOWN",
        C::InvalidArgument => "INVALID_ARGUMENT",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::NotFound => "NOT_FOUND",
        C::AlreadyExists => "ALREADY_EXISTS",
        C::PermissionDenied => "PERMISSION_DENIED",
        C::ResourceExhausted => "RESOURCE_EXHAUSTED",
        C::FailedPrecondition => "FAILED_PRECONDITION",
        C::Aborted => "ABORTED",
        C::OutOfRange => "OUT_OF_RANGE",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Internal => "INTERNAL",
        C::Unavailable => "UNAVAILABLE",
        C::DataLoss => "DATA_LOSS",
        C::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// Labels of the intent guard's counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ActionLabels {
    /// `warned`, `refused` or `repeated`.
    pub action: &'static str,
}
