//! The intent guard's index (docs/api.md, "Intent guard"): which keys of a tenant's namespace
//! were claimed with one fingerprint within the intent window.
//!
//! The index is kept as records of the ledger's own store, so every store keeps it with the
//! same compare-and-set, durability and expiry as any record, and no store needs a table of its
//! own: one entry per (tenant, namespace, fingerprint), in the reserved namespace
//! `INTENT_NAMESPACE` (no Claim can name it: namespaces start with `[a-z0-9]`), key
//! `"<namespace> <fingerprint hex>"`, status SUCCEEDED, its keys in the result body, expiring a
//! window after its newest key. Listings never show it to callers (`is_internal`).
//!
//! Pure: the engine reads the entry and the other keys' records, and writes what `admit`
//! decides with one conditional write.

use super::{Millis, OpResult, Record, RecordId, Semantics, Status, Transition};
use std::collections::HashMap;

/// The reserved namespace of the index entries.
pub const INTENT_NAMESPACE: &str = "~intent";
/// Most keys one entry keeps (the oldest go first).
pub(crate) const MAX_INTENT_KEYS: usize = 16;
/// Most other keys a Claim's answer names.
pub(crate) const MAX_MATCHES: usize = 8;
/// How long a key whose first Claim wrote the entry but whose record is not there (yet) counts
/// as live (PROCESSING): its Claim is being written, or died in between.
pub(crate) const PENDING_GRACE: Millis = 30_000;
/// Shortest and longest intent window.
pub const MIN_WINDOW: Millis = 1_000;
/// See `MIN_WINDOW`.
pub const MAX_WINDOW: Millis = 24 * 3_600_000;
/// The window when a rule names none.
pub const DEFAULT_WINDOW: Millis = 600_000;
const CONTENT_TYPE: &str = "application/x-oncekey-intents";

/// What the guard does with a suspected duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum GuardMode {
    /// No check.
    #[default]
    Off,
    /// Let it through, naming the other keys.
    Warn,
    /// Refuse it (DUPLICATE_INTENT) unless the repeat is deliberate.
    Refuse,
}

impl GuardMode {
    /// The mode's name in flags and files (`off`, `warn`, `refuse`).
    pub fn name(self) -> &'static str {
        match self {
            GuardMode::Off => "off",
            GuardMode::Warn => "warn",
            GuardMode::Refuse => "refuse",
        }
    }
}

/// The guard a Claim runs under: the namespace's setting made stricter by the Claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntentRule {
    /// Warn or refuse (a Claim under `Off` is not checked).
    pub mode: GuardMode,
    /// How long a key counts, from when it was claimed.
    pub window: Millis,
    /// The Claim says the repeat is deliberate.
    pub repeat: bool,
}

/// One key of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentKey {
    /// The key.
    pub key: String,
    /// When it was claimed with the entry's fingerprint.
    pub at: Millis,
    /// The guard refused it (no record was created).
    pub refused: bool,
}

/// Another key as a Claim's answer names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentMatch {
    /// The other key.
    pub key: String,
    /// Its status now; `None` for a refused key (it has no record).
    pub status: Option<Status>,
    /// When it was claimed.
    pub at: Millis,
    /// The guard refused it.
    pub refused: bool,
}

/// What the guard decided for a Claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No other live key: go on.
    Clear,
    /// Other live keys, let through (warned or deliberate): go on, naming them.
    Warned(Vec<IntentMatch>),
    /// Refused: answer DUPLICATE_INTENT naming them; create nothing.
    Refused(Vec<IntentMatch>),
}

/// The id of the entry of `fingerprint` in `namespace` of `tenant`.
pub fn entry_id(tenant: &str, namespace: &str, fingerprint: &[u8; 32]) -> RecordId {
    RecordId::new(
        tenant,
        INTENT_NAMESPACE,
        format!("{namespace} {}", hex(fingerprint)),
    )
}

/// Whether a record is the guard's own (never shown to callers).
pub fn is_internal(record: &Record) -> bool {
    record.id.namespace == INTENT_NAMESPACE
}

/// The (namespace, fingerprint) an entry is of; `None` for a record that is not an entry.
pub fn entry_of(record: &Record) -> Option<(&str, [u8; 32])> {
    if !is_internal(record) {
        return None;
    }
    let (namespace, _) = record.id.key.split_once(' ')?;
    Some((namespace, record.fingerprint))
}

/// The keys an entry holds, oldest first.
pub fn keys(entry: &Record) -> Vec<IntentKey> {
    let body = entry.result.as_ref().map_or(&[][..], |r| &r.body[..]);
    String::from_utf8_lossy(body)
        .lines()
        .filter_map(|line| {
            let (at, rest) = line.split_once(' ')?;
            let (flag, key) = rest.split_once(' ')?;
            Some(IntentKey {
                key: key.to_owned(),
                at: at.parse().ok()?,
                refused: flag == "R",
            })
        })
        .collect()
}

