//! The verdict of a trial, from the outside: the effect file and final Lookups (and the receipt
//! history, to tell a repeat after a takeover from a duplicate), never the service's own answers
//! alone.

use super::{KeySpec, Workload, MAX_LEASE};
use oncekey_api::v1;
use oncekey_client::{Claim, Claimed, Client, OperationKey, RecordStatus, Semantics, StoredResult};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

impl Workload {
    /// The verdict over the effect file and final Lookups; then claims every key that is not
    /// final (after its lease ran out) to prove it claimable, and settles it from the effect file
    /// like a reconciler would. `rpc` is a raw client for history lookups.
    pub async fn verify(&self, client: &Client, mut rpc: oncekey_client::LedgerRpc) -> Verdict {
        let mut v = Verdict::default();
        let keys: Vec<KeySpec> = self.keys.lock().unwrap().clone();
        let effects = self.effects.by_key();
        let acked = self.acked.lock().unwrap().clone();
        let replays = self.replays.lock().unwrap().clone();
        v.keys = keys.len();
        v.effects = effects.values().map(Vec::len).sum();
        v.acked = acked.len();
        v.replays = replays.len();
        let spec: HashMap<&str, &KeySpec> = keys.iter().map(|k| (k.name.as_str(), k)).collect();

        // Duplicates, counted in the effect file.
        for (name, list) in &effects {
            let s = spec[name.as_str()];
            let mut tokens: Vec<u64> = list.iter().map(|e| e.token).collect();
            let in_order = tokens.windows(2).all(|w| w[0] < w[1]);
            tokens.sort_unstable();
            tokens.dedup();
            if tokens.len() != list.len() {
                v.violations.push(format!(
                    "{name}: two executions under one fencing token: {list:?}"
                ));
            }
            if s.at_most_once {
                if list.len() > 1 {
                    v.violations.push(format!(
                        "{name}: AT_MOST_ONCE effect performed {} times: {list:?}",
                        list.len()
                    ));
                }
                continue;
            }
            if list.len() < 2 {
                continue;
            }
            v.alo_duplicates += list.len() - 1;
            if !in_order {
                v.violations.push(format!(
                    "{name}: a repeated effect ran under an older token: {list:?}"
                ));
            }
            // Between two executions some lease must have expired and been taken over: a token
            // in (previous, repeat] acquired by a TAKEOVER. (Tokens also move on after a
            // retryable failure, which here always comes before the effect, never after it.)
            let history = history(&mut rpc, &self.ns, name).await;
            for pair in list.windows(2) {
                let (prev, repeat) = (&pair[0], &pair[1]);
                let between = |h: &&v1::RecordEvent| {
                    h.fencing_token > prev.token && h.fencing_token <= repeat.token
                };
                let events: Vec<&v1::RecordEvent> = history.iter().filter(between).collect();
                if events
                    .iter()
                    .any(|h| h.kind == v1::EventKind::Takeover as i32)
                {
                    v.repeats_after_takeover += 1;
                } else if history.first().is_none_or(|h| h.fencing_token > prev.token) {
                    // The acquisitions fell out of the 64-event history window.
                    v.repeats_unverified += 1;
                } else {
                    v.violations.push(format!(
                        "{name}: token {} re-ran the effect of token {} without a takeover: {events:?}",
                        repeat.token, prev.token
                    ));
                }
            }
        }

        // Final states; losses; replays.
        let mut finals: BTreeMap<String, Option<oncekey_client::Record>> = BTreeMap::new();
        for k in &keys {
            let key = OperationKey::from_raw(self.ns.as_str(), k.name.as_str()).unwrap();
            finals.insert(k.name.clone(), lookup_patiently(client, &key).await);
        }
        for (name, body) in &acked {
            match &finals[name] {
                Some(r) if r.status == RecordStatus::Succeeded => {
                    if r.result.as_ref().map(|r| &r.body) != Some(body) {
                        v.violations
                            .push(format!("{name}: acknowledged result changed"));
                    }
                }
                other => v.violations.push(format!(
                    "{name}: acknowledged completion lost, now {:?}",
                    other.as_ref().map(|r| r.status)
                )),
            }
        }
        for (name, body) in &replays {
            let stored = finals[name].as_ref().and_then(|r| r.result.as_ref());
            if stored.map(|r| &r.body) != Some(body) {
                v.violations.push(format!(
                    "{name}: COMPLETED replayed a result that is not stored"
                ));
            }
            let produced: serde_json::Value = serde_json::from_slice(body).unwrap();
            let token = produced["token"].as_u64().unwrap();
            if !effects
                .get(name)
                .is_some_and(|l| l.iter().any(|e| e.token == token))
            {
                v.violations.push(format!(
                    "{name}: COMPLETED with a result no recorded effect produced (token {token})"
                ));
            }
        }
        for record in finals.values() {
            let status = record.as_ref().map(|r| r.status);
            *v.final_status.entry(format!("{status:?}")).or_default() += 1;
        }

        // Everything not final must be claimable once its lease ran out.
        tokio::time::sleep(MAX_LEASE + Duration::from_millis(500)).await;
        for (name, record) in &finals {
            let status = record.as_ref().map(|r| r.status);
            if matches!(
                status,
                Some(RecordStatus::Succeeded) | Some(RecordStatus::Failed)
            ) {
                continue;
            }
            let s = spec[name.as_str()];
            let key = OperationKey::from_raw(self.ns.as_str(), name.as_str()).unwrap();
            let claim = Claim::new(&key, &json!({ "key": name }))
                .unwrap()
                .semantics(if s.at_most_once {
                    Semantics::AtMostOnce
                } else {
                    Semantics::AtLeastOnce
                })
                .lease_ttl(Duration::from_secs(5))
                // An at-most-once record whose holder vanished is claimed by a reconciler.
                .reconcile(
                    s.at_most_once
                        && matches!(
                            status,
                            Some(RecordStatus::Unknown) | Some(RecordStatus::Processing)
                        ),
                )
                .owner("verifier");
            match client.claim(&claim).await {
                Ok(Claimed::Acquired { lease, .. }) => {
                    v.claimable += 1;
                    // Settle it from the outside world, as a reconciler would.
                    let done = effects.get(name).and_then(|l| l.last());
                    let body = match done {
                        Some(e) => json!({ "key": name, "token": e.token, "worker": e.worker }),
                        None => json!({ "key": name, "token": lease.token, "worker": 999 }),
                    };
                    if done.is_none() {
                        // Nothing happened outside yet: perform it now, under this lease.
                        self.effects.append(name, lease.token, 999, lease.attempt);
                    }
                    let result = StoredResult::json(&body).unwrap();
                    client.complete(&key, lease.token, result).await.unwrap();
                }
                other => v
                    .violations
                    .push(format!("{name} ({status:?}) is not claimable: {other:?}")),
            }
        }
        v
    }
}

