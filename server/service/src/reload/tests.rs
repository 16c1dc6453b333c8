//! The reloader against real files laid out the way kubelet mounts a Secret: each update is a
//! new timestamped directory, then an atomic rename of the `..data` symlink the file names
//! resolve through.

use super::*;
use crate::settings::ServeConfig;
use oncekey_tests::SecretMount;
use prometheus_client::registry::Registry;
use tonic::metadata::{MetadataMap, MetadataValue};

/// `oncekey serve`'s default settings, changed by `change`.
fn serve_config(change: impl FnOnce(&mut ServeConfig)) -> ServeConfig {
    let mut config = ServeConfig::for_tests();
    change(&mut config);
    config
}

fn tokens_line(tenant: &str, token: &str) -> String {
    format!(
        "{tenant}:{}\n",
        hex::encode(crate::api::auth::token_hash(token))
    )
}

fn accepts(auth: &Auth, token: &str) -> bool {
    let mut metadata = MetadataMap::new();
    let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    metadata.insert("authorization", value);
    auth.authenticate(&metadata).is_ok()
}

/// Two polls: a change is taken once two looks in a row read it the same.
fn look_twice(reloader: &mut Reloader) {
    reloader.reload_changed();
    reloader.reload_changed();
}

#[test]
fn a_file_caught_mid_rewrite_is_not_loaded() {
    let (mut mounted, auth, mut reloader, metrics) = tokens_setup(&tokens_line("acme", "first"));
    // Truncated and not yet written: an empty tokens file is valid and would let nobody in.
    mounted.update(&[("tokens", b"")]);
    reloader.reload_changed();
    mounted.update(&[("tokens", tokens_line("acme", "second").as_bytes())]);
    reloader.reload_changed();
    assert_eq!(
        metrics.reloads("tokens"),
        0,
        "no look read the same twice yet"
    );
    assert!(accepts(&auth, "first"));
    reloader.reload_changed();
    assert_eq!(metrics.reloads("tokens"), 1);
    assert!(accepts(&auth, "second") && !accepts(&auth, "first"));
}

fn tokens_setup(first: &str) -> (SecretMount, Arc<Auth>, Reloader, ReloadMetrics) {
    let mounted = SecretMount::new(&[("tokens", first.as_bytes())]);
    let path = mounted.path("tokens");
    let auth = Arc::new(Auth::from_file(&path).unwrap());
    let metrics = ReloadMetrics::default();
    let args = serve_config(|c| c.tokens_file = Some(path.clone()));
    let reloader = Reloader::new(&args, auth.clone(), None, metrics.clone());
    (mounted, auth, reloader, metrics)
}

#[test]
fn a_swapped_tokens_secret_is_loaded_without_sighup() {
    let (mut mounted, auth, mut reloader, metrics) = tokens_setup(&tokens_line("acme", "first"));
    look_twice(&mut reloader);
    assert_eq!(metrics.reloads("tokens"), 0, "nothing changed yet");

    mounted.update(&[("tokens", tokens_line("acme", "second").as_bytes())]);
    assert!(accepts(&auth, "first") && !accepts(&auth, "second"));
    look_twice(&mut reloader);
    assert_eq!(metrics.reloads("tokens"), 1);
    assert!(accepts(&auth, "second") && !accepts(&auth, "first"));

    // The same contents again (kubelet re-projects on every sync) is no change.
    mounted.update(&[("tokens", tokens_line("acme", "second").as_bytes())]);
    look_twice(&mut reloader);
    assert_eq!(metrics.reloads("tokens"), 1);
}

#[test]
fn a_broken_tokens_file_keeps_the_old_tokens_and_counts_one_failure() {
    let (mut mounted, auth, mut reloader, metrics) = tokens_setup(&tokens_line("acme", "first"));
    mounted.update(&[("tokens", b"acme:not-a-hash\n")]);
    look_twice(&mut reloader);
    look_twice(&mut reloader);
    assert_eq!(
        metrics.failures("tokens"),
        1,
        "one failure per change, not per look"
    );
    assert_eq!(metrics.reloads("tokens"), 0);
    assert!(accepts(&auth, "first"), "the previous tokens stay");

    mounted.update(&[("tokens", tokens_line("acme", "fixed").as_bytes())]);
    look_twice(&mut reloader);
    assert_eq!(metrics.reloads("tokens"), 1);
    assert!(accepts(&auth, "fixed"));
}