/// The keys of `entry` (if any) other than `key` that a Claim at `now` under `rule` would be
/// told of: claimed within the window and live (`statuses` has their record's status; a key
/// missing there counts as live while its Claim may still be being written).
pub(crate) fn others(
    entry: Option<&Record>,
    key: &str,
    rule: &IntentRule,
    statuses: &HashMap<String, Option<Status>>,
    now: Millis,
) -> Vec<IntentMatch> {
    let Some(entry) = entry.filter(|e| is_internal(e)) else {
        return Vec::new();
    };
    let mut found: Vec<IntentMatch> = keys(entry)
        .into_iter()
        .filter(|k| k.key != key && !k.refused && k.at.saturating_add(rule.window) > now)
        .filter_map(|k| {
            let recent = k.at.saturating_add(PENDING_GRACE) > now;
            let status = match statuses.get(&k.key) {
                Some(Some(status)) => *status,
                // Absent but within its grace: its first Claim is still being written.
                Some(None) | None if recent => Status::Processing,
                // Read and absent: its Claim died before creating it, or it was abandoned. Not
                // read and older: beyond the newest keys the caller looked at (`to_read`).
                Some(None) | None => return None,
            };
            Some(IntentMatch {
                key: k.key,
                status: Some(status),
                at: k.at,
                refused: false,
            })
        })
        .collect();
    found.reverse();
    found.truncate(MAX_MATCHES);
    found
}

/// The other keys of `entry` whose records a Claim of `key` at `now` under `rule` reads: the
/// newest `MAX_MATCHES` claimed within the window and not refused (older ones are not named).
pub fn to_read(entry: &Record, key: &str, rule: &IntentRule, now: Millis) -> Vec<String> {
    let mut keys: Vec<String> = keys(entry)
        .into_iter()
        .filter(|k| k.key != key && !k.refused && k.at.saturating_add(rule.window) > now)
        .map(|k| k.key)
        .collect();
    keys.reverse();
    keys.dedup();
    keys.truncate(MAX_MATCHES);
    keys
}

/// Decides the guard for a Claim of `id` with `fingerprint` at `now` on the stored `entry`,
/// and the entry write that remembers it (this key added, refused or not).
pub fn admit(
    id: &RecordId,
    fingerprint: &[u8; 32],
    entry: Option<&Record>,
    rule: &IntentRule,
    statuses: &HashMap<String, Option<Status>>,
    now: Millis,
) -> (Transition, Verdict) {
    let matches = others(entry, &id.key, rule, statuses, now);
    let verdict = match (matches.is_empty(), rule.mode, rule.repeat) {
        (true, _, _) => Verdict::Clear,
        (false, GuardMode::Refuse, false) => Verdict::Refused(matches),
        (false, _, _) => Verdict::Warned(matches),
    };
    let refused = matches!(verdict, Verdict::Refused(_));
    let live = entry.filter(|e| is_internal(e));
    let mut kept: Vec<IntentKey> = live
        .map(keys)
        .unwrap_or_default()
        .into_iter()
        .filter(|k| k.key != id.key && k.at.saturating_add(rule.window) > now)
        .collect();
    // A full entry already shows the duplicates: a further one is answered from it without a
    // write, so that many keys with one argument set at once (a hot one under `warn`, or a flood
    // of refusals) do not take turns writing one record. A clear verdict always writes: that
    // write is what makes racing new keys find each other.
    if !matches!(verdict, Verdict::Clear) && kept.len() >= MAX_INTENT_KEYS {
        let unchanged = Transition {
            record: live.cloned(),
            change: super::Change::Keep,
        };
        return (unchanged, verdict);
    }
    kept.push(IntentKey {
        key: id.key.clone(),
        at: now,
        refused,
    });
    if kept.len() > MAX_INTENT_KEYS {
        kept.drain(..kept.len() - MAX_INTENT_KEYS);
    }
    let expires = kept
        .iter()
        .map(|k| k.at)
        .max()
        .unwrap_or(now)
        .saturating_add(rule.window)
        .max(live.and_then(|e| e.expires_at).unwrap_or(0));
    let entry = entry_id(&id.tenant, &id.namespace, fingerprint);
    let record = entry_record(&entry, *fingerprint, &kept, live, expires, now);
    let transition = match live {
        Some(current) => Transition::replace(current, record, true),
        None => Transition {
            record: Some(record),
            change: super::Change::Insert,
        },
    };
    (transition, verdict)
}

fn entry_record(
    id: &RecordId,
    fingerprint: [u8; 32],
    keys: &[IntentKey],
    current: Option<&Record>,
    expires_at: Millis,
    now: Millis,
) -> Record {
    let body = keys
        .iter()
        .map(|k| format!("{} {} {}\n", k.at, if k.refused { "R" } else { "L" }, k.key))
        .collect::<String>();
    Record {
        id: id.clone(),
        status: Status::Succeeded,
        fingerprint,
        semantics: Semantics::AtLeastOnce,
        fencing_token: 0,
        attempt: 0,
        dedup_hits: 0,
        lease_owner: String::new(),
        lease_expires_at: None,
        result: Some(OpResult {
            code: 0,
            body: body.into_bytes(),
            content_type: CONTENT_TYPE.into(),
            metadata: Default::default(),
        }),
        error: None,
        parent: None,
        created_at: current.map_or(now, |c| c.created_at),
        updated_at: now,
        expires_at: Some(expires_at),
        retention: (expires_at - now).max(MIN_WINDOW),
        version: current.map_or(1, |c| c.version + 1),
        history: Vec::new(),
        require_approval: false,
        max_attempts: 0,
        reconciliations: 0,
        approval: None,
        kept_until: None,
        budget: None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
#[path = "intent_tests.rs"]
mod tests;
