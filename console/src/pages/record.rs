//! *A record*: every field, the result or error rendered by content type, the run budget of a
//! parent, the receipts as a timeline, its parent and children, and the actions the operator's scopes allow (the ledger
//! refuses them anyway when they do not).

use super::{budget, layout, record_href, records, Nav};
use crate::render::{self, Body};
use crate::session::Session;
use maud::{html, Markup};
use oncekey_api::v1;

/// Everything the page shows.
pub(crate) struct View<'a> {
    pub(crate) record: &'a v1::Record,
    pub(crate) history: &'a [v1::RecordEvent],
    /// The children, or why they could not be listed.
    pub(crate) children: Result<&'a [v1::Record], String>,
    pub(crate) flash: Option<&'a str>,
    pub(crate) now: u64,
}

fn body(b: Body) -> Markup {
    html! {
        @match b {
            Body::Empty => { p.muted { "(empty)" } }
            Body::Json(text) => { pre.body.json { (text) } }
            Body::Text(text) => { pre.body.text { (text) } }
            Body::Binary { len, head } => {
                p { (len) " bytes of binary data; the first " (head.len() / 2) " in hex:" }
                pre.body.hex { (head) }
            }
        }
    }
}

fn fields(r: &v1::Record, now: u64) -> Markup {
    let status = render::status(r.status);
    html! {
        dl.fields {
            dt { "Status" } dd { span class={ "status s-" (status) } #status { (status) } }
            dt { "Semantics" } dd { (render::semantics(r.semantics)) }
            dt { "Fingerprint" } dd { code #fingerprint { (hex::encode(&r.fingerprint)) } }
            dt { "Fencing token" } dd { (r.fencing_token) }
            dt { "Attempt" } dd { (r.attempt) @if r.max_attempts > 0 { " of at most " (r.max_attempts) } }
            dt { "Dedup hits" } dd { (r.dedup_hits) }
            dt { "Lease owner" } dd { (r.lease_owner) }
            dt { "Lease expires" } dd { (render::time(r.lease_expires_at.as_ref())) " " span.muted { (render::age(r.lease_expires_at.as_ref(), now)) } }
            dt { "Created" } dd { (render::time(r.created_at.as_ref())) " " span.muted { (render::age(r.created_at.as_ref(), now)) } }
            dt { "Updated" } dd { (render::time(r.updated_at.as_ref())) " " span.muted { (render::age(r.updated_at.as_ref(), now)) } }
            dt { "Expires" } dd { @if r.expires_at.is_some() { (render::time(r.expires_at.as_ref())) } @else { "when it settles" } }
            dt { "Requires approval" } dd { @if r.require_approval { "yes" } @else { "no" } }
            @if let Some(a) = &r.approval {
                dt { "Approval" }
                dd #approval { (render::decision(a.decision)) " by " strong { (a.decided_by) } " at " (render::time(a.decided_at.as_ref())) @if !a.note.is_empty() { ": " q { (a.note) } } }
            }
            dt { "Parent" }
            dd { @if let Some(p) = &r.parent { a #parent-link href=(record_href(&p.namespace, &p.key)) { (p.namespace) " / " (p.key) } } @else { "none" } }
        }
    }
}

fn outcome(r: &v1::Record) -> Markup {
    html! {
        @if let Some(res) = &r.result {
            section #result aria-labelledby="result-title" {
                h2 #result-title { "Result" }
                p { "Code " strong { (res.code) } @if !res.content_type.is_empty() { ", " code { (res.content_type) } } }
                (body(render::body(&res.body, &res.content_type)))
                @if !res.metadata.is_empty() {
                    table.meta { tbody { @for (k, v) in &res.metadata { tr { th scope="row" { (k) } td { (v) } } } } }
                }
            }
        }
        @if let Some(err) = &r.error {
            section #error aria-labelledby="error-title" {
                h2 #error-title { "Error" }
                p { "Code " strong { (err.code) } ": " span #error-message { (err.message) } }
                @if !err.details.is_empty() { h3 { "Details" } (body(render::body(&err.details, ""))) }
            }
        }
    }
}

fn timeline(history: &[v1::RecordEvent]) -> Markup {
    html! {
        section #receipts aria-labelledby="receipts-title" {
            h2 #receipts-title { "Receipts" }
            @if history.is_empty() { p.muted { "No receipts." } }
            ol.timeline {
                @for e in history {
                    li.receipt {
                        time { (render::time(e.at.as_ref())) }
                        " " strong.kind { (render::event_kind(e.kind)) } " → " span.outcome { (e.outcome) }
                        " · attempt " (e.attempt) " · token " (e.fencing_token)
                        @if !e.owner.is_empty() { " · by " span.owner { (e.owner) } }
                        @if !e.reason.is_empty() { " · " span.reason { (e.reason) } }
                    }
                }
            }
        }
    }
}

/// The hidden fields every action form carries.
fn ids(session: &Session, r: &v1::Record) -> Markup {
    html! {
        input type="hidden" name="csrf" value=(session.csrf);
        input type="hidden" name="namespace" value=(r.namespace);
        input type="hidden" name="key" value=(r.key);
    }
}

fn approval_forms(session: &Session, r: &v1::Record) -> Markup {
    let fingerprint = hex::encode(&r.fingerprint);
    html! {
        section #decide aria-labelledby="decide-title" {
            h2 #decide-title { "Approve or reject" }
            p { "The decision pins the arguments' fingerprint " code { (fingerprint) } ": if the stored one differs, the ledger refuses it." }
            form.action method="post" action="/record/approve" {
                (ids(session, r))
                input type="hidden" name="fingerprint" value=(fingerprint);
                label for="approve-note" { "Note (kept with the decision)" }
                textarea #approve-note name="note" maxlength="1024" rows="2" {}
                button type="submit" #approve { "Approve" }
            }
            form.action method="post" action="/record/reject" {
                (ids(session, r))
                input type="hidden" name="fingerprint" value=(fingerprint);
                label for="reject-note" { "Reason (stored as the error message, code 403)" }
                textarea #reject-note name="note" maxlength="1024" rows="2" {}
                button.danger type="submit" #reject { "Reject" }
            }
        }
    }
}

fn reconcile_form(session: &Session, r: &v1::Record) -> Markup {
    html! {
        section #reconcile aria-labelledby="reconcile-title" {
            h2 #reconcile-title { "Reconcile" }
            p { "Check what the outside world shows (the payment provider, the mailbox, …), then record it. The console claims the operation for reconciliation and settles it; your name and note go into the receipts." }
            form.action method="post" action="/record/reconcile" {
                (ids(session, r))
                fieldset {
                    legend { "What happened?" }
                    label.check { input type="radio" name="outcome" value="succeeded" required; " It happened: record this result" }
                    label.check { input type="radio" name="outcome" value="failed"; " It did not happen: fail the operation for good" }
                }
                label for="rc-code" { "Code (the result's or the error's)" }
                input #rc-code type="number" name="code" value="200" min="-2147483648" max="2147483647";
                label for="rc-ct" { "Result content type" }
                input #rc-ct type="text" name="content_type" value="application/json";
                label for="rc-body" { "Result body" }
                textarea #rc-body name="body" rows="4" {}
                label for="rc-message" { "Error message (when it did not happen)" }
                input #rc-message type="text" name="message" maxlength="1024";
                label for="rc-note" { "Note (what you checked)" }
                textarea #rc-note name="note" required maxlength="200" rows="2" {}
                button type="submit" #reconcile-button { "Reconcile" }
            }
        }
    }
}

