//! The bench's key-value peers: the "idempotency keys in Redis" design (Lua scripts run with
//! EVALSHA) and the same ledger as etcd v3 transactions. Each does what Oncekey does for a Claim
//! and a Complete — fingerprint check, a lease with a fencing token, replay of the stored result —
//! with the same durability (fsync before the answer), so `oncekey bench --peer redis://…` and
//! `--peer etcd://…` compare like with like. (The PostgreSQL peer lives in `../peer.rs`.)
//!
//! These are clients of outside servers used only to measure: nothing here is on the server's
//! request path, and a peer's refusal is returned as data (`Refusal`), never a panic.

pub mod etcd;
mod etcd_pb;
pub mod redis;
mod resp;
pub mod run;

use bytes::Bytes;
use std::time::Duration;

/// Which design a `--peer` URL names, by its scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    /// `postgres://` or `postgresql://`: the classic table design (`../peer.rs`).
    Postgres,
    /// `redis://HOST:PORT`: Lua scripts on a hash per key.
    Redis,
    /// `etcd://HOST:PORT`: v3 transactions over gRPC.
    Etcd,
}

impl PeerKind {
    /// The kind a URL names, or `None` for another scheme.
    pub fn of(url: &str) -> Option<Self> {
        let scheme = url.split_once("://")?.0;
        match scheme {
            "postgres" | "postgresql" => Some(Self::Postgres),
            "redis" => Some(Self::Redis),
            "etcd" => Some(Self::Etcd),
            _ => None,
        }
    }

    /// The target name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Postgres => "postgres",
            Self::Redis => "redis",
            Self::Etcd => "etcd",
        }
    }
}

/// `HOST:PORT` of a `scheme://HOST:PORT` URL (an optional trailing `/` allowed; no path, user or
/// query: these peers take none).
pub fn authority<'a>(url: &'a str, scheme: &str) -> Result<&'a str, String> {
    let rest = url
        .strip_prefix(scheme)
        .and_then(|r| r.strip_prefix("://"))
        .ok_or_else(|| format!("--peer {url}: expected {scheme}://HOST:PORT"))?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let valid = rest
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
    if !valid || rest.contains(['/', '@', '?', '#']) {
        return Err(format!("--peer {url}: expected {scheme}://HOST:PORT"));
    }
    Ok(rest)
}

/// What every Claim and Complete of one run carries, fixed up front as the gRPC side does.
#[derive(Debug, Clone)]
pub struct Design {
    /// Prefix of every key the peer writes (tenant and namespace, as Oncekey scopes records).
    pub prefix: String,
    /// The fingerprint of the request's arguments (the bytes Oncekey's Claims carry).
    pub fingerprint: Bytes,
    /// How long an acquired lease lasts.
    pub lease: Duration,
    /// How long a record is kept.
    pub retention: Duration,
    /// The stored result: a status code and a body.
    pub code: u32,
    /// The stored result's body.
    pub body: Bytes,
}

impl Design {
    /// Oncekey's defaults: a 30 s lease, 24 h retention, result code 200.
    pub fn new(tenant: &str, namespace: &str, fingerprint: &[u8], body: Bytes) -> Self {
        Self {
            prefix: format!("oncekey-bench/{tenant}/{namespace}/"),
            fingerprint: Bytes::copy_from_slice(fingerprint),
            lease: Duration::from_secs(30),
            retention: Duration::from_secs(24 * 3600),
            code: 200,
            body,
        }
    }

    /// The stored name of `key`.
    fn key(&self, key: &str) -> String {
        let mut name = String::with_capacity(self.prefix.len() + key.len());
        name.push_str(&self.prefix);
        name.push_str(key);
        name
    }
}

/// What a peer's Claim answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the lease with this fencing token.
    Acquired {
        /// The fencing token Complete must present.
        token: u64,
    },
    /// The stored result, replayed.
    Completed {
        /// Its status code.
        code: u32,
        /// Its body.
        body: Bytes,
    },
    /// Another caller holds a live lease.
    InProgress,
}

