//! The shared RFC 8785 vectors (tests/vectors/fingerprint.json, made by an independent
//! implementation) against both fingerprint paths: JSON text (the server's `payload_json`) and
//! serde values (the Rust client's `fingerprint_of`).

use oncekey_api::fingerprint::{canonicalize_json, fingerprint_json, fingerprint_of};
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
            assert!(canonicalize_json(input).is_err(), "{name}: must be refused");
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
