//! ListRecords: the request checked and turned into a filter, a page size and a cursor (from the
//! page token), one page read through the engine, and each record shown as Lookup would show it
//! at that moment, without its history, result body or error details (Lookup has those).

use super::error::ApiError;
use super::page_token::PageTokens;
use super::{convert, LedgerService};
use crate::ledger::{ListFilter, Millis, ParentRef, Record, Status};
use crate::store::Store;
use oncekey_api::v1;

/// Records per page when the request leaves `page_size` at 0.
pub const DEFAULT_PAGE_SIZE: u32 = 100;
/// The largest `page_size` accepted.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// A checked ListRecords request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListRequest {
    /// Which records.
    pub filter: ListFilter,
    /// How many at most.
    pub page_size: usize,
    /// Where to resume (from the page token); `None` for the first page.
    pub cursor: Option<Vec<u8>>,
}

/// Checks `req` of `tenant`: every field named on error, the page token against the filter.
pub fn request(
    tenant: &str,
    req: &v1::ListRecordsRequest,
    tokens: &PageTokens,
) -> Result<ListRequest, ApiError> {
    let namespace = match req.namespace.as_str() {
        "" => None,
        ns => {
            convert::namespace("namespace", ns)?;
            Some(ns.to_owned())
        }
    };
    let statuses = req
        .statuses
        .iter()
        .map(|s| status(*s))
        .collect::<Result<Vec<_>, _>>()?;
    let parent = match &req.parent {
        Some(p) => {
            convert::namespace("parent.namespace", &p.namespace)?;
            convert::key("parent.key", &p.key)?;
            Some(ParentRef {
                namespace: p.namespace.clone(),
                key: p.key.clone(),
            })
        }
        None => None,
    };
    let page_size = page_size(req.page_size)?;
    let filter = ListFilter::new(namespace, statuses, parent);
    let cursor = match req.page_token.as_str() {
        "" => None,
        token => Some(tokens.open(tenant, &filter, token)?),
    };
    Ok(ListRequest {
        filter,
        page_size: page_size as usize,
        cursor,
    })
}

/// A listing's `page_size`: 1..=`MAX_PAGE_SIZE`, `DEFAULT_PAGE_SIZE` when 0.
pub fn page_size(requested: u32) -> Result<u32, ApiError> {
    match requested {
        0 => Ok(DEFAULT_PAGE_SIZE),
        n if n > MAX_PAGE_SIZE => Err(ApiError::invalid(
            "page_size",
            format!("must be at most {MAX_PAGE_SIZE} (0 means {DEFAULT_PAGE_SIZE})"),
        )),
        n => Ok(n),
    }
}

/// A status to filter by: any status a record can be reported with.
fn status(value: i32) -> Result<Status, ApiError> {
    match v1::RecordStatus::try_from(value) {
        Ok(v1::RecordStatus::Processing) => Ok(Status::Processing),
        Ok(v1::RecordStatus::Succeeded) => Ok(Status::Succeeded),
        Ok(v1::RecordStatus::Failed) => Ok(Status::Failed),
        Ok(v1::RecordStatus::Retry) => Ok(Status::Retry),
        Ok(v1::RecordStatus::Unknown) => Ok(Status::Unknown),
        Ok(v1::RecordStatus::AwaitingApproval) => Ok(Status::AwaitingApproval),
        Ok(v1::RecordStatus::Approved) => Ok(Status::Approved),
        Ok(v1::RecordStatus::Unspecified) | Err(_) => Err(ApiError::invalid(
            "statuses",
            format!("{value} is not a record status"),
        )),
    }
}

/// A listed record on the wire: as Lookup shows it at `now`, without its history, result body
/// or error details.
pub fn listed(mut record: Record, now: Millis) -> v1::Record {
    record.history = Vec::new();
    if let Some(result) = record.result.as_mut() {
        result.body = Vec::new();
    }
    if let Some(error) = record.error.as_mut() {
        error.details = Vec::new();
    }
    convert::record(record, now)
}

