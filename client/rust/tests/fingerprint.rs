//! The client's fingerprint of a serde struct equals the shared vector hash of the equivalent
//! JSON (tests/vectors/fingerprint.json), whatever the struct's field order.

use oncekey_client::Client;
use serde::Serialize;
use serde_json::Value;

fn vector(name: &str) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/fingerprint.json"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["vectors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("vector {name:?}"))
        .clone()
}

#[derive(Serialize)]
struct Line {
    qty: u32,
    sku: &'static str,
}

#[derive(Serialize)]
struct Order {
    lines: Vec<Line>,
    id: &'static str,
}

/// Fields deliberately declared in another order than the vector's JSON.
#[derive(Serialize)]
struct Charge {
    currency: &'static str,
    order: Order,
    amount: u64,
}

#[test]
fn a_serde_struct_fingerprints_like_the_shared_vector() {
    let charge = Charge {
        currency: "EUR",
        order: Order {
            lines: vec![Line { qty: 2, sku: "A" }, Line { qty: 1, sku: "B" }],
            id: "ord-1",
        },
        amount: 1250,
    };
    let v = vector("nested");
    assert_eq!(
        hex::encode(Client::fingerprint(&charge).unwrap()),
        v["sha256"].as_str().unwrap()
    );
}

#[test]
#[allow(clippy::approx_constant)] // the vector's literal, not π
fn floats_and_unicode_fingerprint_like_the_shared_vectors() {
    let fractions: Vec<f64> = vec![0.5, -0.25, 1.0, 100.0, 3.14159, 0.1, 0.30000000000000004];
    assert_eq!(
        hex::encode(Client::fingerprint(&fractions).unwrap()),
        vector("fractions")["sha256"].as_str().unwrap()
    );
    let text = ["été", "日本語", "😀"];
    assert_eq!(
        hex::encode(Client::fingerprint(&text).unwrap()),
        vector("raw UTF-8 kept")["sha256"].as_str().unwrap()
    );
}

#[test]
fn an_id_beyond_2_pow_53_minus_1_is_refused_naming_its_path() {
    #[derive(Serialize)]
    struct Refund {
        id: u64,
    }
    for (name, id) in [
        ("an id beyond 2^53-1", 1_234_567_890_123_456_789u64),
        (
            "its neighbour, which a double cannot tell from it",
            1_234_567_890_123_456_790,
        ),
    ] {
        let path = vector(name)["refused_number"]["path"]
            .as_str()
            .unwrap()
            .to_owned();
        let err = Client::fingerprint(&Refund { id }).unwrap_err().to_string();
        assert!(err.contains(&path), "{err}");
        assert!(err.contains("send it as a string"), "{err}");
    }
    // As a string it is an ordinary argument.
    #[derive(Serialize)]
    struct AsText {
        id: &'static str,
    }
    assert!(Client::fingerprint(&AsText {
        id: "1234567890123456789"
    })
    .is_ok());
}
