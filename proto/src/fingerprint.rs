//! The operation fingerprint: SHA-256 of the RFC 8785 (JCS) canonical JSON of an operation's
//! significant arguments. The one definition used by the server (for `payload_json`) and by the Rust
//! client (for `fingerprint`); `tests/vectors/fingerprint.json` pins it for every language.
//!
//! Parsing follows I-JSON (RFC 7493) as RFC 8785 requires: duplicate object names, lone surrogates
//! and numbers outside the IEEE 754 double range are refused. Every number is canonicalized as the
//! double it denotes, printed the way ECMAScript's `Number.prototype.toString` prints it, and must
//! be lossless (`exact`): a number the canonical form would change, or beyond ±(2^53−1), is
//! refused with its JSON path. Arrays and objects may nest `MAX_DEPTH` deep.
//!
//! An error says what is wrong and where (line and column, or a refused number's JSON path), never
//! the values the text holds: a payload is the caller's data, and error messages travel and get
//! logged.

mod exact;

pub use exact::{Inexact, MAX_EXACT};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use sha2::{Digest, Sha256};
use std::fmt::{self, Write as _};

/// The deepest nesting of arrays and objects a JSON text may have (the outermost counts as 1).
pub const MAX_DEPTH: usize = 128;

/// The length in bytes of a fingerprint.
pub const FINGERPRINT_LEN: usize = 32;

/// A SHA-256 fingerprint of canonical JSON.
pub type Fingerprint = [u8; FINGERPRINT_LEN];

/// Why a JSON document has no canonical form.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    /// The text is not JSON, or not I-JSON (duplicate names, out-of-range numbers).
    #[error("invalid JSON: {0}")]
    InvalidJson(String),
    /// A number the canonical form cannot keep exactly (docs/api.md#numbers).
    #[error("{path}: {why}; send it as a string")]
    InexactNumber {
        /// Where the number is, as a JSONPath from the document's root (`$.order.id`).
        path: String,
        /// What a double cannot hold of it.
        why: Inexact,
    },
}

/// A parsed JSON value whose objects keep every member, so that duplicates can be refused.
#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Json>),
    /// Members sorted by name as UTF-16 code units, no two with the same name.
    Object(Vec<(String, Json)>),
}

/// Returns the RFC 8785 canonical form of a JSON text.
pub fn canonicalize_json(text: &str) -> Result<String, FingerprintError> {
    let value = parse(text).map_err(|e| FingerprintError::InvalidJson(e.to_string()))?;
    if let Some((path, why)) = exact::first_inexact(text, |n| {
        let mut out = String::new();
        write_number(n, &mut out);
        out
    }) {
        return Err(FingerprintError::InexactNumber { path, why });
    }
    let mut out = String::with_capacity(text.len());
    write_canonical(&value, &mut out);
    Ok(out)
}

/// Returns the RFC 8785 canonical form of a `serde_json::Value`; a number beyond ±(2^53−1) is
/// refused with its path.
pub fn canonicalize_value(value: &serde_json::Value) -> Result<String, FingerprintError> {
    let json = Json::from_value(value, &mut exact::Path::default())?;
    let mut out = String::new();
    write_canonical(&json, &mut out);
    Ok(out)
}

/// Fingerprints a JSON text: SHA-256 of its canonical form.
pub fn fingerprint_json(text: &str) -> Result<Fingerprint, FingerprintError> {
    Ok(sha256(canonicalize_json(text)?.as_bytes()))
}

/// Fingerprints any serializable arguments: SHA-256 of the canonical JSON of their serde form.
pub fn fingerprint_of<T: serde::Serialize + ?Sized>(
    args: &T,
) -> Result<Fingerprint, FingerprintError> {
    let value =
        serde_json::to_value(args).map_err(|e| FingerprintError::InvalidJson(e.to_string()))?;
    Ok(sha256(canonicalize_value(&value)?.as_bytes()))
}

/// Parses a whole JSON text. serde_json's own nesting limit (which refuses depth 128) is replaced
/// by `MAX_DEPTH`, checked by `JsonVisitor` before it descends, so the stack stays bounded.
fn parse(text: &str) -> Result<Json, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let value = JsonVisitor { depth: 0 }.deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

fn sha256(bytes: &[u8]) -> Fingerprint {
    Sha256::digest(bytes).into()
}

impl Json {
    /// The value of a `serde_json::Value` at `path`, its numbers judged by `exact`.
    fn from_value(
        value: &serde_json::Value,
        path: &mut exact::Path,
    ) -> Result<Json, FingerprintError> {
        use serde_json::Value as V;
        let refuse = |path: &exact::Path, why| FingerprintError::InexactNumber {
            path: path.to_string(),
            why,
        };
        Ok(match value {
            V::Null => Json::Null,
            V::Bool(b) => Json::Bool(*b),
            V::Number(n) => {
                let verdict = match (n.as_i64(), n.as_u64(), n.as_f64()) {
                    (Some(i), _, _) => exact::check_integer(i.into()),
                    (_, Some(u), _) => exact::check_integer(u.into()),
                    (_, _, Some(f)) => exact::check_value(f),
                    _ => Err(Inexact::Precision),
                };
                verdict.map_err(|why| refuse(path, why))?;
                Json::Number(n.as_f64().unwrap_or_default())
            }
            V::String(s) => Json::String(s.clone()),
            V::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    path.item(i);
                    out.push(Json::from_value(item, path)?);
                    path.pop();
                }
                Json::Array(out)
            }
            V::Object(map) => {
                let mut members = Vec::with_capacity(map.len());
                for (name, member) in map {
                    path.member(name);
                    members.push((name.clone(), Json::from_value(member, path)?));
                    path.pop();
                }
                members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                Json::Object(members)
            }
        })
    }
}

