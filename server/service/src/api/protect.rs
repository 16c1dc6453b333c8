//! Rekey and EraseTenant (docs/api.md, "Rekey" and "Tenant erasure"): one page of the caller's
//! tenant per call, every namespace and state included, through the engine (`rekey_page`,
//! `erase_page`). Page tokens are signed like ListRecords' and bound to the tenant and the RPC,
//! so a token of one never opens the other, nor a listing. Which callers may call them (`admin`)
//! is decided before they run (`scopes`).
//!
//! Without a tokens file (dev mode), where every caller may name any tenant anyway, a Rekey
//! covers every tenant's records (`rekey_all_page`), its page tokens bound to the pseudo-tenant
//! `EVERY_TENANT`, which no tenant's token can be: a page token of one never opens the other.
//!
//! EraseTenant guards against the wrong token with `confirm_tenant`, which must name the
//! caller's own tenant. It answers a receipt on the call that finds nothing of the tenant left
//! (the call that erases the last page does not: one more call, which the CLI makes, confirms),
//! logs it and counts it (`oncekey_tenant_erasures_total`; the records in
//! `oncekey_records_erased_total`, by the engine).

use super::auth::Principal;
use super::error::ApiError;
use super::listing::page_size;
use super::page_token::PageTokens;
use super::{convert, traced, Approver, Caller, Keyed, LedgerService, TenantOf};
use crate::ledger::ListFilter;
use crate::store::Store;
use oncekey_api::v1;
use tonic::{Request, Response, Status};

/// What a Rekey page token is bound to, beside the tenant: no listing's filter can name it
/// (namespaces never start with `~`).
const REKEY: &str = "~rekey";
/// What an EraseTenant page token is bound to.
const ERASE: &str = "~erase-tenant";
/// The tenant a dev-mode Rekey's page tokens are bound to: no tenant is named so (tenants start
/// with a letter or digit).
const EVERY_TENANT: &str = "~all";

/// The filter a page token of `rpc` is signed with.
fn bound(rpc: &str) -> ListFilter {
    ListFilter::new(Some(rpc.to_owned()), Vec::new(), None)
}

/// The cursor of `token` (empty: the first page), if it is one of `rpc` for `tenant`.
fn cursor(
    tokens: &PageTokens,
    tenant: &str,
    rpc: &str,
    token: &str,
) -> Result<Option<Vec<u8>>, ApiError> {
    match token {
        "" => Ok(None),
        token => tokens.open(tenant, &bound(rpc), token).map(Some),
    }
}

/// The token that resumes `rpc` for `tenant` at `next` (empty at the end).
fn token(tokens: &PageTokens, tenant: &str, rpc: &str, next: Option<Vec<u8>>) -> String {
    next.map(|cursor| tokens.issue(tenant, &bound(rpc), &cursor))
        .unwrap_or_default()
}

/// `confirm_tenant` of an EraseTenant: the caller's own tenant. The message names neither.
fn confirmed(tenant: &str, confirm_tenant: &str) -> Result<(), ApiError> {
    match confirm_tenant == tenant {
        true => Ok(()),
        false => Err(ApiError::invalid(
            "confirm_tenant",
            "must name the tenant of the caller's token, the tenant to erase",
        )),
    }
}

// The two requests name no record: their spans and failure logs carry the tenant only.
impl Keyed for v1::RekeyRequest {
    fn namespace(&self) -> &str {
        ""
    }
    fn key(&self) -> &str {
        ""
    }
}

impl Keyed for v1::EraseTenantRequest {
    fn namespace(&self) -> &str {
        ""
    }
    fn key(&self) -> &str {
        ""
    }
}

impl<S: Store> LedgerService<S> {
    /// The Rekey RPC, traced like every other.
    pub(super) async fn rekey_traced(
        &self,
        req: Request<v1::RekeyRequest>,
    ) -> Result<Response<v1::RekeyResponse>, Status> {
        traced("oncekey.v1.Ledger/Rekey", req, async |c: &TenantOf, m| {
            self.rekey_rpc(c.tenant(), m).await
        })
        .await
    }

    /// The EraseTenant RPC, traced like every other; the caller's label is the receipt's
    /// `erased_by`.
    pub(super) async fn erase_tenant_traced(
        &self,
        req: Request<v1::EraseTenantRequest>,
    ) -> Result<Response<v1::EraseTenantResponse>, Status> {
        let name = "oncekey.v1.Ledger/EraseTenant";
        traced(name, req, async |c: &Approver, m| {
            self.erase_tenant_rpc(&c.tenant, &c.principal, m).await
        })
        .await
    }

