//! Sessions without server-side state: the signed-in operator's credentials, name, scopes and
//! CSRF secret travel in one cookie sealed with AES-256-GCM under the session key, so any replica
//! holding the same key can read it and nobody else can read or change it. The browser sees
//! only ciphertext; the token never appears in a URL, a page or a log.
//!
//! A session ends `--idle-timeout` after the last page view (`seen`, refreshed by pages, not by
//! the live refresh) and `--session-lifetime` after sign-in; sign-out clears the cookie.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bound into every sealed cookie, so a ciphertext made for something else does not open.
const AAD: &[u8] = b"oncekey-console-session-v1";

/// What an operator's token may do, as the ledger answered probes at sign-in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Scopes {
    /// Claim, Complete, Fail (reconciliation).
    pub(crate) ledger: bool,
    /// Approve, Reject.
    pub(crate) approve: bool,
    /// Purge.
    pub(crate) admin: bool,
}

/// How the operator authenticates to the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Credential {
    /// A bearer token (servers with a tokens file).
    Token(String),
    /// A tenant header (dev-mode servers).
    Tenant(String),
}

/// One signed-in operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Session {
    pub(crate) credential: Credential,
    /// The operator's name, recorded in reconciliation receipts.
    pub(crate) name: String,
    pub(crate) scopes: Scopes,
    /// The CSRF secret every form of this session carries (hex).
    pub(crate) csrf: String,
    /// Unix seconds of the sign-in.
    pub(crate) signed_in: u64,
    /// Unix seconds of the last page view.
    pub(crate) seen: u64,
}

/// Now, in Unix seconds.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// 32 random bytes as 64 hex digits.
pub(crate) fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

impl Session {
    /// A session starting now.
    pub(crate) fn new(credential: Credential, name: String, scopes: Scopes) -> Self {
        let now = now();
        Self {
            credential,
            name,
            scopes,
            csrf: random_hex(),
            signed_in: now,
            seen: now,
        }
    }

    /// Whether the session is still alive at `now`.
    pub(crate) fn alive(&self, now: u64, idle: Duration, lifetime: Duration) -> bool {
        now < self.seen.saturating_add(idle.as_secs())
            && now < self.signed_in.saturating_add(lifetime.as_secs())
    }

    /// The tenant a dev-mode session names (token sessions: the ledger knows).
    pub(crate) fn tenant(&self) -> Option<&str> {
        match &self.credential {
            Credential::Tenant(t) => Some(t),
            Credential::Token(_) => None,
        }
    }
}

/// Seals and opens cookies with one key.
pub(crate) struct Sealer {
    key: LessSafeKey,
}

impl Sealer {
    /// A sealer with this 256-bit key.
    pub(crate) fn new(key: &[u8; 32]) -> Self {
        let key = UnboundKey::new(&AES_256_GCM, key).expect("AES-256-GCM takes any 32-byte key");
        Self {
            key: LessSafeKey::new(key),
        }
    }

    /// `value` as JSON, encrypted under a fresh random nonce: base64url(nonce ‖ ciphertext ‖ tag).
    pub(crate) fn seal<T: Serialize>(&self, value: &T) -> String {
        let mut data = serde_json::to_vec(value).expect("plain data serializes");
        let nonce_bytes: [u8; NONCE_LEN] = rand::random();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce_bytes),
                Aad::from(AAD),
                &mut data,
            )
            .expect("a cookie is far below AES-GCM's length limit");
        let mut out = nonce_bytes.to_vec();
        out.extend_from_slice(&data);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// The value `seal` made, or `None` for anything else (another key, a changed byte, junk).
    pub(crate) fn open<T: for<'de> Deserialize<'de>>(&self, text: &str) -> Option<T> {
        let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
        if bytes.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(AAD), &mut sealed)
            .ok()?;
        serde_json::from_slice(plain).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new(
            Credential::Token("s3cret-token".into()),
            "alice".into(),
            Scopes {
                ledger: true,
                approve: true,
                admin: false,
            },
        )
    }

    #[test]
    fn sealed_sessions_open_only_with_their_key_and_unchanged() {
        let sealer = Sealer::new(&[7; 32]);
        let s = session();
        let text = sealer.seal(&s);
        assert!(
            !text.contains("s3cret"),
            "the token is not readable: {text}"
        );
        assert_eq!(sealer.open::<Session>(&text), Some(s.clone()));
        // Two seals of one value differ (fresh nonce).
        assert_ne!(sealer.seal(&s), text);
        assert_eq!(Sealer::new(&[8; 32]).open::<Session>(&text), None);
        let mut bytes = URL_SAFE_NO_PAD.decode(&text).unwrap();
        let last = bytes.len() - 20;
        bytes[last] ^= 1;
        assert_eq!(sealer.open::<Session>(&URL_SAFE_NO_PAD.encode(bytes)), None);
        assert_eq!(sealer.open::<Session>("not-a-cookie"), None);
        assert_eq!(sealer.open::<Session>(""), None);
    }

    #[test]
    fn sessions_end_when_idle_or_old() {
        let mut s = session();
        let (idle, life) = (Duration::from_secs(60), Duration::from_secs(600));
        let t = s.signed_in;
        assert!(s.alive(t + 59, idle, life));
        assert!(!s.alive(t + 60, idle, life));
        s.seen = t + 590;
        assert!(s.alive(t + 599, idle, life));
        assert!(
            !s.alive(t + 600, idle, life),
            "the lifetime bounds an active session"
        );
    }
}
