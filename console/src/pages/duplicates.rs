//! *Needs attention*'s suspected duplicate intents: what ListDuplicateIntents answers, the same
//! arguments claimed under more than one key of a namespace within its intent window (an agent
//! that made up a new key for a retry). One page is read; the section says when there may be more.
//!
//! Like the other lists it changes only when the intents do (the live refresh compares it):
//! times are absolute here, and `/assets/console.js` shows them as "5m ago".

use super::record_href;
use crate::render;
use maud::{html, Markup};
use oncekey_api::v1;

/// How many of the intent guard's index entries the page reads (one ListDuplicateIntents page).
pub(crate) const PAGE_SIZE: u32 = 200;

/// Hex digits of a fingerprint the list shows (the whole one is its title).
const SHORT_HEX: usize = 12;

/// One page of suspected duplicates.
#[derive(Debug, Default)]
pub(crate) struct Duplicates {
    /// In the ledger's order (stable from one read to the next).
    pub(crate) intents: Vec<v1::DuplicateIntent>,
    /// The ledger has index entries past the page read: there may be more.
    pub(crate) more: bool,
}

impl From<v1::ListDuplicateIntentsResponse> for Duplicates {
    fn from(page: v1::ListDuplicateIntentsResponse) -> Self {
        Self {
            intents: page.intents,
            more: !page.next_page_token.is_empty(),
        }
    }
}

/// A fingerprint's first hex digits.
fn short(fingerprint: &[u8]) -> String {
    let mut hex = hex::encode(fingerprint);
    hex.truncate(SHORT_HEX);
    hex
}

/// When a key was claimed: absolute (UTC, to the second) for the script to show relative.
fn claimed_at(t: Option<&prost_types::Timestamp>) -> Markup {
    let Some(t) = t else {
        return html! { span.muted { "—" } };
    };
    let whole = prost_types::Timestamp {
        seconds: t.seconds,
        nanos: 0,
    }
    .to_string();
    html! { time.claimed datetime=(whole) title=(whole) data-ago="" { (whole) } }
}

/// One key claimed with the arguments: linked when it has a record, marked when refused.
fn claim(namespace: &str, c: &v1::IntentMatch) -> Markup {
    let status = render::status(c.status);
    html! {
        li.claim {
            @if c.refused {
                span.key { (c.key) } " " span.status.s-REFUSED { "refused" }
            } @else if c.status == v1::RecordStatus::Unspecified as i32 {
                span.key { (c.key) } " " span.muted { "no record now" }
            } @else {
                a href=(record_href(namespace, &c.key)) { (c.key) }
                " " span class={ "status s-" (status) } { (status) }
            }
            " · claimed " (claimed_at(c.claimed_at.as_ref()))
        }
    }
}

/// The section: the intents, or why they could not be read.
pub(crate) fn section(duplicates: &Result<Duplicates, String>) -> Markup {
    let count = duplicates.as_ref().map_or(0, |d| d.intents.len());
    html! {
        section #duplicates aria-labelledby="duplicates-title" {
            h2 #duplicates-title { "Suspected duplicate intents " span.count { "(" (count) ")" } }
            p.help { "The same arguments claimed under more than one key of a namespace within its intent window: an agent may have made up a new key for a retry. Check whether the effect should happen once per key." }
            @match duplicates {
                Err(e) => { p.error #duplicates-error { (e) } }
                Ok(d) => {
                    @if d.more {
                        p.warn #duplicates-more { "Only the first " (PAGE_SIZE) " of the intent guard's entries were read: more suspected duplicates may exist (ListDuplicateIntents pages through them)." }
                    }
                    @if !d.intents.is_empty() { (table(&d.intents)) }
                }
            }
        }
    }
}

fn table(intents: &[v1::DuplicateIntent]) -> Markup {
    html! {
        table.duplicates {
            thead { tr {
                th scope="col" { "Namespace" } th scope="col" { "Fingerprint" }
                th scope="col" { "Claims, oldest first" }
            } }
            tbody {
                @for d in intents {
                    tr.row {
                        td { (d.namespace) }
                        td { code.fingerprint title=(hex::encode(&d.fingerprint)) { (short(&d.fingerprint)) } }
                        td { ul.claims { @for c in &d.claims { (claim(&d.namespace, c)) } } }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Option<prost_types::Timestamp> {
        Some(prost_types::Timestamp { seconds, nanos: 5 })
    }

    #[test]
    fn claims_link_records_and_mark_refusals() {
        let d = Duplicates {
            intents: vec![v1::DuplicateIntent {
                namespace: "dup.pay".into(),
                fingerprint: vec![0xab; 32],
                claims: vec![
                    v1::IntentMatch {
                        key: "k-<b>1".into(),
                        status: v1::RecordStatus::Succeeded as i32,
                        claimed_at: at(1_700_000_000),
                        refused: false,
                    },
                    v1::IntentMatch {
                        key: "k-2".into(),
                        status: v1::RecordStatus::Unspecified as i32,
                        claimed_at: at(1_700_000_060),
                        refused: true,
                    },
                ],
            }],
            more: true,
        };
        let html = section(&Ok(d)).into_string();
        assert!(html.contains("(1)"), "{html}");
        assert!(
            html.contains(
                r#"<a href="/record?namespace=dup.pay&amp;key=k-%3Cb%3E1">k-&lt;b&gt;1</a>"#
            ),
            "{html}"
        );
        assert!(html.contains("SUCCEEDED"), "{html}");
        assert!(
            !html.contains("key=k-2"),
            "a refused key has no record: {html}"
        );
        assert!(
            html.contains(
                r#"<span class="key">k-2</span> <span class="status s-REFUSED">refused</span>"#
            ),
            "{html}"
        );
        assert!(
            html.contains(&format!(">{}</code>", "ab".repeat(6))),
            "{html}"
        );
        assert!(
            html.contains(r#"datetime="2023-11-14T22:13:20Z""#),
            "{html}"
        );
        assert!(html.contains("id=\"duplicates-more\""), "{html}");
    }

    #[test]
    fn an_error_is_shown_in_place() {
        let html = section(&Err("Unimplemented: <old server>".into())).into_string();
        assert!(
            html.contains("(0)") && html.contains("&lt;old server&gt;"),
            "{html}"
        );
    }
}
