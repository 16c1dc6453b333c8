//! Key privacy (docs/api.md, "Key privacy"): in the namespaces `--key-privacy` makes private,
//! every key a request names is replaced, on the way in, by its HMAC under the key ring's `hmac`
//! key (`~h:` + 43 base64url characters), so the store, the logs, the metrics and the listings
//! only ever see that form. A key already of that form is taken as is (an operator acting on
//! what a listing shows). Answers to a request that named a key carry the key as the request
//! wrote it (`LedgerService::answer`).
//!
//! This is the one place a request's record id is made (`KeyPrivacy::record_id`): validation
//! applies to the key as the client wrote it, then the rule. Nothing here reads a store, and no
//! key, hashed or not, is logged here.

use super::convert;
use super::error::ApiError;
use super::pattern::{ByNamespace, Pattern};
use super::LedgerService;
use crate::engine::EngineError;
use crate::ledger::{ClaimArgs, Millis, Record, RecordId};
use crate::store::{Store, StoreError};
use crate::telemetry::key_hash;
use oncekey_api::v1;
use oncekey_sealing::{is_hashed, KeyRing, Sealer};
use std::sync::Arc;

/// Which namespaces keep their keys only as an HMAC (`--key-privacy`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrivacyRules(ByNamespace<bool>);

impl PrivacyRules {
    /// Rules from several flag values, each one or more comma-separated rules: `hmac` (every
    /// namespace), `PATTERN=hmac` or `PATTERN=off`. The error names the rule, not the flag.
    pub fn from_flags(values: &[String]) -> Result<Self, String> {
        let mut rules = ByNamespace::default();
        for item in values
            .iter()
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let (pattern, mode) = item.split_once('=').unwrap_or(("*", item));
            let hashed = match mode {
                "hmac" => true,
                "off" if item.contains('=') => false,
                _ => {
                    return Err(format!(
                        "key privacy rule {item:?}: expected hmac, PATTERN=hmac or PATTERN=off"
                    ))
                }
            };
            let pattern =
                Pattern::parse(pattern).map_err(|e| format!("key privacy rule {item:?}: {e}"))?;
            rules.push(pattern, hashed);
        }
        Ok(Self(rules))
    }

    /// Whether the keys of `namespace` are kept as an HMAC.
    pub fn hashes(&self, namespace: &str) -> bool {
        self.0.get(namespace).copied().unwrap_or(false)
    }

    /// Whether some namespace keeps its keys as an HMAC (the key ring then needs an `hmac` key).
    pub fn any(&self) -> bool {
        self.0.values().any(|hashed| *hashed)
    }
}

/// Key privacy as the server runs it: the rules, and the sealer whose key ring hashes (the one
/// the store seals with, reloaded in place).
#[derive(Clone)]
pub struct KeyPrivacy {
    rules: Arc<PrivacyRules>,
    sealer: Sealer,
}

impl KeyPrivacy {
    /// Keys hashed as `rules` say, with `sealer`'s `hmac` key.
    pub fn new(rules: PrivacyRules, sealer: Sealer) -> Self {
        Self {
            rules: Arc::new(rules),
            sealer,
        }
    }

    /// No key hashed, and an empty key ring.
    pub fn off() -> Self {
        Self::new(PrivacyRules::default(), Sealer::new(KeyRing::empty()))
    }

    /// Whether some namespace's keys are hashed.
    pub fn any(&self) -> bool {
        self.rules.any()
    }

    /// The sealer (its key ring: the primary key id, the `hmac` key).
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// `key` of `namespace` as stored: its HMAC when the namespace is private and the key is not
    /// already of the hashed form; else the key itself.
    pub fn stored_key(&self, tenant: &str, namespace: &str, key: &str) -> Result<String, ApiError> {
        if !self.rules.hashes(namespace) || is_hashed(key) {
            return Ok(key.to_owned());
        }
        // Never so: a ring without an `hmac` key is refused at start and on reload. Refusing is
        // the safe answer: storing the key in clear would break the promise.
        self.sealer.hash_key(tenant, namespace, key).ok_or_else(|| {
            ApiError::Engine(EngineError::Store(StoreError::Internal(
                "key privacy is on but the key ring has no hmac key".into(),
            )))
        })
    }