    /// One page of the caller's records re-sealed with the key ring's primary key; in dev mode
    /// one page of every tenant's.
    pub(super) async fn rekey_rpc(
        &self,
        tenant: &str,
        req: &mut v1::RekeyRequest,
    ) -> Result<v1::RekeyResponse, ApiError> {
        let page_size = page_size(req.page_size)? as usize;
        let every_tenant = self.rekey_every_tenant;
        let bound_to = if every_tenant { EVERY_TENANT } else { tenant };
        let after = cursor(&self.page_tokens, bound_to, REKEY, &req.page_token)?;
        let after = after.as_deref();
        let page = match every_tenant {
            true => self.engine.rekey_all_page(after, page_size).await?,
            false => self.engine.rekey_page(tenant, after, page_size).await?,
        };
        Ok(v1::RekeyResponse {
            examined: page.examined,
            resealed: page.resealed,
            current: page.current,
            unreadable: page.unreadable,
            unreadable_key_ids: page.unreadable_key_ids,
            // Empty: the ring has no primary, nothing was sealed.
            primary_key_id: self
                .sealer()
                .ring()
                .primary_id()
                .unwrap_or_default()
                .to_owned(),
            next_page_token: token(&self.page_tokens, bound_to, REKEY, page.next),
        })
    }

    /// One page of the caller's records erased; the receipt once nothing is left.
    pub(super) async fn erase_tenant_rpc(
        &self,
        tenant: &str,
        principal: &Principal,
        req: &mut v1::EraseTenantRequest,
    ) -> Result<v1::EraseTenantResponse, ApiError> {
        confirmed(tenant, &req.confirm_tenant)?;
        let page_size = page_size(req.page_size)?;
        let after = cursor(&self.page_tokens, tenant, ERASE, &req.page_token)?;
        let page = self
            .engine
            .erase_page(tenant, after.as_deref(), page_size as usize)
            .await?;
        let receipt = page.completed_at.map(|at| {
            tracing::info!(tenant = %tenant, erased_by = %principal.label, "tenant erased");
            v1::ErasureReceipt {
                tenant: tenant.to_owned(),
                completed_at: Some(convert::timestamp(at)),
                erased_by: principal.label.clone(),
            }
        });
        Ok(v1::EraseTenantResponse {
            erased: page.erased,
            next_page_token: token(&self.page_tokens, tenant, ERASE, page.next),
            receipt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(e: ApiError) -> String {
        match e {
            ApiError::InvalidField { field, .. } => field,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn confirm_tenant_must_be_the_callers_and_is_not_echoed() {
        assert!(confirmed("acme", "acme").is_ok());
        for other in ["", "globex", "ACME", "acme "] {
            let refused = confirmed("acme", other).unwrap_err();
            let message = refused.to_string();
            assert!(!message.contains("acme") && !message.contains("globex"));
            assert_eq!(field(refused), "confirm_tenant");
        }
    }

    #[test]
    fn a_page_token_opens_for_its_rpc_and_tenant_only() {
        let tokens = PageTokens::new([3; 32]);
        let rekey = token(&tokens, "acme", REKEY, Some(b"cursor".to_vec()));
        assert_eq!(token(&tokens, "acme", REKEY, None), "");
        let opened = cursor(&tokens, "acme", REKEY, &rekey).unwrap();
        assert_eq!(opened.as_deref(), Some(&b"cursor"[..]));
        assert_eq!(cursor(&tokens, "acme", ERASE, "").unwrap(), None);
        for (tenant, rpc) in [("globex", REKEY), ("acme", ERASE)] {
            let refused = cursor(&tokens, tenant, rpc, &rekey).unwrap_err();
            assert_eq!(field(refused), "page_token");
        }
        // A dev-mode Rekey's token opens for every tenant's Rekey only.
        let every = token(&tokens, EVERY_TENANT, REKEY, Some(b"cursor".to_vec()));
        assert!(cursor(&tokens, EVERY_TENANT, REKEY, &every).is_ok());
        assert!(cursor(&tokens, "acme", REKEY, &every).is_err());
        assert!(cursor(&tokens, EVERY_TENANT, REKEY, &rekey).is_err());
        // Nor does a listing's token (every namespace, no filter) open here.
        let listing = tokens.issue("acme", &ListFilter::default(), b"cursor");
        let refused = cursor(&tokens, "acme", REKEY, &listing).unwrap_err();
        assert_eq!(field(refused), "page_token");
    }
}
