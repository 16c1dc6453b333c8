//! *Needs attention*, the home page: what waits for a person — UNKNOWN operations to reconcile,
//! operations AWAITING_APPROVAL, at-least-once operations whose lease lapsed, and suspected
//! duplicate intents (`duplicates`) — with counts per namespace, oldest first.
//! `/assets/console.js` replaces the lists (`GET /attention`) every `--refresh` when they
//! changed, leaving the filter box, anything typed in it and the focus alone.

use super::duplicates::{self, Duplicates};
use super::{layout, records, Nav};
use crate::render;
use crate::session::Session;
use maud::{html, Markup};
use oncekey_api::v1;
use std::collections::BTreeMap;

/// The records that need attention, each list oldest first.
#[derive(Debug)]
pub(crate) struct Attention {
    pub(crate) unknown: Vec<v1::Record>,
    pub(crate) awaiting: Vec<v1::Record>,
    pub(crate) lapsed: Vec<v1::Record>,
    /// The suspected duplicate intents, or why they could not be read (the other lists are
    /// shown anyway).
    pub(crate) duplicates: Result<Duplicates, String>,
    /// Some list stopped at the console's limit.
    pub(crate) truncated: bool,
    /// Unix seconds the lists were read.
    pub(crate) now: u64,
}

impl Attention {
    /// Sorts each list oldest first (by when the record last changed).
    pub(crate) fn sorted(mut self) -> Self {
        for list in [&mut self.unknown, &mut self.awaiting, &mut self.lapsed] {
            list.sort_by_key(|r| {
                r.updated_at
                    .as_ref()
                    .map_or((i64::MAX, 0), |t| (t.seconds, t.nanos))
            });
        }
        self
    }

    fn counts(&self) -> BTreeMap<&str, [usize; 4]> {
        let mut counts: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
        for (i, list) in [&self.unknown, &self.awaiting, &self.lapsed]
            .into_iter()
            .enumerate()
        {
            for r in list {
                counts.entry(r.namespace.as_str()).or_default()[i] += 1;
            }
        }
        for d in self.intents() {
            counts.entry(d.namespace.as_str()).or_default()[3] += 1;
        }
        counts
    }

    fn intents(&self) -> &[v1::DuplicateIntent] {
        self.duplicates.as_ref().map_or(&[], |d| &d.intents)
    }
}

/// The lists alone (what the live refresh fetches).
pub(crate) fn fragment(a: &Attention) -> Markup {
    let counts = a.counts();
    let total = a.unknown.len() + a.awaiting.len() + a.lapsed.len() + a.intents().len();
    html! {
        @if a.truncated { p.error { "A list holds more than the first 1000 records shown: filter on the Records page." } }
        @if total == 0 {
            p.ok #nothing { "Nothing needs attention." }
        } @else {
            h2 { "By namespace" }
            table.counts {
                thead { tr { th scope="col" { "Namespace" } th scope="col" { "Unknown" } th scope="col" { "Awaiting approval" } th scope="col" { "Lease lapsed" } th scope="col" { "Duplicate intents" } } }
                tbody {
                    @for (ns, c) in &counts {
                        tr { th scope="row" { (ns) } td { (c[0]) } td { (c[1]) } td { (c[2]) } td { (c[3]) } }
                    }
                }
            }
        }
        (section("unknown", "Outcome unknown: reconcile", "At-most-once operations whose lease ran out: check the outside world, then settle them.", &a.unknown))
        (section("awaiting", "Awaiting approval", "Nobody performs these until someone approves.", &a.awaiting))
        (section("lapsed", "Lease lapsed", "At-least-once operations whose holder stopped renewing; the next Claim takes them over.", &a.lapsed))
        (duplicates::section(&a.duplicates))
    }
}

/// One list.
fn section(id: &str, title: &str, help: &str, records: &[v1::Record]) -> Markup {
    html! {
        section id=(id) aria-labelledby={ (id) "-title" } {
            h2 id={ (id) "-title" } { (title) " " span.count { "(" (records.len()) ")" } }
            p.help { (help) }
            @if !records.is_empty() { (records::table(records, None)) }
        }
    }
}

/// The whole page: a filter box the refresh leaves alone, and the lists.
pub(crate) fn page(session: &Session, a: &Attention, refresh_ms: u128) -> Markup {
    layout(
        "Needs attention",
        Some(session),
        Nav::Attention,
        html! {
            h1 { "Needs attention" }
            div.filter {
                label for="filter" { "Filter these lists" }
                input #filter type="search" placeholder="namespace, key or owner" autocomplete="off";
            }
            p.muted {
                span #refreshed { "As of " (render::time(Some(&prost_types::Timestamp { seconds: i64::try_from(a.now).unwrap_or(0), nanos: 0 }))) "." }
                " " span #changes role="status" {}
            }
            div #attention data-refresh-ms=(refresh_ms) { (fragment(a)) }
        },
    )
}
