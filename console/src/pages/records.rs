//! *Records*: ListRecords with its filters (namespace, statuses, parent), one page at a time.

use super::{budget, layout, record_href, Nav};
use crate::render;
use crate::session::Session;
use maud::{html, Markup};
use oncekey_api::v1;

/// The filters as the form sent them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    pub(crate) namespace: String,
    /// Status names without their prefix.
    pub(crate) statuses: Vec<String>,
    /// `NAMESPACE/KEY`, or empty.
    pub(crate) parent: String,
    pub(crate) page_token: String,
}

/// Every status an operator can filter by.
pub(crate) const STATUSES: [&str; 7] = [
    "PROCESSING",
    "SUCCEEDED",
    "FAILED",
    "RETRY",
    "UNKNOWN",
    "AWAITING_APPROVAL",
    "APPROVED",
];

impl Filter {
    /// The query string of this filter with another page token.
    fn query(&self, page_token: &str) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if !self.namespace.is_empty() {
            pairs.push(("namespace", &self.namespace));
        }
        for s in &self.statuses {
            pairs.push(("status", s));
        }
        if !self.parent.is_empty() {
            pairs.push(("parent", &self.parent));
        }
        if !page_token.is_empty() {
            pairs.push(("page_token", page_token));
        }
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    }

    /// The ListRecords request, or what is wrong with the filter.
    pub(crate) fn request(&self) -> Result<v1::ListRecordsRequest, String> {
        let statuses = self
            .statuses
            .iter()
            .map(|s| {
                v1::RecordStatus::from_str_name(&format!("RECORD_STATUS_{s}"))
                    .filter(|s| *s != v1::RecordStatus::Unspecified)
                    .map(|s| s as i32)
                    .ok_or_else(|| format!("status {s}: expected one of {}", STATUSES.join(", ")))
            })
            .collect::<Result<_, _>>()?;
        let parent = match self.parent.trim() {
            "" => None,
            p => {
                let (namespace, key) = p
                    .split_once('/')
                    .ok_or("parent: write it as NAMESPACE/KEY")?;
                Some(v1::OperationRef {
                    namespace: namespace.into(),
                    key: key.into(),
                })
            }
        };
        Ok(v1::ListRecordsRequest {
            namespace: self.namespace.trim().to_owned(),
            statuses,
            parent,
            page_size: 100,
            page_token: self.page_token.clone(),
        })
    }
}

/// A table of records (the Records page, a record's children, the Needs attention lists). With
/// `now`, times read "5m ago"; without, they are absolute, so a refreshed list changes only when
/// its records do.
pub(crate) fn table(records: &[v1::Record], now: Option<u64>) -> Markup {
    let when = |r: &v1::Record| match now {
        Some(now) => render::age(r.updated_at.as_ref(), now),
        None => render::time(r.updated_at.as_ref()),
    };
    html! {
        table.records {
            thead { tr {
                th scope="col" { "Namespace" } th scope="col" { "Key" } th scope="col" { "Status" }
                th scope="col" { "Attempt" } th scope="col" { "Owner" }
                th scope="col" { @if now.is_some() { "Updated" } @else { "Last change (UTC)" } }
            } }
            tbody {
                @for r in records {
                    tr.row {
                        td { (r.namespace) }
                        td.key {
                            a href=(record_href(&r.namespace, &r.key)) { (r.key) }
                            @if let Some(u) = &r.budget { " " (budget::marker(u)) }
                        }
                        td { span class={ "status s-" (render::status(r.status)) } { (render::status(r.status)) } }
                        td { (r.attempt) }
                        td.owner { (r.lease_owner) }
                        td title=(render::time(r.updated_at.as_ref())) { (when(r)) }
                    }
                }
            }
        }
    }
}

/// The page: the filter form, then the records or the error, then the next page's link.
pub(crate) fn page(
    session: &Session,
    filter: &Filter,
    result: Result<&v1::ListRecordsResponse, &str>,
    flash: Option<&str>,
    now: u64,
) -> Markup {
    layout(
        "Records",
        Some(session),
        Nav::Records,
        html! {
            h1 { "Records" }
            @if let Some(f) = flash { p.ok role="status" { (f) } }
            form.filters method="get" action="/records" {
                div {
                    label for="namespace" { "Namespace" }
                    input #namespace type="text" name="namespace" value=(filter.namespace) placeholder="every namespace";
                }
                fieldset {
                    legend { "Status" }
                    @for s in STATUSES {
                        label.check {
                            input type="checkbox" name="status" value=(s) checked[filter.statuses.iter().any(|x| x == s)];
                            " " (s)
                        }
                    }
                }
                div {
                    label for="parent" { "Parent (NAMESPACE/KEY)" }
                    input #parent type="text" name="parent" value=(filter.parent);
                }
                button type="submit" { "Filter" }
            }
            @match result {
                Err(e) => { p.error role="alert" { (e) } }
                Ok(page) => {
                    @if page.records.is_empty() { p #no-records { "No records match." } }
                    @else { (table(&page.records, Some(now))) }
                    @if !page.next_page_token.is_empty() {
                        p { a rel="next" href={ "/records?" (filter.query(&page.next_page_token)) } { "Next page" } }
                    }
                }
            }
        },
    )
}
