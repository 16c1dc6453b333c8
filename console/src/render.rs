//! Turning stored values into inert text for the pages: result bodies by content type (JSON
//! pretty-printed, text as text, anything else as its size and a hex head — never interpreted),
//! times, names of enum values. Escaping itself is the templates' (maud escapes every
//! interpolation).

use oncekey_api::v1;

/// How much of a binary body is shown, in bytes.
const HEX_HEAD: usize = 64;

/// A body as the page shows it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Body {
    /// Nothing stored.
    Empty,
    /// JSON, pretty-printed (object keys sorted).
    Json(String),
    /// UTF-8 text.
    Text(String),
    /// Bytes: their count and the hex of the first ones.
    Binary { len: usize, head: String },
}

/// Whether a media type is JSON (`application/json`, `application/problem+json`, …).
fn is_json(content_type: &str) -> bool {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    media == "application/json" || media.ends_with("+json")
}

/// `bytes`, described by `content_type`.
pub(crate) fn body(bytes: &[u8], content_type: &str) -> Body {
    if bytes.is_empty() {
        return Body::Empty;
    }
    if is_json(content_type) {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) {
            if let Ok(pretty) = serde_json::to_string_pretty(&value) {
                return Body::Json(pretty);
            }
        }
    }
    let media = content_type.trim().to_ascii_lowercase();
    let texty = media.is_empty() || media.starts_with("text/") || is_json(&media);
    match std::str::from_utf8(bytes) {
        Ok(text) if texty && !text.contains('\0') => Body::Text(text.to_owned()),
        _ => Body::Binary {
            len: bytes.len(),
            head: hex::encode(&bytes[..bytes.len().min(HEX_HEAD)]),
        },
    }
}

/// A record status without its prefix, e.g. `AWAITING_APPROVAL`.
pub(crate) fn status(value: i32) -> &'static str {
    v1::RecordStatus::try_from(value)
        .unwrap_or(v1::RecordStatus::Unspecified)
        .as_str_name()
        .trim_start_matches("RECORD_STATUS_")
}

/// Semantics without the prefix.
pub(crate) fn semantics(value: i32) -> &'static str {
    match v1::Semantics::try_from(value) {
        Ok(v1::Semantics::AtMostOnce) => "AT_MOST_ONCE",
        _ => "AT_LEAST_ONCE",
    }
}

/// An event kind without the prefix.
pub(crate) fn event_kind(value: i32) -> &'static str {
    v1::EventKind::try_from(value)
        .unwrap_or(v1::EventKind::Unspecified)
        .as_str_name()
        .trim_start_matches("EVENT_KIND_")
}

/// An approval decision without the prefix.
pub(crate) fn decision(value: i32) -> &'static str {
    v1::ApprovalDecision::try_from(value)
        .unwrap_or(v1::ApprovalDecision::Unspecified)
        .as_str_name()
        .trim_start_matches("APPROVAL_DECISION_")
}

/// A timestamp as RFC 3339 (UTC), or `—`.
pub(crate) fn time(t: Option<&prost_types::Timestamp>) -> String {
    t.map_or_else(|| "—".to_owned(), ToString::to_string)
}

/// How long before `now` (Unix seconds) a timestamp was, e.g. `5m ago`, or `in 20s`.
pub(crate) fn age(t: Option<&prost_types::Timestamp>, now: u64) -> String {
    let Some(t) = t else {
        return String::new();
    };
    let then = t.seconds;
    let now = i64::try_from(now).unwrap_or(i64::MAX);
    let (d, future) = if then > now {
        (then - now, true)
    } else {
        (now - then, false)
    };
    let span = match d {
        0..60 => format!("{d}s"),
        60..3600 => format!("{}m", d / 60),
        3600..86_400 => format!("{}h", d / 3600),
        _ => format!("{}d", d / 86_400),
    };
    if future {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// Whether an at-least-once PROCESSING record's lease ran out by `now` (to the millisecond: a
/// lease that ended 0.3 s ago has lapsed, whatever second it is).
pub(crate) fn lapsed(record: &v1::Record, now: std::time::SystemTime) -> bool {
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_millis()).unwrap_or(i128::MAX));
    record.status == v1::RecordStatus::Processing as i32
        && record.semantics != v1::Semantics::AtMostOnce as i32
        && record.lease_expires_at.as_ref().is_some_and(|t| {
            i128::from(t.seconds) * 1000 + i128::from(t.nanos / 1_000_000) < now_ms
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_render_by_content_type() {
        assert_eq!(
            body(br#"{"b":1,"a":[true]}"#, "application/json; charset=utf-8"),
            // Keys in order (serde_json's map is sorted).
            Body::Json("{\n  \"a\": [\n    true\n  ],\n  \"b\": 1\n}".into())
        );
        // Declared JSON that does not parse is shown as the text it is.
        assert_eq!(
            body(b"{oops", "application/json"),
            Body::Text("{oops".into())
        );
        assert_eq!(
            body(b"<script>alert(1)</script>", "text/html"),
            Body::Text("<script>alert(1)</script>".into())
        );
        assert_eq!(
            body(&[0xff, 0, 1], "application/octet-stream"),
            Body::Binary {
                len: 3,
                head: "ff0001".into()
            }
        );
        let big = vec![7u8; 1000];
        match body(&big, "image/png") {
            Body::Binary { len, head } => assert_eq!((len, head.len()), (1000, 2 * HEX_HEAD)),
            other => panic!("{other:?}"),
        }
        assert_eq!(body(b"", "text/plain"), Body::Empty);
    }

    #[test]
    fn ages_read_naturally() {
        let t = |s| {
            Some(prost_types::Timestamp {
                seconds: s,
                nanos: 0,
            })
        };
        assert_eq!(age(t(1000).as_ref(), 1030), "30s ago");
        assert_eq!(age(t(1000).as_ref(), 1000 + 7200), "2h ago");
        assert_eq!(age(t(1100).as_ref(), 1000), "in 1m");
        assert_eq!(age(None, 5), "");
    }

    #[test]
    fn only_at_least_once_leases_lapse() {
        let mut r = v1::Record {
            status: v1::RecordStatus::Processing as i32,
            semantics: v1::Semantics::AtLeastOnce as i32,
            lease_expires_at: Some(prost_types::Timestamp {
                seconds: 100,
                nanos: 100_000_000,
            }),
            ..Default::default()
        };
        let at = |ms| std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        assert!(
            lapsed(&r, at(100_400)),
            "0.3 s after it ended, in the same second"
        );
        assert!(!lapsed(&r, at(100_050)));
        r.semantics = v1::Semantics::AtMostOnce as i32;
        assert!(
            !lapsed(&r, at(101_000)),
            "at-most-once lapses to UNKNOWN instead"
        );
    }
}