/// A Lookup retried through restarts; `None` when absent.
pub async fn lookup_patiently(
    client: &Client,
    key: &OperationKey,
) -> Option<oncekey_client::Record> {
    for _ in 0..60 {
        match client.lookup(key).await {
            Ok(r) => return r,
            Err(e) if e.is_transient() => tokio::time::sleep(Duration::from_millis(250)).await,
            Err(e) => panic!("lookup: {e}"),
        }
    }
    panic!("lookup: the server stayed unavailable");
}

async fn history(rpc: &mut oncekey_client::LedgerRpc, ns: &str, key: &str) -> Vec<v1::RecordEvent> {
    for _ in 0..40 {
        let request = v1::LookupRequest {
            namespace: ns.into(),
            key: key.into(),
            include_history: true,
        };
        match rpc.lookup(request).await {
            Ok(r) => return r.into_inner().history,
            Err(s) if s.code() == tonic::Code::NotFound => return Vec::new(),
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    panic!("history lookup: the server stayed unavailable");
}

/// What [`Workload::verify`] found.
#[derive(Debug, Default)]
pub struct Verdict {
    /// Keys used.
    pub keys: usize,
    /// Effects in the effect file.
    pub effects: usize,
    /// Completes acknowledged to workers.
    pub acked: usize,
    /// COMPLETED answers replayed to workers.
    pub replays: usize,
    /// AT_LEAST_ONCE effects performed again (allowed: each under a newer token after a takeover).
    pub alo_duplicates: usize,
    /// Repeats whose token the history shows acquired by a takeover.
    pub repeats_after_takeover: usize,
    /// Repeats whose acquisition fell out of the 64-event history window.
    pub repeats_unverified: usize,
    /// Non-final keys that a Claim acquired after their lease ran out.
    pub claimable: usize,
    /// Final Lookup status → number of keys (before the claimability check).
    pub final_status: BTreeMap<String, usize>,
    /// Broken guarantees.
    pub violations: Vec<String>,
}

impl Verdict {
    /// Panics with every violation.
    pub fn assert_clean(&self) {
        assert!(
            self.violations.is_empty(),
            "{} violations:\n{}",
            self.violations.len(),
            self.violations.join("\n")
        );
    }
}
