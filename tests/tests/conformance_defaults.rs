//! One operation across languages: Python, Go, TypeScript and Rust each send the same
//! `send_email(to, subject)` through their library's defaults — no key, no arguments given
//! (docs/api.md#default-arguments-and-key) — and the ledger sees one operation: one effect, three
//! replays, one key, whichever language comes first.
//!
//! Needs the toolchains that `scripts/polyglot-setup` installs, so a plain `cargo test` lists it as
//! ignored: `scripts/test polyglot` runs it.

use oncekey_api::v1::RecordStatus;
use oncekey_client::{Disposition, Failure};
use oncekey_tests::drivers::driver;
use oncekey_tests::*;
use serde_json::{json, Value};
use std::path::Path;

const TENANT: &str = "conformance";
const NS: &str = "email.send";

/// The Rust side never fails.
#[derive(Debug)]
struct Never;
impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}
impl Failure for Never {
    fn disposition(&self) -> Disposition {
        Disposition::Final
    }
}

/// Sends the call from `lang`, the Rust client in this process or a driver.
async fn call(server: &Server, lang: &str, to: &str, subject: &str, effects: &Path) -> Value {
    if lang != "rust" {
        let file = effects.to_str().unwrap();
        return driver(lang).run(&["call", &server.grpc, TENANT, NS, to, subject, file]);
    }
    let client = oncekey_client::Client::connect(
        &server.grpc,
        oncekey_client::ConnectOptions {
            tenant: Some(TENANT.into()),
            ..Default::default()
        },
    )
    .await
    .expect("connect");
    let key = oncekey_client::default_key(NS, &(to, subject)).unwrap();
    let done = client
        .once_call(NS, &(to, subject))
        .unwrap()
        .run_detailed(|_lease| async {
            let mut text = std::fs::read_to_string(effects).unwrap_or_default();
            text.push_str("rust\n");
            std::fs::write(effects, text).unwrap();
            Ok::<_, Never>(json!({"sent_by": "rust"}))
        })
        .await
        .expect("rust call");
    json!({"replayed": done.replayed, "value": done.value, "key": key.key()})
}

#[tokio::test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
async fn one_call_from_four_languages_is_one_operation() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let rounds = [
        ("Your ticket #481", ["python", "go", "typescript", "rust"]),
        ("Your ticket #482", ["rust", "typescript", "go", "python"]),
        ("Your ticket #483", ["typescript", "python", "rust", "go"]),
        ("Your ticket #484", ["go", "rust", "python", "typescript"]),
    ];
    for (subject, order) in rounds {
        let effects = dir.path().join(format!("{}.effects", order[0]));
        let mut reports = Vec::new();
        for lang in order {
            let report = call(&server, lang, "ada@example.com", subject, &effects).await;
            reports.push((lang, report));
        }
        // One effect, by the first language; the other three replayed its result.
        let ran = std::fs::read_to_string(&effects).unwrap();
        assert_eq!(ran, format!("{}\n", order[0]), "{subject}: {reports:?}");
        for (i, (lang, r)) in reports.iter().enumerate() {
            assert_eq!(r["replayed"], i > 0, "{subject} {lang}: {r}");
            assert_eq!(
                r["value"],
                json!({"sent_by": order[0]}),
                "{subject} {lang}: {r}"
            );
            assert_eq!(r["key"], reports[0].1["key"], "{subject} {lang}: {r}");
        }
        // And the ledger holds one operation under that key: acquired once, three replays. (A
        // fresh connection: the drivers ran while this thread was blocked, unable to answer the
        // server's HTTP/2 keepalive pings.)
        let mut rust = server.client(TENANT).await;
        let key = reports[0].1["key"].as_str().unwrap();
        assert!(key.starts_with("sha256:") && key.len() == 71, "{key}");
        let record = rust
            .lookup(lookup(NS, key))
            .await
            .unwrap()
            .into_inner()
            .record
            .unwrap();
        assert_eq!(status(&record), RecordStatus::Succeeded, "{subject}");
        assert_eq!((record.attempt, record.dedup_hits), (1, 3), "{subject}");
    }
}

#[test]
fn the_shared_vector_key_is_the_one_every_language_derives() {
    // The first round's call is the vector file's "two strings" case: the key the drivers report
    // is checked against it there (each client's own tests), here against Rust's.
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/vectors/arguments.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let case = &doc["cases"][0];
    assert_eq!(case["name"], "two strings");
    let key = oncekey_client::default_key(NS, &("ada@example.com", "Your ticket #481")).unwrap();
    assert_eq!(key.key(), case["key"].as_str().unwrap());
}
