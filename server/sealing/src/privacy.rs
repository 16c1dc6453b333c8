//! Key privacy (docs/api.md#key-privacy): an idempotency key replaced, on the way in, by
//! `~h:` + base64url (no padding) of HMAC-SHA256(the ring's `hmac` key, `oncekey-key-v1` NUL
//! tenant NUL namespace NUL key), so the store, logs, metrics and listings never see it.
//!
//! Only the hashing and the recognition of the hashed form live here; which namespaces are
//! private, and taking an already-hashed key as is, are the service's decisions.

use crate::keyring::KeyRing;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::hmac;

/// The start of every hashed key.
pub const HASHED_PREFIX: &str = "~h:";
/// Characters of a hashed key: the prefix and 43 of base64url (32 bytes).
pub const HASHED_LEN: usize = 46;
/// The domain of the HMAC input.
const DOMAIN: &[u8] = b"oncekey-key-v1\0";

/// The hashed form of `key` in `tenant`'s `namespace`; `None` when the ring has no `hmac` key.
/// Deterministic: the same inputs and `hmac` key give the same 46 characters.
pub fn hash_key(ring: &KeyRing, tenant: &str, namespace: &str, key: &str) -> Option<String> {
    let hmac_key = ring.hmac_key()?;
    let mut context = hmac::Context::with_key(hmac_key);
    context.update(DOMAIN);
    context.update(tenant.as_bytes());
    context.update(b"\0");
    context.update(namespace.as_bytes());
    context.update(b"\0");
    context.update(key.as_bytes());
    let tag = context.sign();
    let mut out = String::with_capacity(HASHED_LEN);
    out.push_str(HASHED_PREFIX);
    URL_SAFE_NO_PAD.encode_string(tag.as_ref(), &mut out);
    Some(out)
}

/// Whether `key` has the hashed form: `~h:` and exactly 43 base64url characters.
pub fn is_hashed(key: &str) -> bool {
    key.len() == HASHED_LEN
        && key.strip_prefix(HASHED_PREFIX).is_some_and(|rest| {
            rest.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}