#[test]
fn sighup_reloads_even_unchanged_files_and_counts_failures() {
    let (mut mounted, auth, mut reloader, metrics) = tokens_setup(&tokens_line("acme", "first"));
    reloader.reload_all();
    assert_eq!(metrics.reloads("tokens"), 1);
    mounted.update(&[("tokens", b"garbage\n")]);
    reloader.reload_all();
    assert_eq!(metrics.failures("tokens"), 1);
    // SIGHUP already tried this content: the next look does not count it again.
    look_twice(&mut reloader);
    assert_eq!(metrics.failures("tokens"), 1);
    assert!(accepts(&auth, "first"));
}

fn certificate_files(days: u32) -> Vec<(String, Vec<u8>)> {
    let dir = tempfile::tempdir().unwrap();
    oncekey_tests::make_certificates_valid_for(dir.path(), days);
    ["server.pem", "server.key"]
        .iter()
        .map(|name| {
            (
                name.to_string(),
                std::fs::read(dir.path().join(name)).unwrap(),
            )
        })
        .collect()
}

fn as_files(files: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_slice()))
        .collect()
}

#[test]
fn a_renewed_certificate_is_loaded_and_its_expiry_exported() {
    let first = certificate_files(3);
    let mut mounted = SecretMount::new(&as_files(&first));
    let (cert, key) = (mounted.path("server.pem"), mounted.path("server.key"));
    let args = serve_config(|c| {
        c.tls_cert = Some(cert.clone());
        c.tls_key = Some(key.clone());
    });
    let tls = Arc::new(Tls::from_config(&args).unwrap().unwrap());
    let metrics = ReloadMetrics::default();
    let mut reloader = Reloader::new(&args, Arc::new(Auth::dev()), Some(tls), metrics.clone());
    let first_expiry = certificate_expiry(&first[0].1).unwrap();
    assert_eq!(metrics.certificate_expiry(), Some(first_expiry));

    let renewed = certificate_files(30);
    mounted.update(&as_files(&renewed));
    look_twice(&mut reloader);
    assert_eq!(metrics.reloads("tls"), 1);
    let renewed_expiry = certificate_expiry(&renewed[0].1).unwrap();
    assert!(renewed_expiry > first_expiry + 20 * 86_400);
    assert_eq!(metrics.certificate_expiry(), Some(renewed_expiry));

    // A key that does not belong to the certificate: refused, the renewed one stays exported.
    let other = certificate_files(60);
    mounted.update(&[
        ("server.pem", other[0].1.as_slice()),
        ("server.key", renewed[1].1.as_slice()),
    ]);
    look_twice(&mut reloader);
    assert_eq!(metrics.failures("tls"), 1);
    assert_eq!(metrics.certificate_expiry(), Some(renewed_expiry));
}

#[test]
fn no_expiry_without_tls() {
    let metrics = ReloadMetrics::default();
    let _reloader = Reloader::new(
        &serve_config(|_| {}),
        Arc::new(Auth::dev()),
        None,
        metrics.clone(),
    );
    assert_eq!(metrics.certificate_expiry(), None);
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("tls_certificate_expiry_seconds ")),
        "{text}"
    );
}

#[test]
fn expiry_is_the_certificates_not_after() {
    let files = certificate_files(10);
    let expiry = certificate_expiry(&files[0].1).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    // openssl dates the certificate from the moment it made it, to the second.
    let ten_days = 10 * 86_400;
    assert!(
        (expiry - (now + ten_days)).abs() < 3_600,
        "expiry {expiry}, now {now}"
    );
    assert!(certificate_expiry(b"not a certificate").is_err());
}

#[test]
fn a_change_while_the_server_was_starting_is_not_missed() {
    // The server loaded the tokens at start; the file changed before the reloader took its first
    // look (opening the store can take a while).
    let mut mounted = SecretMount::new(&[("tokens", tokens_line("acme", "first").as_bytes())]);
    let path = mounted.path("tokens");
    let auth = Arc::new(Auth::from_file(&path).unwrap());
    mounted.update(&[("tokens", tokens_line("acme", "second").as_bytes())]);
    let metrics = ReloadMetrics::default();
    let args = serve_config(|c| c.tokens_file = Some(path.clone()));
    let _reloader = Reloader::new(&args, auth.clone(), None, metrics.clone());
    assert!(accepts(&auth, "second") && !accepts(&auth, "first"));
    assert_eq!(
        (metrics.reloads("tokens"), metrics.failures("tokens")),
        (0, 0)
    );
}