fn purge_form(session: &Session, r: &v1::Record) -> Markup {
    let unsettled_amo = r.semantics == v1::Semantics::AtMostOnce as i32
        && (r.status == v1::RecordStatus::Processing as i32
            || r.status == v1::RecordStatus::Unknown as i32);
    html! {
        section #purge aria-labelledby="purge-title" {
            h2 #purge-title { "Purge" }
            p { "Removes the record and its receipts. The key can then be claimed anew (its fencing tokens keep counting up)." }
            form.action method="post" action="/record/purge" {
                (ids(session, r))
                label for="confirm" { "Type the key to confirm" }
                input #confirm type="text" name="confirm" required autocomplete="off";
                @if unsettled_amo {
                    label.check.danger {
                        input #force type="checkbox" name="force" value="on";
                        " force: this at-most-once operation is unsettled; purging it lets the effect run again"
                    }
                }
                button.danger type="submit" #purge-button { "Purge" }
            }
        }
    }
}

/// The page.
pub(crate) fn page(session: &Session, v: &View<'_>) -> Markup {
    let r = v.record;
    let awaiting = r.status == v1::RecordStatus::AwaitingApproval as i32;
    let unknown = r.status == v1::RecordStatus::Unknown as i32;
    let title = format!("{} / {}", r.namespace, r.key);
    layout(
        &title,
        Some(session),
        Nav::None,
        html! {
            p.crumbs { a href={ "/records?namespace=" (r.namespace) } { (r.namespace) } }
            h1 { span.muted { (r.namespace) " / " } span #key { (r.key) } }
            @if let Some(f) = v.flash { p.ok role="status" #flash { (f) } }
            (fields(r, v.now))
            @if let Some(u) = &r.budget { (budget::block(u)) }
            (outcome(r))
            @if awaiting && session.scopes.approve { (approval_forms(session, r)) }
            @if awaiting && !session.scopes.approve { p.muted #no-approve { "Your token has no approve scope: someone who has it decides." } }
            @if unknown && session.scopes.ledger { (reconcile_form(session, r)) }
            (timeline(v.history))
            section #children aria-labelledby="children-title" {
                h2 #children-title { "Children" }
                @match &v.children {
                    Ok([]) => { p.muted { "No child operations." } }
                    Ok(children) => { (records::table(children, Some(v.now))) }
                    Err(e) => { p.error { (e) } }
                }
            }
            @if session.scopes.admin { (purge_form(session, r)) }
        },
    )
}
