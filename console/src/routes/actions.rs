//! The actions (POST): approve, reject, reconcile, purge. Each passes `App::actor` (same origin,
//! session, CSRF) before the ledger is called, and redirects to the page that shows the result.

use super::{App, Shared};
use crate::ledger::{CallError, Settle};
use crate::pages;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use http::HeaderMap;
use oncekey_api::v1;
use serde::Deserialize;

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Decide {
    csrf: String,
    namespace: String,
    key: String,
    fingerprint: String,
    note: String,
}

/// A short, non-reversible name of a key for logs.
fn key_hash(key: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(key.as_bytes())[..8])
}

async fn decide(app: &App, headers: &HeaderMap, form: Decide, approve: bool) -> Response {
    let session = match app.actor(headers, &form.csrf) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let back = pages::record_href(&form.namespace, &form.key);
    let Ok(fingerprint) = hex::decode(form.fingerprint.trim()) else {
        let e = CallError::local(tonic::Code::InvalidArgument, "fingerprint: not hex");
        return app.failed(Some(&session), &e, Some((&back, "Back to the record")));
    };
    let target = (form.namespace.as_str(), form.key.as_str());
    match app
        .ledger
        .decide(&session, approve, target, fingerprint, &form.note)
        .await
    {
        Ok(()) => {
            let action = if approve { "approved" } else { "rejected" };
            tracing::info!(operator = %session.name, action, namespace = %form.namespace, key_hash = %key_hash(&form.key), "console action");
            Redirect::to(&format!("{back}&done={action}")).into_response()
        }
        Err(e) => app.failed(Some(&session), &e, Some((&back, "Back to the record"))),
    }
}

pub(super) async fn approve(
    State(app): Shared,
    headers: HeaderMap,
    Form(form): Form<Decide>,
) -> Response {
    decide(&app, &headers, form, true).await
}

