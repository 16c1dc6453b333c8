//! The generated Ledger client with the caller's credentials (bearer token, tenant) attached to
//! every call: the bare RPC surface the tower stack wraps and `connect` builds.

use oncekey_api::v1::ledger_client::LedgerClient;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// Adds the credentials to every call.
#[derive(Clone)]
pub struct Credentials {
    pub(crate) authorization: Option<AsciiMetadataValue>,
    pub(crate) tenant: Option<AsciiMetadataValue>,
}

impl tonic::service::Interceptor for Credentials {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.authorization {
            req.metadata_mut().insert("authorization", value.clone());
        }
        if let Some(value) = &self.tenant {
            req.metadata_mut()
                .insert(oncekey_api::TENANT_HEADER, value.clone());
        }
        Ok(req)
    }
}

/// The generated Ledger client with credentials attached: no timeout, no retries.
pub type LedgerRpc = LedgerClient<InterceptedService<Channel, Credentials>>;
