//! The health and admin endpoints of the real binary.

use oncekey_tests::*;

/// The services `server`'s reflection lists, asked in reflection version `$version` (`v1` or
/// `v1alpha`: the same messages in two packages).
macro_rules! list_services {
    ($server:expr, $version:ident) => {{
        use tonic_reflection::pb::$version::{
            server_reflection_client::ServerReflectionClient,
            server_reflection_request::MessageRequest, server_reflection_response::MessageResponse,
            ServerReflectionRequest,
        };
        let channel = tonic::transport::Endpoint::from_shared($server.grpc.clone())
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
            .expect(concat!(stringify!($version), " reflection is served"))
            .into_inner()
            .message()
            .await
            .unwrap()
            .expect("a reflection answer");
        let Some(MessageResponse::ListServicesResponse(list)) = reply.message_response else {
            panic!("{reply:?}")
        };
        list.service
            .into_iter()
            .map(|s| s.name)
            .collect::<Vec<String>>()
    }};
}

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
    // Reflection lists the Ledger (grpcurl relies on it), in v1 and in v1alpha, for the tools
    // that speak only that (grpcio-reflection, Postman, older grpcurl).
    let v1 = list_services!(server, v1);
    assert!(
        v1.contains(&"oncekey.v1.Ledger".to_owned())
            && v1.contains(&"grpc.health.v1.Health".to_owned()),
        "{v1:?}"
    );
    let v1alpha = list_services!(server, v1alpha);
    assert!(
        v1alpha.contains(&"oncekey.v1.Ledger".to_owned()),
        "{v1alpha:?}"
    );
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
