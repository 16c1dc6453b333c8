//! Who may send how much: the admission limits of every tenant — the `--tenant-*` settings as the
//! default, and per-tenant overrides from the limits file.
//!
//! The limits file has one tenant per line, `tenant key=value …`, with keys `rate` (requests per
//! second, decimals allowed), `burst` (requests), `inflight` (concurrent requests) and
//! `held-claims` (Claims held by `wait` at once); a key left out takes its flag's value, `0`
//! turns that limit off for the tenant. Blank lines and lines
//! starting with `#` are ignored. The key `intent-guard` sets the tenant's intent guard rules
//! (`intent::IntentRules`, separated by `;`), replacing `--intent-guard`'s for it. This module only parses and looks up; it keeps no state.

use super::intent::IntentRules;
use crate::api::auth::valid_tenant;
use crate::store::ConfigError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest rate or burst a flag or the limits file may set (higher is as good as off).
const MAX_RATE: f64 = 1e9;

/// Claims one tenant may hold by `wait` at once unless configured otherwise (`--tenant-held-claims`).
///
/// A held Claim is a duplicate of an operation in flight, waiting for its outcome: an agent's
/// parallel tool calls, a gateway's retried requests. A thousand at once per tenant is far more
/// than such duplicates need, yet bounds what one tenant can make the server keep for up to a
/// minute (a few MiB of memory, a thousand open streams).
pub const DEFAULT_TENANT_HELD_CLAIMS: u32 = 1000;

/// The admission settings of `oncekey serve` (its `--tenant-*` and `--limits-file` flags); by
/// default only the held-claims bound (`DEFAULT_TENANT_HELD_CLAIMS`) applies.
#[derive(Debug, Clone)]
pub struct AdmissionConfig {
    /// Requests per second each tenant may send to Claim, Lookup and ListRecords; 0 = no limit.
    pub tenant_rate: f64,
    /// The token bucket's size; 0 = the rate, rounded up (at least 1).
    pub tenant_burst: u32,
    /// Unary RPCs (held Claims included) each tenant may have in progress at once; 0 = no limit.
    pub tenant_inflight: u32,
    /// Claims each tenant may hold by `wait` at once; 0 = no limit.
    pub tenant_held_claims: u32,
    /// Per-tenant overrides, reloaded on SIGHUP.
    pub limits_file: Option<PathBuf>,
    /// The intent guard rules (`--intent-guard`, each value one or more comma-separated rules).
    pub intent_guard: Vec<String>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            tenant_rate: 0.0,
            tenant_burst: 0,
            tenant_inflight: 0,
            tenant_held_claims: DEFAULT_TENANT_HELD_CLAIMS,
            limits_file: None,
            intent_guard: Vec::new(),
        }
    }
}

impl AdmissionConfig {
    /// Checks the settings, and that the limits file (if any) loads.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.policy().map(|_| ())
    }

    /// The limits these flags (and the limits file, read now) set.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        let bad = |flag: &str, what: &str| ConfigError(format!("{flag} {what}"));
        if !(0.0..=MAX_RATE).contains(&self.tenant_rate) {
            return Err(bad(
                "--tenant-rate",
                "must be a number of requests per second between 0 and 1000000000",
            ));
        }
        if f64::from(self.tenant_burst) > MAX_RATE {
            return Err(bad("--tenant-burst", "must be at most 1000000000"));
        }
        let defaults = self.defaults();
        let intent = IntentRules::from_flags(&self.intent_guard)
            .map_err(|e| ConfigError(format!("--intent-guard: {e}")))?;
        let policy = match &self.limits_file {
            None => Policy::new(defaults, HashMap::new()),
            Some(path) => Policy::from_file(defaults, path)
                .map_err(|e| ConfigError(format!("--limits-file: {e}")))?,
        };
        Ok(policy.with_intent_defaults(intent))
    }

    /// The limits of every tenant the limits file does not name.
    pub fn defaults(&self) -> TenantLimits {
        TenantLimits {
            rate: self.tenant_rate,
            burst: self.tenant_burst,
            inflight: self.tenant_inflight,
            held_claims: self.tenant_held_claims,
        }
    }
}

/// One tenant's limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TenantLimits {
    /// Requests per second to Claim, Lookup and ListRecords; 0 = no limit.
    pub rate: f64,
    /// The bucket's size; 0 = the rate rounded up, at least 1.
    pub burst: u32,
    /// Unary RPCs in progress at once; 0 = no limit.
    pub inflight: u32,
    /// Claims held by `wait` at once; 0 = no limit. Enforced where a Claim is held (the engine),
    /// not by the admission layer, which cannot know whether a Claim will be held.
    pub held_claims: u32,
}

