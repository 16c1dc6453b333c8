//! The health and admin endpoints of the real binary.

use oncekey_tests::*;

#[tokio::test]
async fn health_and_admin_endpoints() {
    let server = Server::start(&[]);
    let channel = tonic::transport::Endpoint::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for service in ["", "oncekey.v1.Ledger"] {
        let reply = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            reply.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32
        );
    }
    // Reflection lists the Ledger (grpcurl relies on it).
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient,
        server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
        ServerReflectionRequest,
    };
    let channel = tonic::transport::Endpoint::from_shared(server.grpc.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut replies = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .unwrap()
        .into_inner();
    let reply = replies
        .message()
        .await
        .unwrap()
        .expect("a reflection answer");
    let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
        panic!("{reply:?}")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"oncekey.v1.Ledger") && names.contains(&"grpc.health.v1.Health"),
        "{names:?}"
    );
    // And v1alpha, for the tools that speak only that (grpcio-reflection, Postman, older grpcurl).
    {
        use tonic_reflection::pb::v1alpha::{
            server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
            ServerReflectionRequest,
        };
        let channel = tonic::transport::Endpoint::from_shared(server.grpc.clone())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let request = ServerReflectionRequest {
            host: String::new(),
            message_request: Some(MessageRequest::ListServices(String::new())),
        };
        let reply = ServerReflectionClient::new(channel)
            .server_reflection_info(tokio_stream::iter(vec![request]))
            .await
            .expect("v1alpha reflection is served")
            .into_inner()
            .message()
            .await
            .unwrap()
            .expect("a v1alpha reflection answer");
        let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
            panic!("{reply:?}")
        };
        assert!(
            list.service.iter().any(|s| s.name == "oncekey.v1.Ledger"),
            "{list:?}"
        );
    }
    for (path, body) in [
        ("/healthz", "ok"),
        ("/readyz", "ready"),
        ("/metrics", "oncekey_build_info"),
    ] {
        let (code, text) = http_get(&server.admin, path).await;
        assert_eq!(code, 200, "{path}");
        assert!(text.contains(body), "{path}: {text}");
    }
}