fn write_canonical(value: &Json, out: &mut String) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => write_number(*n, out),
        Json::String(s) => write_string(s, out),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Json::Object(members) => {
            // Members are kept sorted by name (see `JsonVisitor::visit_map` and `From<&Value>`).
            out.push('{');
            for (i, (name, member)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(name, out);
                out.push(':');
                write_canonical(member, out);
            }
            out.push('}');
        }
    }
}

/// RFC 8785 §3.2.2.3: the ECMAScript Number-to-String form; -0 prints as 0.
fn write_number(n: f64, out: &mut String) {
    if n == 0.0 {
        out.push('0');
    } else {
        out.push_str(ryu_js::Buffer::new().format_finite(n));
    }
}

/// RFC 8785 §3.2.2.2: only `"`, `\` and control characters are escaped, with the short forms where
/// JSON has them and lowercase `\u00xx` otherwise.
fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Reads one JSON value nested `depth` arrays and objects deep.
#[derive(Clone, Copy)]
struct JsonVisitor {
    depth: usize,
}

impl JsonVisitor {
    /// The visitor for the members of the array or object this one is reading.
    fn inner<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format_args!(
                "arrays and objects nest deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(Self {
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for JsonVisitor {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Number(v as f64))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        if v.is_finite() {
            Ok(Json::Number(v))
        } else {
            Err(E::custom("number out of range"))
        }
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let inner = self.inner()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let inner = self.inner()?;
        let mut members: Vec<(String, Json)> = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            members.push((name, map.next_value_seed(inner)?));
        }
        // Sorted once here (RFC 8785 §3.2.3: by UTF-16 code units), which also puts duplicates side
        // by side, so refusing them costs O(n log n) however large the object. The message names
        // neither the member nor the object's path (member names are the caller's data): serde_json
        // adds where the object ends.
        members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
        if members.windows(2).any(|pair| pair[0].0 == pair[1].0) {
            return Err(de::Error::custom(
                "duplicate member name in the object that ends",
            ));
        }
        Ok(Json::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_duplicate_names_saying_where_but_not_which() {
        let text = r#"{"x": {"secret-name":1,"secret-name":2}}"#;
        let err = canonicalize_json(text).unwrap_err().to_string();
        assert!(err.contains("duplicate"), "{err}");
        assert!(err.contains("line 1 column 39"), "{err}");
        assert!(!err.contains("secret") && !err.contains('x'), "{err}");
    }

    /// `depth` arrays, one inside the other, around a number.
    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn nesting_up_to_the_maximum_is_accepted_one_more_is_refused() {
        assert_eq!(
            canonicalize_json(&nested(MAX_DEPTH)).unwrap(),
            nested(MAX_DEPTH)
        );
        let object = format!("{}1{}", r#"{"a":"#.repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
        assert_eq!(canonicalize_json(&object).unwrap(), object);
        let err = canonicalize_json(&nested(MAX_DEPTH + 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("deeper than 128"), "{err}");
        let deep_object = format!("{{\"a\":{object}}}");
        assert!(canonicalize_json(&deep_object).is_err());
        // Far deeper is refused as cheaply, without exhausting the stack.
        assert!(canonicalize_json(&nested(1_000_000)).is_err());
    }

    #[test]
    fn errors_never_echo_the_text() {
        for text in [
            r#"{"secret": tru}"#,
            r#"{"secret": "\ud800"}"#,
            r#"{"secret": 1e400}"#,
            r#"["secret" "secret"]"#,
            r#"{"secret": 1} secret"#,
            r#"{"secret"}"#,
            r#""secret"#,
        ] {
            let err = canonicalize_json(text).unwrap_err().to_string();
            assert!(!err.contains("secret"), "{text}: {err}");
        }
    }

    #[test]
    fn refuses_out_of_range_numbers_and_bad_text() {
        assert!(canonicalize_json("1e400").is_err());
        assert!(canonicalize_json("{").is_err());
        assert!(canonicalize_json(r#""\ud800""#).is_err());
    }

    #[test]
    fn serde_value_and_text_agree() {
        #[derive(serde::Serialize)]
        struct Charge<'a> {
            amount: u64,
            currency: &'a str,
            tags: Vec<&'a str>,
        }
        let args = Charge {
            amount: 1250,
            currency: "EUR",
            tags: vec!["b", "a"],
        };
        let from_text =
            fingerprint_json(r#"{ "tags": ["b","a"], "currency": "EUR", "amount": 1.25e3 }"#)
                .unwrap();
        assert_eq!(fingerprint_of(&args).unwrap(), from_text);
    }
}