/// Why a peer refused a Claim or a Complete, or could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The key holds another request's fingerprint.
    #[error("KEY_REUSED")]
    KeyReused,
    /// The token is not the key's current one (taken over, or the key is gone).
    #[error("LEASE_LOST")]
    LeaseLost,
    /// The key was already completed with another result.
    #[error("ALREADY_SETTLED")]
    AlreadySettled,
    /// The peer failed or answered something this design never writes.
    #[error("{0}")]
    Failed(String),
}

/// The proto `ClaimOutcome` of a peer's answer and the token (the driver's view).
pub fn outcome(claim: &Claim, body: &[u8]) -> Result<super::claimed::Claimed, String> {
    use super::claimed::Claimed;
    Ok(match claim {
        Claim::Acquired { token } => Claimed {
            outcome: 1,
            token: *token,
        },
        // The bench's own check: a replay returns exactly what was stored.
        Claim::Completed { body: stored, .. } if stored.as_ref() != body => {
            return Err("replay returned another body than the stored one".into())
        }
        Claim::Completed { .. } => Claimed {
            outcome: 2,
            token: 0,
        },
        Claim::InProgress => Claimed {
            outcome: 4,
            token: 0,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_design_and_address() {
        assert_eq!(
            PeerKind::of("postgres://u@h:1/db"),
            Some(PeerKind::Postgres)
        );
        assert_eq!(PeerKind::of("postgresql://h/db"), Some(PeerKind::Postgres));
        assert_eq!(
            PeerKind::of("redis://127.0.0.1:6379"),
            Some(PeerKind::Redis)
        );
        assert_eq!(PeerKind::of("etcd://127.0.0.1:2379"), Some(PeerKind::Etcd));
        assert_eq!(PeerKind::of("mysql://h"), None);
        assert_eq!(PeerKind::of("redis"), None);
        assert_eq!(
            authority("redis://127.0.0.1:6379/", "redis"),
            Ok("127.0.0.1:6379")
        );
        assert_eq!(
            authority("etcd://localhost:2379", "etcd"),
            Ok("localhost:2379")
        );
        for bad in [
            "redis://127.0.0.1",
            "redis://:6379",
            "redis://u:p@h:1",
            "redis://h:1/0",
            "redis://h:99999",
            "etcd://h:1",
        ] {
            assert!(authority(bad, "redis").is_err(), "{bad}");
        }
    }

    #[test]
    fn a_replay_must_return_the_stored_body() {
        let replay = |body: &'static [u8]| Claim::Completed {
            code: 200,
            body: Bytes::from_static(body),
        };
        assert_eq!(outcome(&replay(b"xx"), b"xx").unwrap().outcome, 2);
        assert!(outcome(&replay(b"xy"), b"xx").is_err());
        let acquired = outcome(&Claim::Acquired { token: 7 }, b"").unwrap();
        assert_eq!((acquired.outcome, acquired.token), (1, 7));
        assert_eq!(outcome(&Claim::InProgress, b"").unwrap().outcome, 4);
    }
}

/// For the tests that run a design against its real server.
#[cfg(test)]
pub(crate) mod test_support {
    use super::Design;
    use bytes::Bytes;
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Starts (or reuses) the peer with `scripts/NAME start` and returns its URL; panics with the
    /// script's output when it cannot (a missing peer fails the test, never skips it).
    pub fn start(name: &str) -> String {
        static STARTED: Mutex<Option<HashMap<String, String>>> = Mutex::new(None);
        let mut started = STARTED.lock().unwrap_or_else(|e| e.into_inner());
        let started = started.get_or_insert_with(HashMap::new);
        if let Some(url) = started.get(name) {
            return url.clone();
        }
        let script = format!("{}/../scripts/{name}", env!("CARGO_MANIFEST_DIR"));
        let out = std::process::Command::new(&script)
            .arg("start")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{script} start failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = stdout.lines().last().unwrap_or_default().trim().to_owned();
        started.insert(name.to_owned(), url.clone());
        url
    }

    /// A design with its own key prefix (tests share one server and run in parallel).
    pub fn design(lease: Duration, fingerprint: &[u8]) -> Design {
        let mut design = Design::new(
            "test",
            &format!("t{:016x}", rand::random::<u64>()),
            fingerprint,
            Bytes::from_static(br#"{"charged":true}"#),
        );
        design.lease = lease;
        design
    }
}