const K1: &str = "k1 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";
const K2: &str = "k2 QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl8=";
const NAMES: &str = "names ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8= hmac";
const OTHER_NAMES: &str = "names YGFiY2RlZmdoaWprbG1ub3BxcnN0dXZ3eHl6e3x9fn8= hmac";

fn key_ring_setup(first: &str) -> (SecretMount, Sealer, Reloader, ReloadMetrics) {
    let mounted = SecretMount::new(&[("keyring", first.as_bytes())]);
    let path = mounted.path("keyring");
    let sealer = Sealer::new(oncekey_sealing::KeyRing::load(&path).unwrap());
    let metrics = ReloadMetrics::default();
    let args = serve_config(|c| c.protection.encryption_keys = Some(path.clone()));
    let reloader = Reloader::new(&args, Arc::new(Auth::dev()), None, metrics.clone())
        .with_key_ring(path, sealer.clone());
    (mounted, sealer, reloader, metrics)
}

#[test]
fn a_rotated_key_ring_is_loaded_and_a_bad_one_kept_out() {
    let (mut mounted, sealer, mut reloader, metrics) =
        key_ring_setup(&format!("{K1} primary\n{NAMES}\n"));
    look_twice(&mut reloader);
    assert_eq!(metrics.reloads("encryption-keys"), 0, "nothing changed yet");

    // Rotation: a new primary, the old key kept to open what it sealed.
    mounted.update(&[(
        "keyring",
        format!("{K2} primary\n{K1}\n{NAMES}\n").as_bytes(),
    )]);
    look_twice(&mut reloader);
    assert_eq!(metrics.reloads("encryption-keys"), 1);
    assert_eq!(sealer.ring().primary_id(), Some("k2"));
    assert_eq!(sealer.ring().ids(), ["k2", "k1", "names"]);

    // A file that does not load keeps the ring, once per change.
    mounted.update(&[("keyring", b"k3 not-a-secret primary\n")]);
    look_twice(&mut reloader);
    look_twice(&mut reloader);
    assert_eq!(metrics.failures("encryption-keys"), 1);
    assert_eq!(sealer.ring().primary_id(), Some("k2"));

    // Another hmac key (or none) would make every hashed key unreachable: refused, counted.
    for refused in [
        format!("{K2} primary\n{K1}\n{OTHER_NAMES}\n"),
        format!("{K2} primary\n{K1}\n"),
    ] {
        mounted.update(&[("keyring", refused.as_bytes())]);
        look_twice(&mut reloader);
    }
    assert_eq!(metrics.failures("encryption-keys"), 3);
    assert_eq!(sealer.ring().hmac_id(), Some("names"));
    assert_eq!(sealer.ring().ids(), ["k2", "k1", "names"]);

    // SIGHUP reloads even an unchanged file; turning sealing off (no primary) is a change
    // like any other.
    mounted.update(&[("keyring", format!("{K2}\n{K1}\n{NAMES}\n").as_bytes())]);
    reloader.reload_all();
    assert_eq!(metrics.reloads("encryption-keys"), 2);
    assert_eq!(sealer.ring().primary_id(), None);
    look_twice(&mut reloader);
    assert_eq!(
        metrics.reloads("encryption-keys"),
        2,
        "SIGHUP already read it"
    );
}

#[test]
fn a_key_ring_change_while_the_server_was_starting_is_not_missed() {
    let mut mounted = SecretMount::new(&[("keyring", format!("{K1} primary\n").as_bytes())]);
    let path = mounted.path("keyring");
    let sealer = Sealer::new(oncekey_sealing::KeyRing::load(&path).unwrap());
    mounted.update(&[("keyring", format!("{K2} primary\n{K1}\n").as_bytes())]);
    let metrics = ReloadMetrics::default();
    let args = serve_config(|c| c.protection.encryption_keys = Some(path.clone()));
    let _reloader = Reloader::new(&args, Arc::new(Auth::dev()), None, metrics.clone())
        .with_key_ring(path, sealer.clone());
    assert_eq!(sealer.ring().primary_id(), Some("k2"));
    assert_eq!(metrics.failures("encryption-keys"), 0);
}
