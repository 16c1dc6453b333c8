//! What one Claim answered, whichever design served it (Oncekey over gRPC, a peer, the raw CQL
//! store): the one shape the driver counts.

/// What a Claim answered.
pub struct Claimed {
    /// The proto `ClaimOutcome` value.
    pub outcome: i32,
    /// The lease token when ACQUIRED.
    pub token: u64,
}