    /// The record id of a request: the tenant from credentials, the namespace and key validated
    /// as the client wrote them, then the key as stored.
    pub fn record_id(
        &self,
        tenant: &str,
        namespace: &str,
        key: &str,
    ) -> Result<RecordId, ApiError> {
        convert::namespace("namespace", namespace)?;
        convert::key("key", key)?;
        let key = self.stored_key(tenant, namespace, key)?;
        Ok(RecordId::new(tenant, namespace, key))
    }
}

/// A Claim's refusal naming its parent (`BUDGET_EXHAUSTED`) names the parent's key as the
/// request wrote it, not as stored: the caller named it.
pub fn parent_as_asked(e: EngineError, req: &v1::ClaimRequest) -> EngineError {
    match (e, &req.parent) {
        (
            EngineError::BudgetExhausted {
                mut parent,
                exhausted,
            },
            Some(asked),
        ) if asked.namespace == parent.namespace => {
            parent.key = asked.key.clone();
            EngineError::BudgetExhausted { parent, exhausted }
        }
        (e, _) => e,
    }
}

/// The hash of a request's key that its span and failure log carry (`telemetry::key_hash`): of
/// the key as stored, so that with key privacy on, logs and traces never hold a plain hash of a
/// private namespace's key (anyone could test a guess against that).
pub(super) fn logged_key_hash(
    privacy: Option<&KeyPrivacy>,
    tenant: &str,
    namespace: &str,
    key: &str,
) -> String {
    match privacy {
        Some(p) if !key.is_empty() && p.rules.hashes(namespace) => {
            // Without an hmac key (never so), the hash of nothing rather than of the key.
            key_hash(&p.stored_key(tenant, namespace, key).unwrap_or_default())
        }
        _ => key_hash(key),
    }
}

/// `record` on the wire with `key` — the key as the request that named the record wrote it —
/// in place of the stored one (only for that record: a parent it names stays as stored).
pub(super) fn as_asked(mut record: v1::Record, id: &RecordId, key: &str) -> v1::Record {
    if record.namespace == id.namespace && record.key == id.key {
        key.clone_into(&mut record.key);
    }
    record
}

impl<S: Store> LedgerService<S> {
    /// The same service with key privacy (none by default) and the key ring of its store.
    pub fn with_privacy(mut self, privacy: KeyPrivacy) -> Self {
        self.privacy = privacy;
        self
    }

    /// The sealer of the key ring the service runs with.
    pub(super) fn sealer(&self) -> &Sealer {
        self.privacy.sealer()
    }

    /// The record id of a request (`KeyPrivacy::record_id`).
    pub(super) fn record_id(
        &self,
        tenant: &str,
        namespace: &str,
        key: &str,
    ) -> Result<RecordId, ApiError> {
        self.privacy.record_id(tenant, namespace, key)
    }

    /// A Claim's arguments (`convert::claim_args`), its parent's key as stored under the
    /// parent namespace's rule.
    pub(super) fn claim_args(
        &self,
        tenant: &str,
        req: &v1::ClaimRequest,
    ) -> Result<(ClaimArgs, Option<Millis>), ApiError> {
        let (mut args, wait) = convert::claim_args(req, &self.limits)?;
        if let Some(parent) = args.parent.as_mut() {
            parent.key = self
                .privacy
                .stored_key(tenant, &parent.namespace, &parent.key)?;
        }
        Ok((args, wait))
    }

    /// A ListRecords request with its `parent` filter's key as stored (validated first as
    /// written), so that a parent named as the client knows it finds its children.
    pub(super) fn list_request_as_stored(
        &self,
        tenant: &str,
        req: &v1::ListRecordsRequest,
    ) -> Result<Option<v1::ListRecordsRequest>, ApiError> {
        let Some(parent) = &req.parent else {
            return Ok(None);
        };
        convert::namespace("parent.namespace", &parent.namespace)?;
        convert::key("parent.key", &parent.key)?;
        let key = self
            .privacy
            .stored_key(tenant, &parent.namespace, &parent.key)?;
        if key == parent.key {
            return Ok(None);
        }
        let mut stored = req.clone();
        if let Some(p) = stored.parent.as_mut() {
            p.key = key;
        }
        Ok(Some(stored))
    }

    /// The answer's record of a request that named `id` as `key`: on the wire as now, with the
    /// key as the request wrote it.
    pub(super) fn answer(&self, record: Record, id: &RecordId, key: &str) -> v1::Record {
        as_asked(convert::record(record, self.now()), id, key)
    }
}

#[cfg(test)]
mod tests;
