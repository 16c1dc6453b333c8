//! The per-tenant admission flags of `oncekey serve`, turned into the server's
//! `AdmissionConfig`, which checks them and reads the limits file.

use clap::Args;
use oncekey_server::api::admission::{AdmissionConfig, DEFAULT_TENANT_HELD_CLAIMS};
use std::path::PathBuf;

/// The admission flags of `oncekey serve`.
#[derive(Debug, Clone, Args)]
pub struct AdmissionArgs {
    /// Requests per second each tenant may send to Claim, Lookup and ListRecords (a token bucket;
    /// decimals allowed); 0 = no limit. Over it the answer is RESOURCE_EXHAUSTED / RATE_LIMITED.
    #[arg(long, env = "ONCEKEY_TENANT_RATE", default_value_t = 0.0)]
    pub tenant_rate: f64,
    /// Requests a tenant may send at once above --tenant-rate (the bucket's size); 0 = the rate,
    /// rounded up (at least 1).
    #[arg(long, env = "ONCEKEY_TENANT_BURST", default_value_t = 0)]
    pub tenant_burst: u32,
    /// Unary RPCs (Claims held by `wait` included) each tenant may have in progress at once;
    /// over it Claim, Lookup and ListRecords are refused (never Complete, Fail or Renew); 0 = no
    /// limit.
    #[arg(long, env = "ONCEKEY_TENANT_INFLIGHT", default_value_t = 0)]
    pub tenant_inflight: u32,
    /// Claims each tenant may hold by `wait` at once (duplicates waiting for an operation in
    /// flight); beyond it a Claim that would be held is refused RESOURCE_EXHAUSTED /
    /// RATE_LIMITED; 0 = no limit.
    #[arg(long, env = "ONCEKEY_TENANT_HELD_CLAIMS", default_value_t = DEFAULT_TENANT_HELD_CLAIMS)]
    pub tenant_held_claims: u32,
    /// Per-tenant overrides: `tenant rate=100 burst=200 inflight=50 held-claims=5000` lines,
    /// `#` comments; reloaded on SIGHUP.
    #[arg(long, env = "ONCEKEY_LIMITS_FILE")]
    pub limits_file: Option<PathBuf>,
    /// Intent guard rules, PATTERN=MODE[/WINDOW] (repeatable; comma-separated in the
    /// environment): e.g. `payments.*=refuse/1h`, `*=warn`. A Claim of a new key whose
    /// arguments another live key of the namespace was claimed with within the window is
    /// named (warn) or refused with DUPLICATE_INTENT (refuse). Modes off, warn, refuse; window
    /// 1s ..= 24h, default 10m; the longest matching pattern applies.
    #[arg(long, env = "ONCEKEY_INTENT_GUARD", value_delimiter = ',')]
    pub intent_guard: Vec<String>,
}

impl AdmissionArgs {
    /// The admission settings these flags give.
    pub fn config(&self) -> AdmissionConfig {
        AdmissionConfig {
            tenant_rate: self.tenant_rate,
            tenant_burst: self.tenant_burst,
            tenant_inflight: self.tenant_inflight,
            tenant_held_claims: self.tenant_held_claims,
            limits_file: self.limits_file.clone(),
            intent_guard: self.intent_guard.clone(),
        }
    }
}
