//! The default arguments and key of a call (tests/vectors/arguments.json, shared by every client
//! library): a Rust tuple of the call's arguments gives the same fingerprint and key as the other
//! languages' wrappers.

use oncekey_client::{default_arguments, default_key};
use serde_json::Value;

fn cases() -> Vec<Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/arguments.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap().clone();
    assert!(cases.len() >= 10, "the vector file lost its cases");
    cases
}

/// A call's value as a Rust caller would pass it: `{"$bytes": b64}` is a byte string, which
/// crosses languages as its base64 text.
fn native(value: &Value) -> Value {
    match value {
        Value::Object(map) if map.len() == 1 && map.contains_key("$bytes") => map["$bytes"].clone(),
        Value::Array(items) => Value::Array(items.iter().map(native).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), native(v))).collect())
        }
        other => other.clone(),
    }
}

#[test]
fn every_case_of_the_shared_vectors() {
    for case in cases() {
        let name = case["name"].as_str().unwrap();
        // The call's arguments as a sequence, which serializes like a tuple.
        let call: Vec<Value> = case["call"]
            .as_array()
            .unwrap()
            .iter()
            .map(native)
            .collect();
        if let Some(refused) = case.get("refused_number") {
            let err = default_key("email.send", &call).unwrap_err().to_string();
            assert!(
                err.contains(refused["path"].as_str().unwrap()),
                "{name}: {err}"
            );
            continue;
        }
        assert_eq!(
            default_arguments(&call).unwrap(),
            case["arguments"],
            "{name}"
        );
        let key = default_key("email.send", &call).unwrap();
        assert_eq!(key.key(), case["key"].as_str().unwrap(), "{name}");
    }
}

#[test]
fn a_tuple_is_the_call_and_a_lone_value_is_refused() {
    let key = default_key(
        "email.send",
        &("ada@example.com", "Your ticket #481", None::<&str>),
    )
    .unwrap();
    let two_strings = &cases()[0];
    assert_eq!(key.key(), two_strings["key"].as_str().unwrap());
    let err = default_key("email.send", &"ada@example.com")
        .unwrap_err()
        .to_string();
    assert!(err.contains("tuple"), "{err}");
    assert!(default_key("Bad Namespace", &("x",)).is_err());
}