impl TenantLimits {
    /// No limit at all.
    pub const OFF: TenantLimits = TenantLimits {
        rate: 0.0,
        burst: 0,
        inflight: 0,
        held_claims: 0,
    };

    /// Whether neither of the admission layer's limits (rate, in flight) applies.
    pub fn is_off(&self) -> bool {
        self.rate <= 0.0 && self.inflight == 0
    }

    /// How many requests the bucket holds when full.
    pub fn bucket_size(&self) -> f64 {
        if self.burst == 0 {
            self.rate.ceil().max(1.0)
        } else {
            f64::from(self.burst)
        }
    }
}

/// Every tenant's limits: the defaults, and the overrides of the limits file.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    defaults: TenantLimits,
    overrides: HashMap<String, TenantLimits>,
    off: bool,
    intent_defaults: Arc<IntentRules>,
    intent_overrides: HashMap<String, Arc<IntentRules>>,
}

impl Policy {
    /// `defaults` for every tenant but those in `overrides`.
    pub fn new(defaults: TenantLimits, overrides: HashMap<String, TenantLimits>) -> Self {
        let off = defaults.is_off() && overrides.values().all(TenantLimits::is_off);
        Self {
            defaults,
            overrides,
            off,
            intent_defaults: Arc::default(),
            intent_overrides: HashMap::new(),
        }
    }

    /// The same, with `rules` for every tenant the limits file gives none.
    pub fn with_intent_defaults(mut self, rules: IntentRules) -> Self {
        self.intent_defaults = Arc::new(rules);
        self
    }

    /// The intent guard rules of `tenant`.
    pub fn intent_rules(&self, tenant: &str) -> &IntentRules {
        self.intent_overrides
            .get(tenant)
            .unwrap_or(&self.intent_defaults)
    }

    /// `defaults` plus the overrides in the limits file at `path`.
    pub fn from_file(defaults: TenantLimits, path: &Path) -> Result<Self, LimitsFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| LimitsFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        let (overrides, intent) =
            parse(&text, &defaults).map_err(|(line, problem)| LimitsFileError::Line {
                path: path.to_owned(),
                line,
                problem,
            })?;
        let mut policy = Self::new(defaults, overrides);
        policy.intent_overrides = intent;
        Ok(policy)
    }

    /// The limits of `tenant`.
    pub fn limits(&self, tenant: &str) -> &TenantLimits {
        if self.overrides.is_empty() {
            return &self.defaults;
        }
        self.overrides.get(tenant).unwrap_or(&self.defaults)
    }

    /// Whether no tenant has a rate or in-flight limit (the admission layer then costs nothing).
    pub fn is_off(&self) -> bool {
        self.off
    }

    /// How many tenants the limits file names.
    pub fn overrides(&self) -> usize {
        self.overrides.len()
    }
}

/// Why a limits file was refused.
#[derive(Debug, thiserror::Error)]
pub enum LimitsFileError {
    /// The file could not be read.
    #[error("cannot read limits file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("limits file {path} line {line}: {problem}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: String,
    },
}

/// The overrides in a limits file's text, or (line number, problem) of the first bad line.
type Parsed = (
    HashMap<String, TenantLimits>,
    HashMap<String, Arc<IntentRules>>,
);

fn parse(text: &str, defaults: &TenantLimits) -> Result<Parsed, (usize, String)> {
    let mut overrides = HashMap::new();
    let mut intent = HashMap::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |problem: String| (n + 1, problem);
        let mut words = line.split_whitespace();
        let tenant = words.next().unwrap_or_default();
        if !valid_tenant(tenant) {
            return Err(bad(
                "the tenant must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$".into(),
            ));
        }
        let mut limits = *defaults;
        let mut any = false;
        for word in words {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| bad(format!("expected key=value, found {word:?}")))?;
            match key {
                "rate" => limits.rate = rate(value).map_err(|p| bad(format!("rate {p}")))?,
                "burst" => limits.burst = count(value).map_err(|p| bad(format!("burst {p}")))?,
                "inflight" => {
                    limits.inflight = count(value).map_err(|p| bad(format!("inflight {p}")))?
                }
                "held-claims" => {
                    limits.held_claims =
                        count(value).map_err(|p| bad(format!("held-claims {p}")))?
                }
                "intent-guard" => {
                    let rules = IntentRules::parse(value, ';').map_err(bad)?;
                    intent.insert(tenant.to_owned(), Arc::new(rules));
                }
                other => {
                    return Err(bad(format!(
                        "unknown key {other:?} (use rate, burst, inflight, held-claims or intent-guard)"
                    )))
                }
            }
            any = true;
        }
        if !any {
            return Err(bad(
                "no limits after the tenant (e.g. `rate=100 burst=200 inflight=50 held-claims=5000`)"
                    .into(),
            ));
        }
        if overrides.insert(tenant.to_owned(), limits).is_some() {
            return Err(bad(format!(
                "tenant {tenant} appears on an earlier line too"
            )));
        }
    }
    Ok((overrides, intent))
}