impl<S: Store> LedgerService<S> {
    /// One page of the caller's records.
    pub(super) async fn list_records_rpc(
        &self,
        tenant: &str,
        req: &v1::ListRecordsRequest,
    ) -> Result<v1::ListRecordsResponse, ApiError> {
        // A parent named by its key in a private namespace is looked for as stored.
        let stored = self.list_request_as_stored(tenant, req)?;
        let request = request(tenant, stored.as_ref().unwrap_or(req), &self.page_tokens)?;
        let page = self
            .engine
            .list(
                tenant,
                &request.filter,
                request.cursor.as_deref(),
                request.page_size,
            )
            .await?;
        let now = self.now();
        Ok(v1::ListRecordsResponse {
            records: page.records.into_iter().map(|r| listed(r, now)).collect(),
            next_page_token: page
                .next
                .map(|cursor| self.page_tokens.issue(tenant, &request.filter, &cursor))
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(r: Result<ListRequest, ApiError>) -> String {
        match r {
            Err(ApiError::InvalidField { field, .. } | ApiError::TooLarge { field, .. }) => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn page_size_defaults_to_100_and_is_at_most_1000() {
        let tokens = PageTokens::new([1; 32]);
        let req = |page_size| v1::ListRecordsRequest {
            page_size,
            ..Default::default()
        };
        assert_eq!(request("t", &req(0), &tokens).unwrap().page_size, 100);
        assert_eq!(request("t", &req(1), &tokens).unwrap().page_size, 1);
        assert_eq!(request("t", &req(1000), &tokens).unwrap().page_size, 1000);
        assert_eq!(field_of(request("t", &req(1001), &tokens)), "page_size");
        assert_eq!(field_of(request("t", &req(u32::MAX), &tokens)), "page_size");
    }

    #[test]
    fn every_filter_field_is_checked_and_named() {
        let tokens = PageTokens::new([1; 32]);
        let bad_ns = v1::ListRecordsRequest {
            namespace: "Bad NS".into(),
            ..Default::default()
        };
        assert_eq!(field_of(request("t", &bad_ns, &tokens)), "namespace");
        for bad in [0, 99, -1] {
            let req = v1::ListRecordsRequest {
                statuses: vec![v1::RecordStatus::Unknown as i32, bad],
                ..Default::default()
            };
            assert_eq!(field_of(request("t", &req, &tokens)), "statuses", "{bad}");
        }
        let parent = |namespace: &str, key: &str| v1::ListRecordsRequest {
            parent: Some(v1::OperationRef {
                namespace: namespace.into(),
                key: key.into(),
            }),
            ..Default::default()
        };
        assert_eq!(
            field_of(request("t", &parent("", "k"), &tokens)),
            "parent.namespace"
        );
        assert_eq!(
            field_of(request("t", &parent("ns", ""), &tokens)),
            "parent.key"
        );
        let ok = request("t", &parent("flows", "f-1"), &tokens).unwrap();
        assert_eq!(ok.filter.parent.unwrap().key, "f-1");
        let forged = v1::ListRecordsRequest {
            page_token: "bm90LWEtdG9rZW4".into(),
            ..Default::default()
        };
        assert_eq!(field_of(request("t", &forged, &tokens)), "page_token");
    }

    #[test]
    fn a_listed_record_has_no_history_body_or_details() {
        let id = crate::ledger::RecordId::new("t", "ns", "k");
        let args = crate::ledger::ClaimArgs::for_test(
            [1; 32],
            crate::ledger::Semantics::AtLeastOnce,
            1_000,
            60_000,
            "o",
        );
        let mut record = crate::ledger::claim(&id, None, &args, 0)
            .unwrap()
            .record()
            .clone();
        record.result = Some(crate::ledger::OpResult {
            code: 201,
            body: b"secret body".to_vec(),
            content_type: "text/plain".into(),
            metadata: [("m".to_owned(), "v".to_owned())].into(),
        });
        record.error = Some(crate::ledger::OpError {
            code: 7,
            message: "last error".into(),
            details: b"details".to_vec(),
        });
        assert!(!record.history.is_empty());
        let wire = listed(record, 0);
        let result = wire.result.unwrap();
        assert_eq!((result.code, result.body.len()), (201, 0));
        assert_eq!(result.metadata.get("m").map(String::as_str), Some("v"));
        let error = wire.error.unwrap();
        assert_eq!(
            (error.message.as_str(), error.details.len()),
            ("last error", 0)
        );
    }
}
