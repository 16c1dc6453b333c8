//! ListRecords page tokens (AIP-158): opaque to callers, bound to the tenant and the filter.
//!
//! A token carries the store's cursor (where the next page starts) and an HMAC-SHA256 over the
//! tenant, the filter and the cursor, keyed with the store's page-token key
//! (`Store::page_token_key`). The key lives in the store — the embedded database, or the CQL
//! keyspace every replica shares — so a token from one replica is accepted by all of them, and
//! one made for another tenant, another filter or another store, or altered in any byte, is
//! refused (INVALID_ARGUMENT naming `page_token`). The cursor is not encrypted: it names a record
//! of the caller's own tenant, and the MAC, not secrecy, keeps it from being forged.
//!
//! Wire form: base64url (no padding) of `VERSION`, the cursor, then the first `MAC_BYTES` of the
//! MAC. A change to any store's cursor layout changes `VERSION`, so older tokens fail the check.

use super::error::ApiError;
use crate::ledger::ListFilter;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};

type HmacSha256 = Hmac<hmac_sha2::Sha256>;

/// The token format (and the cursor layouts it carries).
const VERSION: u8 = 1;
/// Bytes of the MAC a token keeps: 128 bits.
const MAC_BYTES: usize = 16;
/// Longest token accepted: a cursor holds a record id (at most 3 parts of ≤ 64 KiB in theory,
/// a few hundred bytes in practice).
const MAX_TOKEN_CHARS: usize = 4096;
/// Separates this MAC's input from any other use of the key.
const CONTEXT: &[u8] = b"oncekey.v1.ListRecords.page_token";

/// Issues and checks page tokens with one store's key.
#[derive(Clone)]
pub struct PageTokens {
    key: [u8; 32],
}

impl std::fmt::Debug for PageTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PageTokens { .. }")
    }
}

impl PageTokens {
    /// Tokens signed with `key`.
    pub fn new(key: [u8; 32]) -> Self {
        Self { key }
    }

    /// The token that resumes `tenant`'s listing with `filter` at `cursor`.
    pub fn issue(&self, tenant: &str, filter: &ListFilter, cursor: &[u8]) -> String {
        let mut bytes = Vec::with_capacity(1 + cursor.len() + MAC_BYTES);
        bytes.push(VERSION);
        bytes.extend_from_slice(cursor);
        bytes.extend_from_slice(&self.mac(tenant, filter, cursor)[..MAC_BYTES]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The cursor of `token`, if it was issued by this store for `tenant` and `filter`.
    pub fn open(
        &self,
        tenant: &str,
        filter: &ListFilter,
        token: &str,
    ) -> Result<Vec<u8>, ApiError> {
        let refuse = || {
            ApiError::invalid(
                "page_token",
                "not a page token of this listing: pass the next_page_token of the previous page, \
                 with the same filters",
            )
        };
        if token.len() > MAX_TOKEN_CHARS {
            return Err(refuse());
        }
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| refuse())?;
        let [version, rest @ ..] = bytes.as_slice() else {
            return Err(refuse());
        };
        if *version != VERSION || rest.len() < MAC_BYTES {
            return Err(refuse());
        }
        let (cursor, mac) = rest.split_at(rest.len() - MAC_BYTES);
        self.hmac(tenant, filter, cursor)
            .verify_truncated_left(mac)
            .map_err(|_| refuse())?;
        Ok(cursor.to_vec())
    }

    fn mac(&self, tenant: &str, filter: &ListFilter, cursor: &[u8]) -> Vec<u8> {
        self.hmac(tenant, filter, cursor)
            .finalize()
            .into_bytes()
            .to_vec()
    }

    /// The MAC state over everything a token is bound to; every part length-prefixed, so that
    /// no two different inputs run together into the same bytes.
    fn hmac(&self, tenant: &str, filter: &ListFilter, cursor: &[u8]) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        let mut part = |bytes: &[u8]| {
            mac.update(&(bytes.len() as u64).to_be_bytes());
            mac.update(bytes);
        };
        part(CONTEXT);
        part(tenant.as_bytes());
        part(filter.namespace.as_deref().unwrap_or_default().as_bytes());
        part(&[u8::from(filter.namespace.is_some())]);
        let statuses: Vec<u8> = filter
            .statuses
            .iter()
            .map(|s| super::convert::wire_status(*s) as u8)
            .collect();
        part(&statuses);
        match &filter.parent {
            Some(p) => {
                part(&[1]);
                part(p.namespace.as_bytes());
                part(p.key.as_bytes());
            }
            None => part(&[0]),
        }
        part(cursor);
        mac
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::{ParentRef, Status};

    fn filter(statuses: Vec<Status>) -> ListFilter {
        ListFilter::new(Some("payments".into()), statuses, None)
    }

    fn field_of(e: ApiError) -> String {
        match e {
            ApiError::InvalidField { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_token_opens_for_its_tenant_and_filter_only() {
        let tokens = PageTokens::new([7; 32]);
        let f = filter(vec![Status::Unknown, Status::Processing]);
        let token = tokens.issue("acme", &f, b"cursor-bytes");
        assert_eq!(tokens.open("acme", &f, &token).unwrap(), b"cursor-bytes");
        // The same filter with its statuses in another order is the same filter.
        let same = filter(vec![Status::Processing, Status::Unknown, Status::Unknown]);
        assert!(tokens.open("acme", &same, &token).is_ok());
        for (tenant, other) in [
            ("globex", f.clone()),
            ("acme", filter(vec![Status::Unknown])),
            ("acme", ListFilter::new(None, f.statuses.clone(), None)),
            (
                "acme",
                ListFilter::new(
                    f.namespace.clone(),
                    f.statuses.clone(),
                    Some(ParentRef {
                        namespace: "flows".into(),
                        key: "1".into(),
                    }),
                ),
            ),
        ] {
            let refused = tokens.open(tenant, &other, &token).unwrap_err();
            assert_eq!(field_of(refused), "page_token", "{tenant} {other:?}");
        }
        // Another store's key.
        let other_store = PageTokens::new([8; 32]);
        assert!(other_store.open("acme", &f, &token).is_err());
    }

    #[test]
    fn forged_and_altered_tokens_are_refused() {
        let tokens = PageTokens::new([7; 32]);
        let f = ListFilter::default();
        let token = tokens.issue("acme", &f, b"\x01\x00after-this");
        let mut bytes = URL_SAFE_NO_PAD.decode(&token).unwrap();
        for i in 0..bytes.len() {
            bytes[i] ^= 1;
            let altered = URL_SAFE_NO_PAD.encode(&bytes);
            assert!(tokens.open("acme", &f, &altered).is_err(), "byte {i}");
            bytes[i] ^= 1;
        }
        let forged =
            URL_SAFE_NO_PAD.encode([&[VERSION][..], b"\x01\x00x", &[0; MAC_BYTES]].concat());
        for bad in [
            "",
            "!!!",
            "AAAA",
            forged.as_str(),
            &token[..token.len() - 2],
            &"A".repeat(MAX_TOKEN_CHARS + 1),
        ] {
            let refused = tokens.open("acme", &f, bad).unwrap_err();
            assert_eq!(field_of(refused), "page_token", "{bad:?}");
        }
    }
}