fn rate(value: &str) -> Result<f64, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|r| (0.0..=MAX_RATE).contains(r))
        .ok_or_else(|| format!("must be a number between 0 and 1000000000, found {value:?}"))
}

fn count(value: &str) -> Result<u32, String> {
    value
        .parse::<u32>()
        .ok()
        .filter(|c| f64::from(*c) <= MAX_RATE)
        .ok_or_else(|| format!("must be a whole number between 0 and 1000000000, found {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULTS: TenantLimits = TenantLimits {
        rate: 10.0,
        burst: 0,
        inflight: 4,
        held_claims: 1000,
    };

    #[test]
    fn overrides_take_the_flags_for_keys_they_leave_out() {
        let text = "# vip\nacme rate=100 burst=200 inflight=50 held-claims=20000\n\nglobex   rate=0.5 \nfree rate=0 inflight=0 held-claims=0\n";
        let policy = Policy::new(DEFAULTS, parse(text, &DEFAULTS).unwrap().0);
        assert_eq!(
            *policy.limits("acme"),
            TenantLimits {
                rate: 100.0,
                burst: 200,
                inflight: 50,
                held_claims: 20000,
            }
        );
        assert_eq!(
            *policy.limits("globex"),
            TenantLimits {
                rate: 0.5,
                burst: 0,
                inflight: 4,
                held_claims: 1000,
            }
        );
        assert_eq!(*policy.limits("free"), TenantLimits::OFF);
        assert_eq!(*policy.limits("anyone-else"), DEFAULTS);
        assert_eq!(policy.overrides(), 3);
        assert!(!policy.is_off());
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, line, problem) in [
            ("acme rate=1\nbad/tenant rate=1\n", 2, "tenant must match"),
            ("acme rate=fast\n", 1, "rate must be a number"),
            ("acme rate=-1\n", 1, "rate must be a number"),
            ("acme rate=NaN\n", 1, "rate must be a number"),
            ("acme burst=1.5\n", 1, "burst must be a whole number"),
            ("acme inflight=-3\n", 1, "inflight must be a whole number"),
            (
                "acme held-claims=x\n",
                1,
                "held-claims must be a whole number",
            ),
            ("acme speed=3\n", 1, "unknown key \"speed\""),
            ("acme rate\n", 1, "expected key=value"),
            ("#\nacme\n", 2, "no limits"),
            ("acme rate=1\nacme rate=2\n", 2, "earlier line"),
            ("acme intent-guard=payments.*=stop\n", 1, "mode \"stop\""),
        ] {
            let (n, p) = parse(text, &DEFAULTS).unwrap_err();
            assert_eq!(n, line, "{text:?}: {p}");
            assert!(p.contains(problem), "{text:?}: {p}");
        }
    }

    #[test]
    fn burst_defaults_to_the_rate_rounded_up() {
        let limits = |rate, burst| TenantLimits {
            rate,
            burst,
            ..TenantLimits::OFF
        };
        assert_eq!(limits(2.5, 0).bucket_size(), 3.0);
        assert_eq!(limits(0.1, 0).bucket_size(), 1.0);
        assert_eq!(limits(2.5, 7).bucket_size(), 7.0);
    }

    #[test]
    fn flags_are_checked_and_no_limits_is_off() {
        let args = |rate: f64| AdmissionConfig {
            tenant_rate: rate,
            ..Default::default()
        };
        assert!(args(0.0).policy().unwrap().is_off());
        // The held-claims bound is on by default, and not the admission layer's business.
        let defaults = args(0.0).policy().unwrap();
        assert_eq!(
            defaults.limits("anyone").held_claims,
            DEFAULT_TENANT_HELD_CLAIMS
        );
        assert!(!args(5.0).policy().unwrap().is_off());
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let err = args(bad).policy().unwrap_err();
            assert!(err.0.contains("--tenant-rate"), "{err}");
        }
    }

    #[test]
    fn a_missing_file_names_the_flag() {
        let err = AdmissionConfig {
            limits_file: Some("/nonexistent/oncekey-limits".into()),
            ..Default::default()
        }
        .policy()
        .unwrap_err();
        assert!(err.0.starts_with("--limits-file: cannot read"), "{err}");
    }
}
