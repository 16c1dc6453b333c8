//! The shared RFC 8785 vectors (tests/vectors/fingerprint.json, made by an independent
//! implementation) against both fingerprint paths: JSON text (the server's `payload_json`) and
//! serde values (the Rust client's `fingerprint_of`).

use oncekey_api::fingerprint::{
    canonicalize_json, fingerprint_json, fingerprint_of, FingerprintError, Inexact,
};
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/vectors/fingerprint.json"
    );
    let text = std::fs::read_to_string(path).expect("shared vectors");
    let doc: Value = serde_json::from_str(&text).expect("vectors are JSON");
    let vectors = doc["vectors"].as_array().expect("a vectors array").clone();
    assert!(vectors.len() >= 20, "the vector file lost its cases");
    vectors
}

#[test]
fn canonical_text_and_hash_match_every_vector() {
    for v in vectors() {
        let name = v["name"].as_str().unwrap();
        let input = v["input"].as_str().unwrap();
        if v["error"].as_bool() == Some(true) {
            let err = canonicalize_json(input).expect_err(name);
            if let Some(refused) = v.get("refused_number") {
                let FingerprintError::InexactNumber { path, why } = err else {
                    panic!("{name}: refused for another reason: {err}")
                };
                assert_eq!(path, refused["path"].as_str().unwrap(), "{name}");
                assert_eq!(why_name(why), refused["why"].as_str().unwrap(), "{name}");
            }
            continue;
        }
        assert_eq!(
            canonicalize_json(input).unwrap(),
            v["canonical"].as_str().unwrap(),
            "{name}"
        );
        assert_eq!(
            hex::encode(fingerprint_json(input).unwrap()),
            v["sha256"].as_str().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn serde_values_fingerprint_like_their_text() {
    for v in vectors().into_iter().filter(|v| v["error"].is_null()) {
        let value: Value = serde_json::from_str(v["input"].as_str().unwrap()).unwrap();
        assert_eq!(
            hex::encode(fingerprint_of(&value).unwrap()),
            v["sha256"].as_str().unwrap(),
            "{}",
            v["name"]
        );
    }
}

fn why_name(why: Inexact) -> &'static str {
    match why {
        Inexact::Magnitude => "magnitude",
        Inexact::Precision => "precision",
    }
}

#[test]
fn serde_values_beyond_2_pow_53_minus_1_are_refused_like_their_text() {
    // A value holds numbers as u64, i64 or f64: the magnitude cases stay refused; the precision
    // cases were rounded by the parse that made the value (a text path sees them).
    let magnitude = vectors()
        .into_iter()
        .filter(|v| v["refused_number"]["why"] == "magnitude");
    let mut checked = 0;
    for v in magnitude {
        let value: Value = serde_json::from_str(v["input"].as_str().unwrap()).unwrap();
        let err = fingerprint_of(&value).expect_err(v["name"].as_str().unwrap());
        assert!(matches!(
            err,
            FingerprintError::InexactNumber {
                why: Inexact::Magnitude,
                ..
            }
        ));
        checked += 1;
    }
    assert!(checked >= 5, "the vector file lost its magnitude cases");
}
