//! Wire messages as JSON for people and scripts: records (with their approval, result and error),
//! leases, times, bytes as text or hex; and `text`, which every human-readable (non-JSON) output
//! passes stored text through, so that no escape sequence in an owner or a message can move the
//! cursor, recolour or forge a line on the operator's terminal. JSON escapes control characters
//! by itself.

use oncekey_api::v1;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::fmt::Write;

/// `s` safe to print on a terminal: control characters (C0, DEL, C1: ESC, CR, LF, tab, …) and the
/// bidirectional-text controls (which reorder what is shown) written as `\u{…}` escapes; anything
/// else as it is.
pub fn text(s: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() || is_bidi_control(c);
    if !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `value` as pretty JSON for a terminal: serde_json escapes C0 control characters (ESC, CR, LF,
/// …) by itself; DEL, the C1 controls and the bidirectional-text controls, which it leaves raw,
/// are written as `\uXXXX` too (they can only occur inside strings, where that is the same
/// text).
pub fn json_text(value: &Value) -> serde_json::Result<String> {
    let json = serde_json::to_string_pretty(value)?;
    if !json.chars().any(|c| c.is_control() || is_bidi_control(c)) {
        return Ok(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        // Whitespace between tokens is the only raw control left by the serializer.
        if (c.is_control() && !matches!(c, '\n' | ' ')) || is_bidi_control(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// The Unicode controls of bidirectional text (embeddings, overrides, isolates, marks).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{61c}')
}

pub(crate) fn time(ts: &Option<prost_types::Timestamp>) -> Value {
    ts.as_ref().map_or(Value::Null, |t| json!(t.to_string()))
}

pub(crate) fn lease_json(lease: &v1::Lease) -> Value {
    json!({ "token": lease.token, "expires_at": time(&lease.expires_at), "attempt": lease.attempt })
}

/// Bytes as text when they are UTF-8, else as hex.
fn bytes_json(name: &str, bytes: &[u8]) -> (String, Value) {
    match std::str::from_utf8(bytes) {
        Ok(text) => (name.to_owned(), json!(text)),
        Err(_) => (format!("{name}_hex"), json!(hex::encode(bytes))),
    }
}

/// A record status's wire name without its prefix (the number when this build does not know it).
pub fn describe_status(status: i32) -> String {
    match v1::RecordStatus::try_from(status) {
        Ok(s) => s
            .as_str_name()
            .trim_start_matches("RECORD_STATUS_")
            .to_owned(),
        Err(_) => status.to_string(),
    }
}

/// A record as JSON for people and scripts.
pub fn record_json(r: &v1::Record) -> Value {
    let semantics = v1::Semantics::try_from(r.semantics).unwrap_or_default();
    let mut out = json!({
        "namespace": r.namespace,
        "key": r.key,
        "status": describe_status(r.status),
        "fingerprint": hex::encode(&r.fingerprint),
        "semantics": semantics.as_str_name().trim_start_matches("SEMANTICS_"),
        "fencing_token": r.fencing_token,
        "attempt": r.attempt,
        "dedup_hits": r.dedup_hits,
        "lease_owner": r.lease_owner,
        "lease_expires_at": time(&r.lease_expires_at),
        "created_at": time(&r.created_at),
        "updated_at": time(&r.updated_at),
        "expires_at": time(&r.expires_at),
    });
    if let Some(res) = &r.result {
        let (name, body) = bytes_json("body", &res.body);
        out["result"] =
            json!({ "code": res.code, "content_type": res.content_type, "metadata": res.metadata });
        out["result"][name] = body;
    }
    if let Some(err) = &r.error {
        let (name, details) = bytes_json("details", &err.details);
        out["error"] = json!({ "code": err.code, "message": err.message });
        out["error"][name] = details;
    }
    if let Some(p) = &r.parent {
        out["parent"] = json!({ "namespace": p.namespace, "key": p.key });
    }
    if r.require_approval {
        out["require_approval"] = json!(true);
    }
    if r.max_attempts > 0 {
        out["max_attempts"] = json!(r.max_attempts);
    }
    if let Some(b) = &r.budget {
        let budget = b.budget.clone().unwrap_or_default();
        out["budget"] = json!({
            "max_children": budget.max_children,
            "max_per_namespace": budget.max_per_namespace,
            "children": b.children,
            "children_per_namespace": b.children_per_namespace,
            "refused": b.refused,
        });
    }
    if let Some(a) = &r.approval {
        let decision = v1::ApprovalDecision::try_from(a.decision).unwrap_or_default();
        out["approval"] = json!({
            "decision": decision.as_str_name().trim_start_matches("APPROVAL_DECISION_"),
            "decided_by": a.decided_by,
            "note": a.note,
            "decided_at": time(&a.decided_at),
        });
    }
    out
}

/// A record and its receipts as lines for a terminal, stored text escaped (`render::text`).
pub fn timeline_text(record: &v1::Record, history: &[v1::RecordEvent]) -> String {
    let status = v1::RecordStatus::try_from(record.status).unwrap_or_default();
    let mut out = format!(
        "{}/{}  {}  token {}  attempt {}  dedup hits {}\n",
        text(&record.namespace),
        text(&record.key),
        status.as_str_name().trim_start_matches("RECORD_STATUS_"),
        record.fencing_token,
        record.attempt,
        record.dedup_hits
    );
    for event in history {
        let kind = v1::EventKind::try_from(event.kind).unwrap_or_default();
        let at = event
            .at
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let why = if event.reason.is_empty() {
            String::new()
        } else {
            format!("  ({})", text(&event.reason))
        };
        out.push_str(&format!(
            "{at:<26}  {:<9} {:<21} token {:<3} attempt {:<3} {}{why}\n",
            kind.as_str_name().trim_start_matches("EVENT_KIND_"),
            text(&event.outcome),
            event.fencing_token,
            event.attempt,
            text(&event.owner)
        ));
    }
    out
}

/// Another key claimed with the same arguments (`ClaimResponse.intent_matches`,
/// `ListDuplicateIntents`), as JSON.
pub fn intent_match_json(m: &v1::IntentMatch) -> Value {
    json!({
        "key": m.key,
        "status": describe_status(m.status),
        "claimed_at": time(&m.claimed_at),
        "refused": m.refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_text_escapes_control_and_bidi_characters() {
        assert_eq!(text("worker-7 Ünïcødé"), "worker-7 Ünïcødé");
        assert_eq!(
            text("w\x1b[2K\r2026-01-01  COMPLETE SUCCEEDED\n"),
            "w\\u{1b}[2K\\u{d}2026-01-01  COMPLETE SUCCEEDED\\u{a}"
        );
        assert_eq!(text("a\tb\x7f\u{9b}"), "a\\u{9}b\\u{7f}\\u{9b}");
        assert_eq!(text("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert!(!text("\x1b]0;title\x07").chars().any(char::is_control));
    }

    #[test]
    fn json_output_escapes_every_control_character_and_stays_the_same_json() {
        let value = json!({ "lease_owner": "a\x1b[2Kb\x7fc\u{9b}d\u{202e}e\nf" });
        let out = json_text(&value).unwrap();
        assert!(
            !out.replace('\n', "").chars().any(char::is_control),
            "{out:?}"
        );
        assert!(!out.contains('\u{202e}'), "{out:?}");
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), value);
        let plain = json!({ "k": "v" });
        assert_eq!(
            json_text(&plain).unwrap(),
            serde_json::to_string_pretty(&plain).unwrap()
        );
    }

    #[test]
    fn a_timeline_shows_an_owner_with_escapes_on_one_line() {
        let record = v1::Record {
            namespace: "payments.charge".into(),
            key: "order-1".into(),
            status: v1::RecordStatus::Processing as i32,
            ..Default::default()
        };
        let event = |owner: &str| v1::RecordEvent {
            kind: v1::EventKind::Claim as i32,
            outcome: "ACQUIRED".into(),
            owner: owner.into(),
            ..Default::default()
        };
        let forged = "w\x1b[2K\r\n2026-01-01T00:00:00Z        COMPLETE  SUCCEEDED";
        let out = timeline_text(&record, &[event("worker-7"), event(forged)]);
        assert_eq!(out.lines().count(), 3, "{out}");
        assert!(
            !out.replace('\n', "").chars().any(char::is_control),
            "{out:?}"
        );
        assert!(out.contains("w\\u{1b}[2K\\u{d}\\u{a}2026"), "{out}");
    }
}
