//! Certificates made for one run with the `openssl` command line: a CA, a server certificate for
//! localhost and 127.0.0.1, and a client certificate.

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
