//! TLS with client certificates (mTLS): the client verifies the server against the given CA and
//! presents its own identity; without one, a server that requires client certificates refuses it.
//! Certificates are made by the `openssl` command line for each run.

mod common;

use common::*;
use oncekey_client::{Client, ConnectOptions, TlsOptions};
use oncekey_tests::Server;
use std::path::Path;
use std::process::Command;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl is installed");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate for localhost/127.0.0.1 and a client certificate, in `dir`.
fn make_certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=oncekey test CA"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(dir, &ca);
    for (name, ext) in [
        (
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, pem, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        let mut req = vec!["req", "-subj"];
        let subject = format!("/CN={name}");
        req.push(&subject);
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &extfile,
                "-out",
                &pem,
            ],
        );
    }
}

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
