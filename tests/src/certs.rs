//! Certificates made for one run with the `openssl` command line: a CA, a server certificate for
//! localhost and 127.0.0.1, and a client certificate; and client certificates of a given CA that
//! expire within seconds, made with the openssl crate.

use std::path::Path;

fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
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

/// A CA (`ca.pem`), a server certificate for localhost/127.0.0.1 (`server.pem`, `server.key`)
/// and a client certificate (`client.pem`, `client.key`) in `dir`, made with the openssl command.
pub fn make_certificates(dir: &Path) {
    make_certificates_valid_for(dir, 2);
}

/// `make_certificates` with certificates valid for `days` days from now.
pub fn make_certificates_valid_for(dir: &Path, days: u32) {
    let days = days.to_string();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        &days,
        "-subj",
        "/CN=oncekey test CA",
    ];
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
                &days,
                "-extfile",
                &extfile,
                "-out",
                &pem,
            ],
        );
    }
}

/// A client certificate signed by the CA in `ca_dir` (`ca.pem`, `ca.key`), valid from an hour
/// ago until `not_after` (seconds since the Unix epoch): (certificate PEM, PKCS #8 key PEM). The
/// command line gives validity in whole days; certificates that expire within a test are made
/// here.
pub fn client_certificate_until(ca_dir: &Path, name: &str, not_after: i64) -> (Vec<u8>, Vec<u8>) {
    use openssl::asn1::{Asn1Integer, Asn1Time};
    use openssl::bn::BigNum;
    use openssl::ec::{EcGroup, EcKey};
    use openssl::hash::MessageDigest;
    use openssl::nid::Nid;
    use openssl::pkey::PKey;
    use openssl::x509::extension::ExtendedKeyUsage;
    use openssl::x509::{X509NameBuilder, X509};
    let read = |file: &str| std::fs::read(ca_dir.join(file)).expect("the CA's files");
    let ca = X509::from_pem(&read("ca.pem")).expect("ca.pem");
    let ca_key = PKey::private_key_from_pem(&read("ca.key")).expect("ca.key");
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
    let key = PKey::from_ec_key(EcKey::generate(&group).unwrap()).unwrap();
    let mut subject = X509NameBuilder::new().unwrap();
    subject.append_entry_by_text("CN", name).unwrap();
    let subject = subject.build();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut cert = X509::builder().unwrap();
    cert.set_version(2).unwrap();
    let serial = BigNum::from_u32(rand::random::<u32>() >> 1).unwrap();
    cert.set_serial_number(&Asn1Integer::from_bn(&serial).unwrap())
        .unwrap();
    cert.set_subject_name(&subject).unwrap();
    cert.set_issuer_name(ca.subject_name()).unwrap();
    cert.set_pubkey(&key).unwrap();
    cert.set_not_before(&Asn1Time::from_unix(now - 3600).unwrap())
        .unwrap();
    cert.set_not_after(&Asn1Time::from_unix(not_after).unwrap())
        .unwrap();
    cert.append_extension(ExtendedKeyUsage::new().client_auth().build().unwrap())
        .unwrap();
    cert.sign(&ca_key, MessageDigest::sha256()).unwrap();
    let pem = cert.build().to_pem().unwrap();
    (pem, key.private_key_to_pem_pkcs8().unwrap())
}
