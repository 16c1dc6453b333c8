//! The `Idempotency-Key` request header and the ledger key it becomes.
//!
//! The header is an sf-string (`"abc"`, RFC 8941 §3.3.3, as the IETF draft writes it) or the bare
//! value (`abc`); both name the same key: 1..=255 visible ASCII characters (`!`..=`~`). The ledger
//! key is scoped to the caller: the first 16 hex digits of SHA-256 of the `--caller-header` value
//! (empty when absent), `:`, and the key, so two callers who pick the same key never see each
//! other's responses. A key too long for that is stored as `SCOPE#sha256:HEX` instead: every
//! short ledger key has `:` right after its 16-digit scope, so no short key can equal a hashed
//! one. Pure functions only: no I/O, no logging of keys.

use http::header::{HeaderMap, HeaderName};
use sha2::{Digest, Sha256};

/// The request header carrying the key.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The longest key, in characters.
pub const MAX_KEY_CHARS: usize = 255;

/// The longest key the ledger stores, in bytes.
const LEDGER_MAX_KEY_BYTES: usize = 256;

/// What a request's `Idempotency-Key` header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyHeader {
    /// No such header.
    Absent,
    /// The key, unquoted.
    Key(String),
    /// A header that names no valid key; the reason is safe to show the caller.
    Invalid(&'static str),
}

/// Reads the `Idempotency-Key` header of a request.
pub fn parse(headers: &HeaderMap) -> KeyHeader {
    let mut values = headers.get_all(&IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return KeyHeader::Absent;
    };
    if values.next().is_some() {
        return KeyHeader::Invalid("more than one Idempotency-Key header");
    }
    let raw = value.as_bytes().trim_ascii();
    let key = if raw.first() == Some(&b'"') {
        match sf_string(raw) {
            Some(key) => key,
            None => return KeyHeader::Invalid("the Idempotency-Key is not a valid sf-string"),
        }
    } else {
        raw.to_vec()
    };
    if key.is_empty() {
        return KeyHeader::Invalid("the Idempotency-Key is empty");
    }
    if key.len() > MAX_KEY_CHARS {
        return KeyHeader::Invalid("the Idempotency-Key is longer than 255 characters");
    }
    if !key.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return KeyHeader::Invalid(
            "the Idempotency-Key must consist of visible ASCII characters only",
        );
    }
    // Visible ASCII is UTF-8.
    KeyHeader::Key(String::from_utf8(key).unwrap_or_default())
}

/// The content of an sf-string `"…"` (escapes `\"` and `\\` only; nothing may follow it).
fn sf_string(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut bytes = raw.iter().skip(1);
    while let Some(&b) = bytes.next() {
        match b {
            b'\\' => match bytes.next() {
                Some(&e @ (b'"' | b'\\')) => out.push(e),
                _ => return None,
            },
            b'"' => return bytes.next().is_none().then_some(out),
            0x20..=0x7e => out.push(b),
            _ => return None,
        }
    }
    None
}

/// The first 16 hex digits of SHA-256 of the caller header's value (empty when absent; several
/// fields are joined with `, ` as HTTP combines them).
pub fn caller_scope(headers: &HeaderMap, caller_header: &HeaderName) -> String {
    let mut hasher = Sha256::new();
    for (i, value) in headers.get_all(caller_header).iter().enumerate() {
        if i > 0 {
            hasher.update(b", ");
        }
        hasher.update(value.as_bytes());
    }
    hex::encode(&hasher.finalize()[..8])
}

