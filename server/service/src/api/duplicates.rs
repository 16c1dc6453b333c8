//! ListDuplicateIntents (docs/api.md, "ListDuplicateIntents"): the intent guard's index entries
//! holding more than one key, a page at a time, with page tokens signed like ListRecords' (bound
//! to the tenant and the namespace asked for).

use super::error::ApiError;
use super::listing::page_size;
use super::{convert, safety, LedgerService};
use crate::ledger::{ListFilter, INTENT_NAMESPACE};
use crate::store::Store;
use oncekey_api::v1;

impl<S: Store> LedgerService<S> {
    /// One page of the caller's suspected duplicate intents.
    pub(super) async fn list_duplicate_intents_rpc(
        &self,
        tenant: &str,
        req: &v1::ListDuplicateIntentsRequest,
    ) -> Result<v1::ListDuplicateIntentsResponse, ApiError> {
        let namespace = match req.namespace.as_str() {
            "" => None,
            ns => {
                convert::namespace("namespace", ns)?;
                Some(ns.to_owned())
            }
        };
        let page_size = page_size(req.page_size)?;
        // The token is bound to what it lists: the index, and the namespace asked for.
        let bound = ListFilter::new(
            Some(format!(
                "{INTENT_NAMESPACE}/{}",
                namespace.as_deref().unwrap_or("")
            )),
            Vec::new(),
            None,
        );
        let cursor = match req.page_token.as_str() {
            "" => None,
            token => Some(self.page_tokens.open(tenant, &bound, token)?),
        };
        let page = self
            .engine
            .duplicate_intents(
                tenant,
                namespace.as_deref(),
                cursor.as_deref(),
                page_size as usize,
            )
            .await?;
        Ok(v1::ListDuplicateIntentsResponse {
            intents: page
                .intents
                .into_iter()
                .map(|d| v1::DuplicateIntent {
                    namespace: d.namespace,
                    fingerprint: d.fingerprint.to_vec(),
                    claims: d.claims.into_iter().map(safety::intent_match).collect(),
                })
                .collect(),
            next_page_token: page
                .next
                .map(|cursor| self.page_tokens.issue(tenant, &bound, &cursor))
                .unwrap_or_default(),
        })
    }
}
