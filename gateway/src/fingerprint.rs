//! The fingerprint of a keyed HTTP request: SHA-256 of the RFC 8785 canonical JSON of
//! `{"method", "path", "query", "content_type", "body_json" | "body_b64"}`, through the one
//! fingerprint implementation the server and every client share (`oncekey_api::fingerprint`).
//!
//! - `query`: the raw query string (empty when none); `path`: the request path as received.
//! - `content_type`: the media type, lowercased, without parameters (empty when absent).
//! - `body_json`: the parsed body when that media type is JSON (`application/json` or `…+json`)
//!   and the body is I-JSON; otherwise `body_b64`, the standard base64 of the bytes. An empty
//!   body has neither. A JSON body with a number the canonical form cannot keep exactly
//!   (docs/api.md#numbers) has no fingerprint: it is refused (`InexactNumber`), never hashed as
//!   bytes, so that two amounts a double cannot tell apart are never one request.
//!
//! So a retry of the same request replays, while the same key with another request is refused.

use base64::Engine as _;
use oncekey_api::fingerprint::{
    canonicalize_json, fingerprint_json, Fingerprint, FingerprintError, Inexact,
};

/// A JSON body with a number its canonical form cannot keep exactly.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("body_json.{path}: {why}; send it as a string")]
pub struct InexactNumber {
    /// The number's JSONPath in the body (`$.amount`).
    pub path: String,
    /// What a double cannot hold of it.
    pub why: Inexact,
}

/// What of a request is fingerprinted.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    /// The method, e.g. `POST`.
    pub method: &'a str,
    /// The path as received, e.g. `/v1/charges`.
    pub path: &'a str,
    /// The raw query string without `?` (empty when none).
    pub query: &'a str,
    /// The `Content-Type` header's bytes, if any.
    pub content_type: Option<&'a [u8]>,
    /// The whole body.
    pub body: &'a [u8],
}

