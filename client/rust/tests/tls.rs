//! TLS with client certificates (mTLS): the client verifies the server against the given CA and
//! presents its own identity; without one, a server that requires client certificates refuses it.
//! Certificates are made by the `openssl` command line for each run (`oncekey_tests::make_certificates`).

use oncekey_client::{Client, ConnectOptions, TlsOptions};
use oncekey_tests::client::*;
use oncekey_tests::{make_certificates, Server};

#[tokio::test]
async fn mutual_tls_connects_and_runs_an_operation() {
    let certs = tempfile::tempdir().unwrap();
    let dir = certs.path();
    make_certificates(dir);
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let server = Server::start(&[
        "--tls-cert",
        &path("server.pem"),
        "--tls-key",
        &path("server.key"),
        "--tls-client-ca",
        &path("ca.pem"),
    ]);
    let url = server.grpc.replace("http://", "https://");

    let tls = TlsOptions::from_files(
        dir.join("ca.pem"),
        Some((&dir.join("client.pem"), &dir.join("client.key"))),
    )
    .unwrap();
    let client = client_with(
        &url,
        ConnectOptions {
            tls: Some(TlsOptions {
                domain: Some("localhost".into()),
                ..tls.clone()
            }),
            ..Default::default()
        },
    )
    .await;
    let out: Output = client
        .once(&key("over-tls"), &args("x"))
        .run(|lease| async move {
            Ok::<_, TestError>(Output {
                id: "secure".into(),
                token: lease.fencing_token(),
            })
        })
        .await
        .unwrap();
    assert_eq!(out.id, "secure");

    // Without a client certificate the server refuses the connection.
    let anonymous = Client::connect(
        &url,
        ConnectOptions {
            tenant: Some("acme".into()),
            tls: Some(TlsOptions {
                ca_cert_pem: tls.ca_cert_pem.clone(),
                domain: Some("localhost".into()),
                ..Default::default()
            }),
            retry: oncekey_client::RetryPolicy::never(),
            ..Default::default()
        },
    )
    .await;
    let refused = match anonymous {
        Err(_) => true,
        Ok(c) => c.lookup(&key("over-tls")).await.is_err(),
    };
    assert!(
        refused,
        "a server requiring client certificates refused an anonymous client"
    );
}
