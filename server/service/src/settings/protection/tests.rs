//! The data protection settings: every mistake names its flag.

use super::*;

const DAY: Millis = 86_400_000;

fn config(change: impl FnOnce(&mut ProtectionConfig)) -> ProtectionConfig {
    let mut config = ProtectionConfig::default();
    change(&mut config);
    config
}

fn ring_file(text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

const HMAC_LINE: &str = "names ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8= hmac\n";
const PRIMARY_LINE: &str = "k1 AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA= primary\n";

#[test]
fn no_flag_is_an_empty_ring_without_rules() {
    let config = ProtectionConfig::default();
    assert!(config.validate(30 * DAY).is_ok());
    let privacy = config.key_privacy().unwrap();
    assert_eq!(privacy.sealer().ring().primary_id(), None);
    assert!(config.retention_ceilings(30 * DAY).unwrap().is_empty());
}

#[test]
fn bad_rules_name_their_flag() {
    let bad = config(|c| c.key_privacy = vec!["payments=on".into()]);
    let err = bad.validate(30 * DAY).unwrap_err();
    assert!(err.0.starts_with("--key-privacy: "), "{err}");
    let bad = config(|c| c.retention_ceiling = vec!["payments.*=40d".into()]);
    let err = bad.validate(30 * DAY).unwrap_err();
    assert!(err.0.starts_with("--retention-ceiling: "), "{err}");
    assert!(err.0.contains("--max-retention"), "{err}");
    // Within a longer --max-retention, the same ceiling is fine.
    assert!(bad.validate(60 * DAY).is_ok());
}

#[test]
fn a_key_ring_that_does_not_load_names_the_flag_and_the_line_never_a_secret() {
    let file = ring_file(&format!("{PRIMARY_LINE}broken not-base64-secret\n"));
    let bad = config(|c| c.encryption_keys = Some(file.path().to_owned()));
    let err = bad.key_privacy().err().unwrap();
    assert!(err.0.starts_with("--encryption-keys: "), "{err}");
    assert!(err.0.contains("line 2"), "{err}");
    assert!(!err.0.contains("AQIDBAUG"), "{err}");
    let missing = config(|c| c.encryption_keys = Some("/nonexistent/keyring".into()));
    let err = missing.key_privacy().err().unwrap();
    assert!(err.0.starts_with("--encryption-keys: "), "{err}");
}

#[test]
fn key_privacy_needs_a_ring_with_an_hmac_key() {
    let without_ring = config(|c| c.key_privacy = vec!["hmac".into()]);
    let err = without_ring.key_privacy().err().unwrap();
    assert!(err.0.starts_with("--key-privacy: "), "{err}");
    assert!(err.0.contains("--encryption-keys"), "{err}");

    let primary_only = ring_file(PRIMARY_LINE);
    let no_hmac = config(|c| {
        c.key_privacy = vec!["payments.*=hmac".into()];
        c.encryption_keys = Some(primary_only.path().to_owned());
    });
    let err = no_hmac.key_privacy().err().unwrap();
    assert!(
        err.0.starts_with("--key-privacy: ") && err.0.contains("hmac"),
        "{err}"
    );

    // Rules that hash nothing need no hmac key.
    let off = config(|c| c.key_privacy = vec!["*=off".into()]);
    assert!(off.key_privacy().is_ok());

    let both = ring_file(&format!("{PRIMARY_LINE}{HMAC_LINE}"));
    let ok = config(|c| {
        c.key_privacy = vec!["payments.*=hmac".into()];
        c.encryption_keys = Some(both.path().to_owned());
    });
    let privacy = ok.key_privacy().unwrap();
    assert_eq!(privacy.sealer().ring().hmac_id(), Some("names"));
    assert_eq!(privacy.sealer().ring().primary_id(), Some("k1"));
}