/// The media type of a `Content-Type` value: lowercased, parameters and whitespace removed.
pub fn media_type(content_type: Option<&[u8]>) -> String {
    let Some(raw) = content_type else {
        return String::new();
    };
    let text = String::from_utf8_lossy(raw);
    text.split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// True for `application/json` and structured-syntax `…+json` media types.
pub fn is_json(media_type: &str) -> bool {
    media_type == "application/json" || media_type.ends_with("+json")
}

/// The JSON document that is fingerprinted (for tests and docs: the hash is of its canonical
/// form).
pub fn document(parts: &RequestParts<'_>) -> Result<String, InexactNumber> {
    let content_type = media_type(parts.content_type);
    let body_json = if !parts.body.is_empty() && is_json(&content_type) {
        match std::str::from_utf8(parts.body).map(canonicalize_json) {
            Ok(Ok(canonical)) => Some(canonical),
            Ok(Err(FingerprintError::InexactNumber { path, why })) => {
                return Err(InexactNumber { path, why })
            }
            Ok(Err(_)) | Err(_) => None,
        }
    } else {
        None
    };
    let mut doc = serde_json::json!({
        "method": parts.method,
        "path": parts.path,
        "query": parts.query,
        "content_type": content_type,
    });
    if parts.body.is_empty() || body_json.is_some() {
        let mut text = doc.to_string();
        if let Some(canonical) = body_json {
            // The body is spliced in as its canonical text: no second parse into a lossy value.
            text.pop();
            text.push_str(",\"body_json\":");
            text.push_str(&canonical);
            text.push('}');
        }
        return Ok(text);
    }
    doc["body_b64"] = base64::engine::general_purpose::STANDARD
        .encode(parts.body)
        .into();
    Ok(doc.to_string())
}

/// The request's fingerprint, or the number of its JSON body that has none.
pub fn fingerprint(parts: &RequestParts<'_>) -> Result<Fingerprint, InexactNumber> {
    // The document is valid I-JSON with exact numbers by construction: strings from serde_json
    // and a body that canonicalized once already.
    Ok(fingerprint_json(&document(parts)?).expect("the request document is valid JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn parts<'a>(ct: Option<&'a str>, body: &'a str) -> RequestParts<'a> {
        RequestParts {
            method: "POST",
            path: "/v1/charges",
            query: "a=1&b=2",
            content_type: ct.map(str::as_bytes),
            body: body.as_bytes(),
        }
    }

    /// Written out by hand, as another implementation would compute it.
    #[test]
    fn matches_the_canonical_document_written_by_hand() {
        let p = parts(
            Some("Application/JSON; charset=utf-8"),
            r#"{ "b": 2, "a": [1.0, "x"] }"#,
        );
        let expected = r#"{"body_json":{"a":[1,"x"],"b":2},"content_type":"application/json","method":"POST","path":"/v1/charges","query":"a=1&b=2"}"#;
        assert_eq!(
            fingerprint(&p).unwrap(),
            <[u8; 32]>::from(Sha256::digest(expected.as_bytes()))
        );
    }

    #[test]
    fn non_json_bodies_are_base64() {
        let p = parts(Some("text/plain"), "hi");
        let expected = r#"{"body_b64":"aGk=","content_type":"text/plain","method":"POST","path":"/v1/charges","query":"a=1&b=2"}"#;
        assert_eq!(
            fingerprint(&p).unwrap(),
            <[u8; 32]>::from(Sha256::digest(expected.as_bytes()))
        );
        // JSON media type but not I-JSON (duplicate name): the bytes count.
        let dup = parts(Some("application/json"), r#"{"a":1,"a":2}"#);
        assert!(document(&dup).unwrap().contains("body_b64"));
    }

    #[test]
    fn an_empty_body_has_neither_field() {
        let p = RequestParts {
            method: "POST",
            path: "/",
            query: "",
            content_type: None,
            body: b"",
        };
        let expected = r#"{"content_type":"","method":"POST","path":"/","query":""}"#;
        assert_eq!(
            fingerprint(&p).unwrap(),
            <[u8; 32]>::from(Sha256::digest(expected.as_bytes()))
        );
    }

    #[test]
    fn equivalent_json_bodies_agree_and_different_requests_differ() {
        let a = fingerprint(&parts(Some("application/json"), r#"{"x":1,"y":[true]}"#)).unwrap();
        let b = fingerprint(&parts(
            Some("application/merchant+json"),
            "{\"y\":[true],\n \"x\":1.0}",
        ))
        .unwrap();
        let c = fingerprint(&parts(Some("application/json"), r#"{"x":1,"y":[true]}"#)).unwrap();
        assert_ne!(a, b, "the media type is part of the request");
        assert_eq!(a, c);
        let other_path = RequestParts {
            path: "/v1/refunds",
            ..parts(Some("application/json"), r#"{"x":1,"y":[true]}"#)
        };
        assert_ne!(a, fingerprint(&other_path).unwrap());
        assert_eq!(
            media_type(Some(b" Application/Merchant+JSON ;q=1")),
            "application/merchant+json"
        );
    }

    #[test]
    fn a_json_body_with_a_number_a_double_cannot_hold_has_no_fingerprint() {
        for (body, path) in [
            (r#"{"amount":9007199254740993}"#, "$.amount"),
            (r#"{"amount":9007199254740992}"#, "$.amount"),
            (r#"{"x":[0.1000000000000000055511151231257827]}"#, "$.x[0]"),
        ] {
            let err = fingerprint(&parts(Some("application/json"), body)).unwrap_err();
            assert_eq!(err.path, path, "{body}");
            assert!(err.to_string().starts_with("body_json.$"), "{err}");
            assert!(err.to_string().contains("send it as a string"), "{err}");
        }
        // The same bytes under a media type that is not JSON are bytes: no numbers to judge.
        let text = parts(Some("text/plain"), r#"{"amount":9007199254740993}"#);
        assert!(fingerprint(&text).is_ok());
    }
}