/// The ledger key of `key` for the caller `scope`: `SCOPE:KEY`. A key too long for the ledger
/// together with its scope (more than 239 characters) is stored as `SCOPE#sha256:HEX`, HEX the
/// SHA-256 of the key: `#` where every short key has `:`, so no short key can equal it.
pub fn ledger_key(scope: &str, key: &str) -> String {
    let full = format!("{scope}:{key}");
    if full.len() <= LEDGER_MAX_KEY_BYTES {
        return full;
    }
    format!(
        "{scope}#sha256:{}",
        hex::encode(Sha256::digest(key.as_bytes()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn header(value: &[u8]) -> KeyHeader {
        let mut h = HeaderMap::new();
        h.insert(IDEMPOTENCY_KEY, HeaderValue::from_bytes(value).unwrap());
        parse(&h)
    }

    #[test]
    fn sf_string_and_bare_forms_name_the_same_key() {
        assert_eq!(header(b"\"abc-1\""), KeyHeader::Key("abc-1".into()));
        assert_eq!(header(b"abc-1"), KeyHeader::Key("abc-1".into()));
        assert_eq!(header(b" \"abc-1\" "), KeyHeader::Key("abc-1".into()));
        assert_eq!(header(br#""a\"b\\c""#), KeyHeader::Key(r#"a"b\c"#.into()));
    }

    #[test]
    fn keys_are_1_to_255_visible_ascii_characters() {
        assert_eq!(parse(&HeaderMap::new()), KeyHeader::Absent);
        let max = "k".repeat(255);
        assert_eq!(header(max.as_bytes()), KeyHeader::Key(max.clone()));
        assert_eq!(
            header(format!("\"{max}\"").as_bytes()),
            KeyHeader::Key(max.clone())
        );
        for bad in [
            &b"\"\""[..],
            b"",
            b"a b",
            b"\"a b\"",
            b"\"abc",
            b"\"abc\";x=1",
            br#""a\nb""#,
            "é".as_bytes(),
            "k".repeat(256).as_bytes(),
        ] {
            assert!(
                matches!(header(bad), KeyHeader::Invalid(_)),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut two = HeaderMap::new();
        two.append(IDEMPOTENCY_KEY, HeaderValue::from_static("a"));
        two.append(IDEMPOTENCY_KEY, HeaderValue::from_static("b"));
        assert!(matches!(parse(&two), KeyHeader::Invalid(_)));
    }

    #[test]
    fn keys_are_scoped_to_the_caller() {
        let auth = http::header::AUTHORIZATION;
        let mut h = HeaderMap::new();
        // SHA-256 of the empty string: e3b0c44298fc1c14…
        assert_eq!(caller_scope(&h, &auth), "e3b0c44298fc1c14");
        h.insert(&auth, HeaderValue::from_static("Bearer alice"));
        let alice = caller_scope(&h, &auth);
        assert_eq!(alice, hex::encode(&Sha256::digest(b"Bearer alice")[..8]));
        assert_eq!(ledger_key(&alice, "k1"), format!("{alice}:k1"));
    }

    #[test]
    fn keys_too_long_for_the_ledger_are_hashed() {
        let scope = "0123456789abcdef";
        let fits = "k".repeat(239);
        assert_eq!(ledger_key(scope, &fits), format!("{scope}:{fits}"));
        let long = "k".repeat(240);
        let stored = ledger_key(scope, &long);
        assert!(stored.len() <= 256, "{}", stored.len());
        assert!(stored.starts_with("0123456789abcdef#sha256:"));
        assert_ne!(stored, ledger_key(scope, &"k".repeat(241)));
    }

    #[test]
    fn no_short_key_equals_a_hashed_long_one() {
        let scope = "0123456789abcdef";
        let long = "k".repeat(240);
        let hashed = ledger_key(scope, &long);
        let digest = hashed.split_once('#').unwrap().1;
        // The key a caller would send to hit the hashed record, in every spelling of its tail.
        for short in [
            digest.to_owned(),
            format!("sha256-{}", hex::encode(Sha256::digest(long.as_bytes()))),
        ] {
            assert_ne!(ledger_key(scope, &short), hashed, "{short}");
        }
        // Every short ledger key has `:` right after its scope; a hashed one never does.
        assert_eq!(ledger_key(scope, "x").as_bytes()[16], b':');
        assert_eq!(hashed.as_bytes()[16], b'#');
    }
}
