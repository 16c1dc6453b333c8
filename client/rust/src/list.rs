//! `ListRecords`: one page at a time ([`Client::list_records`]), or every matching record page
//! after page ([`Client::list_all`], a [`Pager`]).
//!
//! The filters select a tenant's records by namespace, by status (as Lookup reports it: a lapsed
//! at-most-once operation is `Unknown`) and by parent; every filter left empty matches every
//! record. Listed records carry neither history, result body nor error details: look a record up
//! for those.

use crate::connect::Client;
use crate::error::Error;
use crate::key::OperationKey;
use crate::stack::{Call, Reply};
use crate::types::{Record, RecordStatus};
use oncekey_api::v1;
use std::collections::VecDeque;

/// The most records one page holds.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// Which records to list, and which page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListRecords {
    namespace: Option<String>,
    statuses: Vec<RecordStatus>,
    parent: Option<(String, String)>,
    page_size: u32,
    page_token: String,
}

impl ListRecords {
    /// Every record of the caller's tenant, 100 a page.
    pub fn new() -> Self {
        Self::default()
    }

    /// Only records of `namespace`.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only records with `status` (or any other status given this way).
    pub fn status(mut self, status: RecordStatus) -> Self {
        self.statuses.push(status);
        self
    }

    /// Only records with one of `statuses`.
    pub fn statuses(mut self, statuses: impl IntoIterator<Item = RecordStatus>) -> Self {
        self.statuses.extend(statuses);
        self
    }

    /// Only records whose first Claim named `parent` as their parent operation.
    pub fn parent(mut self, parent: &OperationKey) -> Self {
        self.parent = Some((parent.namespace().into(), parent.key().into()));
        self
    }

    /// Records per page: 1..=1000 (the server refuses more; 0 means its default, 100).
    pub fn page_size(mut self, page_size: u32) -> Self {
        self.page_size = page_size;
        self
    }

    /// The page after the one whose `next_page_token` this is (the filters must stay the same).
    pub fn page_token(mut self, token: impl Into<String>) -> Self {
        self.page_token = token.into();
        self
    }

    fn to_wire(&self) -> v1::ListRecordsRequest {
        v1::ListRecordsRequest {
            namespace: self.namespace.clone().unwrap_or_default(),
            statuses: self.statuses.iter().map(|s| wire(*s) as i32).collect(),
            parent: self
                .parent
                .as_ref()
                .map(|(namespace, key)| v1::OperationRef {
                    namespace: namespace.clone(),
                    key: key.clone(),
                }),
            page_size: self.page_size,
            page_token: self.page_token.clone(),
        }
    }
}

fn wire(status: RecordStatus) -> v1::RecordStatus {
    match status {
        RecordStatus::Processing => v1::RecordStatus::Processing,
        RecordStatus::Succeeded => v1::RecordStatus::Succeeded,
        RecordStatus::Failed => v1::RecordStatus::Failed,
        RecordStatus::Retry => v1::RecordStatus::Retry,
        RecordStatus::Unknown => v1::RecordStatus::Unknown,
        RecordStatus::AwaitingApproval => v1::RecordStatus::AwaitingApproval,
        RecordStatus::Approved => v1::RecordStatus::Approved,
    }
}

/// One page of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordPage {
    /// The records of the page.
    pub records: Vec<Record>,
    /// The token of the next page (`ListRecords::page_token`); `None` after the last page.
    pub next_page_token: Option<String>,
}

impl Client {
    /// `ListRecords`: one page of the caller's records. Read-only, so retried like Lookup.
    pub async fn list_records(&self, request: &ListRecords) -> Result<RecordPage, Error> {
        match self.call(Call::ListRecords(request.to_wire())).await? {
            Reply::ListRecords(r) => Ok(RecordPage {
                records: r
                    .records
                    .into_iter()
                    .map(Record::from_wire)
                    .collect::<Result<_, _>>()?,
                next_page_token: Some(r.next_page_token).filter(|t| !t.is_empty()),
            }),
            _ => Err(Error::Protocol("mismatched reply")),
        }
    }

    /// Every record `request` selects, page after page, from its `page_token` on.
    pub fn list_all(&self, request: ListRecords) -> Pager {
        Pager {
            client: self.clone(),
            request,
            buffered: VecDeque::new(),
            done: false,
        }
    }
}

/// Walks a listing page by page (`Client::list_all`).
#[derive(Debug)]
pub struct Pager {
    client: Client,
    request: ListRecords,
    buffered: VecDeque<Record>,
    done: bool,
}

impl Pager {
    /// The next page, `None` after the last one.
    pub async fn next_page(&mut self) -> Option<Result<RecordPage, Error>> {
        if self.done {
            return None;
        }
        let page = self.client.list_records(&self.request).await;
        match &page {
            Ok(RecordPage {
                next_page_token: Some(token),
                ..
            }) => self.request.page_token.clone_from(token),
            // The last page, or an error (which ends the walk).
            _ => self.done = true,
        }
        Some(page)
    }

    /// The next record, `None` after the last one; an error ends the walk.
    pub async fn next(&mut self) -> Option<Result<Record, Error>> {
        loop {
            if let Some(record) = self.buffered.pop_front() {
                return Some(Ok(record));
            }
            match self.next_page().await? {
                Ok(page) => self.buffered.extend(page.records),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Every remaining record.
    pub async fn collect(mut self) -> Result<Vec<Record>, Error> {
        let mut all = Vec::new();
        while let Some(record) = self.next().await {
            all.push(record?);
        }
        Ok(all)
    }

    /// Where the walk is: the token of the next page to fetch (empty before the first).
    pub fn page_token(&self) -> &str {
        &self.request.page_token
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_carries_every_filter() {
        let parent = OperationKey::new("flows", ["order-1"]).unwrap();
        let wire = ListRecords::new()
            .namespace("payments.charge")
            .status(RecordStatus::Unknown)
            .statuses([RecordStatus::Processing])
            .parent(&parent)
            .page_size(500)
            .page_token("t")
            .to_wire();
        assert_eq!(wire.namespace, "payments.charge");
        assert_eq!(
            wire.statuses,
            [
                v1::RecordStatus::Unknown as i32,
                v1::RecordStatus::Processing as i32
            ]
        );
        let p = wire.parent.unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.key.as_str()),
            ("flows", parent.key())
        );
        assert_eq!((wire.page_size, wire.page_token.as_str()), (500, "t"));
        assert_eq!(
            ListRecords::new().to_wire(),
            v1::ListRecordsRequest::default()
        );
    }
}
