//! Client TLS to the CQL cluster: the driver's OpenSSL context built from the `--cql-tls-*`
//! settings (trusted CAs, an optional client certificate, the name the nodes' certificates must
//! carry).
//!
//! The driver checks each node's certificate against the IP address it connects to. Clusters
//! whose certificates carry DNS names only (the usual case behind a Kubernetes Service) give that
//! name with `--cql-tls-server-name`: OpenSSL then checks the name, and only the IP check, which
//! it makes after the name check, is waived. Chain verification is never waived.
//!
//! The files are read once, when the session opens; errors name the flag whose file is wrong.

use super::CqlTlsConfig;
use openssl::pkey::PKey;
use openssl::ssl::{SslConnector, SslMethod, SslVerifyMode, SslVersion};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::X509;
use scylla::client::session::OpenSsl010Config;
use std::path::Path;

fn file_error(flag: &str, path: &Path, e: impl std::fmt::Display) -> String {
    format!("{flag} {}: {e}", path.display())
}

/// The driver's TLS context for these settings; `None` when TLS is off.
pub(crate) fn context(args: &CqlTlsConfig) -> Result<Option<OpenSsl010Config>, String> {
    if !args.enabled() {
        return Ok(None);
    }
    let openssl_error = |e: openssl::error::ErrorStack| format!("--cql-tls: {e}");
    // `SslConnector` starts from safe defaults: peer verification on, the system's CAs loaded.
    let mut builder = SslConnector::builder(SslMethod::tls_client()).map_err(openssl_error)?;
    builder
        .set_min_proto_version(Some(SslVersion::TLS1_2))
        .map_err(openssl_error)?;
    if let Some(path) = &args.ca {
        let flag = "--cql-tls-ca";
        let pem = std::fs::read(path).map_err(|e| file_error(flag, path, e))?;
        let certs = X509::stack_from_pem(&pem).map_err(|e| file_error(flag, path, e))?;
        if certs.is_empty() {
            return Err(file_error(flag, path, "no certificate in it"));
        }
        // Only this bundle is trusted, not the system's CAs as well.
        let mut store = X509StoreBuilder::new().map_err(openssl_error)?;
        for cert in certs {
            store
                .add_cert(cert)
                .map_err(|e| file_error(flag, path, e))?;
        }
        builder.set_cert_store(store.build());
    }
    if let (Some(cert), Some(key)) = (&args.cert, &args.key) {
        builder
            .set_certificate_chain_file(cert)
            .map_err(|e| file_error("--cql-tls-cert", cert, e))?;
        let flag = "--cql-tls-key";
        let pem = std::fs::read(key).map_err(|e| file_error(flag, key, e))?;
        let private = PKey::private_key_from_pem(&pem).map_err(|e| file_error(flag, key, e))?;
        let mismatch = |e| {
            format!(
                "--cql-tls-key {} does not belong to --cql-tls-cert {}: {e}",
                key.display(),
                cert.display()
            )
        };
        builder.set_private_key(&private).map_err(mismatch)?;
        builder.check_private_key().map_err(mismatch)?;
    }
    if let Some(name) = &args.server_name {
        builder
            .verify_param_mut()
            .set_host(name)
            .map_err(|e| format!("--cql-tls-server-name {name:?}: {e}"))?;
    }
    // The driver adds the node's IP to every connection's checks; with a name to check instead,
    // that one failure (and only it) is accepted: OpenSSL checks the name first and fails the
    // handshake there when it does not match. Refusals are logged with OpenSSL's reason, which
    // the driver's error leaves out.
    let waive_ip = args.server_name.is_some();
    builder.set_verify_callback(SslVerifyMode::PEER, move |verified, ctx| {
        if verified {
            return true;
        }
        let error = ctx.error();
        let ip_mismatch = error.as_raw() == openssl_sys::X509_V_ERR_IP_ADDRESS_MISMATCH;
        if ip_mismatch && waive_ip {
            return true;
        }
        let hint = if ip_mismatch {
            "the certificate does not name the node's IP address: give the name it carries with --cql-tls-server-name"
        } else {
            ""
        };
        tracing::warn!(
            reason = error.error_string(),
            depth = ctx.error_depth(),
            hint,
            "CQL node certificate refused"
        );
        false
    });
    // No TLS session resumption: a resumed session skips the node's checks of the client
    // certificate, so a connection could go on authenticating with a certificate the files no
    // longer hold (expired, revoked, replaced). Connections are long-lived; the full handshake of
    // the few new ones costs little.
    Ok(Some(
        OpenSsl010Config::new(builder).set_use_tls_tickets(false),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn args(ca: Option<&Path>, cert: Option<&Path>, key: Option<&Path>) -> CqlTlsConfig {
        CqlTlsConfig {
            on: false,
            ca: ca.map(Path::to_owned),
            cert: cert.map(Path::to_owned),
            key: key.map(Path::to_owned),
            server_name: None,
        }
    }

    #[test]
    fn off_without_any_flag() {
        assert!(context(&CqlTlsConfig::default()).unwrap().is_none());
    }

    #[test]
    fn errors_name_the_flag_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = context(&args(Some(&missing), None, None)).err().unwrap();
        assert!(
            err.starts_with("--cql-tls-ca ") && err.contains("missing.pem"),
            "{err}"
        );

        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").unwrap();
        let err = context(&args(Some(&junk), None, None)).err().unwrap();
        assert!(err.starts_with("--cql-tls-ca "), "{err}");

        oncekey_tests::make_certificates(dir.path());
        let pem = |name: &str| -> PathBuf { dir.path().join(name) };
        let err = context(&args(None, Some(&junk), Some(&pem("client.key"))))
            .err()
            .unwrap();
        assert!(err.starts_with("--cql-tls-cert "), "{err}");
        let err = context(&args(None, Some(&pem("client.pem")), Some(&junk)))
            .err()
            .unwrap();
        assert!(err.starts_with("--cql-tls-key "), "{err}");
        // A key of another certificate.
        let err = context(&args(
            None,
            Some(&pem("client.pem")),
            Some(&pem("server.key")),
        ))
        .err()
        .unwrap();
        assert!(err.contains("does not belong to --cql-tls-cert"), "{err}");

        let ok = context(&args(
            Some(&pem("ca.pem")),
            Some(&pem("client.pem")),
            Some(&pem("client.key")),
        ));
        assert!(ok.is_ok_and(|c| c.is_some()));
    }
}
