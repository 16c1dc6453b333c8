//! The part of etcd's v3 gRPC API the etcd peer uses — KV.Txn and Lease.LeaseGrant — as prost
//! messages with etcd's field numbers (`api/etcdserverpb/rpc.proto` and `api/mvccpb/kv.proto`
//! of etcd 3.4, which later releases keep), and the two unary calls over a tonic channel.
//! Written out rather than generated: etcd's protos import gogoproto and Google API annotations,
//! and the `etcd-client` crate compiles them with `protoc` at build time, which a machine with only
//! Rust lacks. Fields the peer never reads are left out (protobuf skips unknown fields).

#![allow(missing_docs)]

use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ResponseHeader {
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    #[prost(uint64, tag = "2")]
    pub member_id: u64,
    /// The store's revision when the request was applied.
    #[prost(int64, tag = "3")]
    pub revision: i64,
    #[prost(uint64, tag = "4")]
    pub raft_term: u64,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct KeyValue {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
    #[prost(int64, tag = "2")]
    pub create_revision: i64,
    #[prost(int64, tag = "3")]
    pub mod_revision: i64,
    #[prost(int64, tag = "4")]
    pub version: i64,
    #[prost(bytes = "bytes", tag = "5")]
    pub value: bytes::Bytes,
    #[prost(int64, tag = "6")]
    pub lease: i64,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RangeRequest {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RangeResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(message, repeated, tag = "2")]
    pub kvs: Vec<KeyValue>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PutRequest {
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub value: bytes::Bytes,
    #[prost(int64, tag = "3")]
    pub lease: i64,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct PutResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct RequestOp {
    #[prost(oneof = "request_op::Request", tags = "1, 2")]
    pub request: Option<request_op::Request>,
}

pub mod request_op {
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Request {
        #[prost(message, tag = "1")]
        RequestRange(super::RangeRequest),
        #[prost(message, tag = "2")]
        RequestPut(super::PutRequest),
    }
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ResponseOp {
    #[prost(oneof = "response_op::Response", tags = "1, 2")]
    pub response: Option<response_op::Response>,
}

pub mod response_op {
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Response {
        #[prost(message, tag = "1")]
        ResponseRange(super::RangeResponse),
        #[prost(message, tag = "2")]
        ResponsePut(super::PutResponse),
    }
}

/// `Compare.CompareResult`.
pub const EQUAL: i32 = 0;
/// `Compare.CompareTarget`: the key's create revision (0 when absent).
pub const CREATE: i32 = 1;
/// `Compare.CompareTarget`: the key's last modification's revision.
pub const MOD: i32 = 2;

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Compare {
    #[prost(int32, tag = "1")]
    pub result: i32,
    #[prost(int32, tag = "2")]
    pub target: i32,
    #[prost(bytes = "bytes", tag = "3")]
    pub key: bytes::Bytes,
    #[prost(oneof = "compare::TargetUnion", tags = "5, 6")]
    pub target_union: Option<compare::TargetUnion>,
}

pub mod compare {
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum TargetUnion {
        #[prost(int64, tag = "5")]
        CreateRevision(i64),
        #[prost(int64, tag = "6")]
        ModRevision(i64),
    }
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TxnRequest {
    #[prost(message, repeated, tag = "1")]
    pub compare: Vec<Compare>,
    #[prost(message, repeated, tag = "2")]
    pub success: Vec<RequestOp>,
    #[prost(message, repeated, tag = "3")]
    pub failure: Vec<RequestOp>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TxnResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(bool, tag = "2")]
    pub succeeded: bool,
    #[prost(message, repeated, tag = "3")]
    pub responses: Vec<ResponseOp>,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct LeaseGrantRequest {
    #[prost(int64, tag = "1")]
    pub ttl: i64,
    #[prost(int64, tag = "2")]
    pub id: i64,
}

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct LeaseGrantResponse {
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    #[prost(int64, tag = "2")]
    pub id: i64,
    #[prost(int64, tag = "3")]
    pub ttl: i64,
    #[prost(string, tag = "4")]
    pub error: String,
}

/// A client of etcd's KV and Lease services on one channel (clones share its connection).
#[derive(Clone)]
pub struct Client {
    grpc: tonic::client::Grpc<Channel>,
}

impl Client {
    pub fn new(channel: Channel) -> Self {
        Self {
            grpc: tonic::client::Grpc::new(channel),
        }
    }

    async fn unary<Req, Resp>(
        &mut self,
        path: &'static str,
        request: Req,
    ) -> Result<Resp, tonic::Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.grpc
            .ready()
            .await
            .map_err(|e| tonic::Status::unavailable(format!("etcd is not ready: {e}")))?;
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        let response = self
            .grpc
            .unary(
                tonic::Request::new(request),
                PathAndQuery::from_static(path),
                codec,
            )
            .await?;
        Ok(response.into_inner())
    }

    /// `etcdserverpb.KV/Txn`.
    pub async fn txn(&mut self, request: TxnRequest) -> Result<TxnResponse, tonic::Status> {
        self.unary("/etcdserverpb.KV/Txn", request).await
    }

    /// `etcdserverpb.Lease/LeaseGrant`.
    pub async fn lease_grant(
        &mut self,
        request: LeaseGrantRequest,
    ) -> Result<LeaseGrantResponse, tonic::Status> {
        self.unary("/etcdserverpb.Lease/LeaseGrant", request).await
    }
}