pub(super) async fn reject(
    State(app): Shared,
    headers: HeaderMap,
    Form(form): Form<Decide>,
) -> Response {
    decide(&app, &headers, form, false).await
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Reconcile {
    csrf: String,
    namespace: String,
    key: String,
    outcome: String,
    code: String,
    content_type: String,
    body: String,
    message: String,
    note: String,
}

/// The Claim's owner: who reconciled and why, cut to the ledger's 256 bytes.
fn reconcile_owner(name: &str, note: &str) -> String {
    // The ledger refuses control characters in an owner: a note's line breaks become spaces.
    let note: String = note
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut owner = format!("{name} (console): {note}");
    if owner.len() > 256 {
        let mut end = 253;
        while !owner.is_char_boundary(end) {
            end -= 1;
        }
        owner.truncate(end);
        owner.push('…');
    }
    owner
}

/// A reconciliation note: it must fit the result's metadata (1 KiB with its name).
const MAX_NOTE_BYTES: usize = 1000;
/// A result body (the ledger's default `--max-result-bytes`).
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// An error message (the ledger's limit).
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// The settlement the form describes, or what is wrong with it (naming the field).
fn settle(form: &Reconcile, name: &str) -> Result<Settle, String> {
    let code: i32 = form
        .code
        .trim()
        .parse()
        .map_err(|_| format!("code {:?}: a whole number", form.code))?;
    // Checked here, before the Claim: a settlement the ledger refused after acquiring would
    // leave the operation PROCESSING until its lease lapses back to UNKNOWN.
    if form.note.trim().is_empty() {
        return Err("note: say what you checked (it goes into the receipts)".into());
    }
    if form.note.trim().len() > MAX_NOTE_BYTES {
        return Err(format!("note: at most {MAX_NOTE_BYTES} bytes"));
    }
    let content_type = form.content_type.trim();
    if content_type.len() > 256 || content_type.chars().any(char::is_control) {
        return Err("content_type: at most 256 bytes, no control characters".into());
    }
    if form.body.len() > MAX_BODY_BYTES {
        return Err(format!(
            "body: at most {MAX_BODY_BYTES} bytes (the ledger's default --max-result-bytes)"
        ));
    }
    if form.message.len() > MAX_MESSAGE_BYTES {
        return Err(format!("message: at most {MAX_MESSAGE_BYTES} bytes"));
    }
    match form.outcome.as_str() {
        "succeeded" => Ok(Settle::Succeeded(v1::OperationResult {
            code,
            body: form.body.clone().into_bytes(),
            content_type: content_type.to_owned(),
            metadata: [
                ("oncekey.reconciled_by".to_owned(), name.to_owned()),
                ("oncekey.note".to_owned(), form.note.trim().to_owned()),
            ]
            .into(),
        })),
        "failed" => {
            let details = serde_json::json!({"reconciled_by": name, "note": form.note.trim()});
            let message = match form.message.trim() {
                "" => "reconciled: it did not happen".to_owned(),
                m => m.to_owned(),
            };
            Ok(Settle::Failed(v1::OperationError {
                code,
                message,
                details: details.to_string().into_bytes(),
            }))
        }
        other => Err(format!(
            "outcome {other:?}: choose whether it happened (succeeded) or not (failed)"
        )),
    }
}

pub(super) async fn reconcile(
    State(app): Shared,
    headers: HeaderMap,
    Form(form): Form<Reconcile>,
) -> Response {
    let session = match app.actor(&headers, &form.csrf) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let back = pages::record_href(&form.namespace, &form.key);
    let back_link = Some((back.as_str(), "Back to the record"));
    let settlement = match settle(&form, &session.name) {
        Ok(s) => s,
        Err(e) => {
            let e = CallError::local(tonic::Code::InvalidArgument, e);
            return app.failed(Some(&session), &e, back_link);
        }
    };
    let record = match app
        .ledger
        .lookup(&session, &form.namespace, &form.key)
        .await
    {
        Ok(found) => found.record.unwrap_or_default(),
        Err(e) => return app.failed(Some(&session), &e, back_link),
    };
    if record.status != v1::RecordStatus::Unknown as i32 {
        let e = CallError::local(
            tonic::Code::FailedPrecondition,
            format!(
                "the record is {}, not UNKNOWN: only an operation whose outcome is unknown is reconciled",
                crate::render::status(record.status)
            ),
        );
        return app.failed(Some(&session), &e, back_link);
    }
    let owner = reconcile_owner(&session.name, &form.note);
    match app
        .ledger
        .reconcile(&session, &record, owner, settlement)
        .await
    {
        Ok(()) => {
            tracing::info!(operator = %session.name, action = "reconciled", outcome = %form.outcome, namespace = %form.namespace, key_hash = %key_hash(&form.key), "console action");
            Redirect::to(&format!("{back}&done=reconciled")).into_response()
        }
        Err(e) => app.failed(Some(&session), &e, back_link),
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct Purge {
    csrf: String,
    namespace: String,
    key: String,
    confirm: String,
    force: String,
}

pub(super) async fn purge(
    State(app): Shared,
    headers: HeaderMap,
    Form(form): Form<Purge>,
) -> Response {
    let session = match app.actor(&headers, &form.csrf) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let back = pages::record_href(&form.namespace, &form.key);
    let back_link = Some((back.as_str(), "Back to the record"));
    if form.confirm != form.key {
        let e = CallError::local(
            tonic::Code::InvalidArgument,
            "confirm: type the record's key exactly to purge it",
        );
        return app.failed(Some(&session), &e, back_link);
    }
    let force = form.force == "on";
    match app
        .ledger
        .purge(&session, &form.namespace, &form.key, force)
        .await
    {
        Ok(()) => {
            tracing::info!(operator = %session.name, action = "purged", force, namespace = %form.namespace, key_hash = %key_hash(&form.key), "console action");
            let query = serde_urlencoded::to_string([
                ("namespace", form.namespace.as_str()),
                ("done", "purged"),
            ])
            .unwrap_or_default();
            Redirect::to(&format!("/records?{query}")).into_response()
        }
        Err(e) => app.failed(Some(&session), &e, back_link),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_owners_fit_the_ledger() {
        assert_eq!(
            reconcile_owner("alice", " checked stripe "),
            "alice (console): checked stripe"
        );
        assert_eq!(
            reconcile_owner("alice", "line one\nline two"),
            "alice (console): line one line two",
            "no control characters reach the ledger"
        );
        let long = reconcile_owner("bob", &"é".repeat(300));
        assert!(long.len() <= 256, "{}", long.len());
        assert!(long.ends_with('…'));
    }

    #[test]
    fn reconcile_forms_name_their_bad_field() {
        let form = |outcome: &str, code: &str, note: &str| Reconcile {
            csrf: String::new(),
            namespace: "n".into(),
            key: "k".into(),
            outcome: outcome.into(),
            code: code.into(),
            content_type: "application/json".into(),
            body: "{}".into(),
            message: String::new(),
            note: note.into(),
        };
        assert!(settle(&form("succeeded", "x", "n"), "a")
            .unwrap_err()
            .starts_with("code"));
        assert!(settle(&form("succeeded", "200", " "), "a")
            .unwrap_err()
            .starts_with("note"));
        let long_note = "x".repeat(1001);
        assert!(settle(&form("succeeded", "200", &long_note), "a")
            .unwrap_err()
            .starts_with("note"));
        assert!(settle(&form("maybe", "200", "n"), "a")
            .unwrap_err()
            .starts_with("outcome"));
        match settle(&form("succeeded", "201", "saw it"), "alice").unwrap() {
            Settle::Succeeded(r) => {
                assert_eq!(r.code, 201);
                assert_eq!(r.metadata["oncekey.reconciled_by"], "alice");
            }
            other => panic!("{other:?}"),
        }
        match settle(&form("failed", "402", "declined"), "alice").unwrap() {
            Settle::Failed(e) => assert_eq!(
                (e.code, e.message.as_str()),
                (402, "reconciled: it did not happen")
            ),
            other => panic!("{other:?}"),
        }
    }
}
