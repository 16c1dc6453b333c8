//! Conformance of the Python, Go and TypeScript clients (client/{python,go,typescript}) against the
//! real binary, through the drivers in tests/conformance: the same scenario from each language, a
//! fingerprint equal to the Rust one, one ledger shared across languages, and 32 concurrent claims
//! from the three languages with exactly one ACQUIRED.
//!
//! Needs the toolchains that `scripts/polyglot-setup` installs (see `oncekey_tests::drivers`), so
//! a plain `cargo test` lists these tests as ignored: `scripts/test polyglot` sets up and runs
//! them. Run without the toolchains, a test fails with that hint; it never skips.

use oncekey_api::fingerprint::fingerprint_of;
use oncekey_api::v1::RecordStatus;
use oncekey_tests::drivers::{self, args, driver, Driver, SETUP_HINT};
use oncekey_tests::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Stdio};

const TENANT: &str = "conformance";
const NS: &str = "conformance.charge";

#[tokio::test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
async fn each_language_acquires_replays_byte_for_byte_and_refuses_key_reuse() {
    let server = Server::start(&[]);
    let body = |lang: &str| {
        let mut body = format!("{{\"charged_by\":\"{lang}\"}}").into_bytes();
        body.extend_from_slice(&[0x00, 0xff, 0x80, b'\n']); // not UTF-8: bytes, not text
        body
    };
    let reports: Vec<(&str, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = drivers::all()
            .into_iter()
            .map(|d| {
                let (grpc, body) = (&server.grpc, hex::encode(body(d.lang)));
                let key = format!("scenario-{}", d.lang);
                s.spawn(move || (d.lang, d.run(&["scenario", grpc, TENANT, NS, &key, &body])))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let mut rust = server.client(TENANT).await;
    for (lang, r) in reports {
        // First claim acquires; the 1 s lease outlived 2.5 s of work only through KeepAlive.
        assert_eq!(r["first_replayed"], false, "{lang}: {r}");
        assert_eq!(r["token"], 1, "{lang}: {r}");
        assert_eq!(
            r["during"], "CLAIM_OUTCOME_IN_PROGRESS",
            "{lang}: keep-alive failed: {r}"
        );
        assert_eq!(r["renewed"], true, "{lang}: {r}");
        // The duplicate replays the stored result byte for byte, without running the effect.
        assert_eq!(r["replay_replayed"], true, "{lang}: {r}");
        assert_eq!(r["fn_called_on_replay"], false, "{lang}: {r}");
        assert_eq!(r["replay"]["code"], 201, "{lang}: {r}");
        assert_eq!(r["replay"]["body"], hex::encode(body(lang)), "{lang}: {r}");
        assert_eq!(
            r["replay"]["content_type"], "application/octet-stream",
            "{lang}: {r}"
        );
        assert_eq!(
            r["replay"]["metadata"],
            json!({"lang": lang}),
            "{lang}: {r}"
        );
        // Another payload under the same key: FAILED_PRECONDITION with ErrorInfo KEY_REUSED.
        assert_eq!(
            r["reuse"],
            json!({"code": "FAILED_PRECONDITION", "reason": "KEY_REUSED"}),
            "{lang}: {r}"
        );

        // And the ledger agrees: one acquisition, succeeded, the exact bytes stored.
        let record = rust
            .lookup(lookup(NS, &format!("scenario-{lang}")))
            .await
            .unwrap()
            .into_inner()
            .record
            .unwrap();
        assert_eq!(status(&record), RecordStatus::Succeeded, "{lang}");
        assert_eq!((record.attempt, record.fencing_token), (1, 1), "{lang}");
        assert_eq!(record.result.unwrap().body, body(lang), "{lang}");
        assert_eq!(
            record.fingerprint,
            fingerprint_of(&args()).unwrap(),
            "{lang}"
        );
    }
}

#[tokio::test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
async fn fingerprints_of_the_same_arguments_are_equal_in_every_language() {
    let rust = fingerprint_of(&args()).expect("fingerprint");
    for d in drivers::all() {
        let got = d.run(&["fingerprint"]);
        assert_eq!(
            got["fingerprint"],
            hex::encode(rust),
            "{} differs from Rust",
            d.lang
        );
    }
    // The server's own hash of the same arguments sent as payload_json agrees too.
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    let text = serde_json::to_string(&args()).unwrap();
    c.claim(claim(NS, "server-side", &text)).await.unwrap();
    let record = c
        .lookup(lookup(NS, "server-side"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(record.fingerprint, rust);
}

#[test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
fn python_completes_a_key_that_go_and_typescript_replay() {
    let server = Server::start(&[]);
    let body = "cross-language \u{1F600}".as_bytes().to_vec();
    let done = driver("python").run(&[
        "complete",
        &server.grpc,
        TENANT,
        NS,
        "shared",
        &hex::encode(&body),
    ]);
    assert_eq!(done["replayed"], false, "{done}");
    for lang in ["go", "typescript"] {
        let replay = driver(lang).run(&["replay", &server.grpc, TENANT, NS, "shared"]);
        assert_eq!(
            replay["outcome"], "CLAIM_OUTCOME_COMPLETED",
            "{lang}: {replay}"
        );
        assert_eq!(replay["result"]["code"], 200, "{lang}: {replay}");
        assert_eq!(
            replay["result"]["body"],
            hex::encode(&body),
            "{lang}: {replay}"
        );
    }
}

#[test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
fn thirty_two_concurrent_claims_from_three_languages_acquire_once() {
    let server = Server::start(&[]);
    let split = [("python", "11"), ("go", "11"), ("typescript", "10")];
    let mut children: Vec<(&Driver, Child)> = split
        .iter()
        .map(|(lang, n)| {
            let d = driver(lang);
            let child = d
                .command(&["race", &server.grpc, TENANT, NS, "raced", n])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{lang}: cannot start: {e}; {SETUP_HINT}"));
            (d, child)
        })
        .collect();
    // Every driver connected and waiting: then release all at once.
    let mut readers = Vec::new();
    for (d, child) in &mut children {
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "{} driver did not get ready", d.lang);
        readers.push(reader);
    }
    for (_, child) in &mut children {
        child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    }
    let mut outcomes: Vec<String> = Vec::new();
    for ((d, mut child), mut reader) in children.into_iter().zip(readers) {
        let mut out = String::new();
        reader.read_to_string(&mut out).unwrap();
        let status = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(status.success(), "{} race failed: {err}", d.lang);
        let report: Value = serde_json::from_str(out.trim()).expect("race JSON");
        assert_eq!(report["errors"], json!([]), "{}: {report}", d.lang);
        outcomes.extend(
            report["outcomes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| format!("{}:{}", d.lang, o.as_str().unwrap())),
        );
    }
    assert_eq!(outcomes.len(), 32, "{outcomes:?}");
    let acquired: Vec<_> = outcomes
        .iter()
        .filter(|o| o.ends_with("ACQUIRED"))
        .collect();
    assert_eq!(acquired.len(), 1, "exactly one ACQUIRED: {outcomes:?}");
    assert!(
        outcomes
            .iter()
            .all(|o| o.ends_with("ACQUIRED") || o.ends_with("IN_PROGRESS")),
        "{outcomes:?}"
    );
}

/// A Claim of a key that awaits approval reaches every client: each reports the new outcome
/// (AWAITING_APPROVAL) instead of crashing, and acquires nothing.
#[tokio::test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
async fn each_language_reports_an_operation_awaiting_approval() {
    let server = Server::start(&[]);
    let mut rust = server.client(TENANT).await;
    let text = serde_json::to_string(&args()).unwrap();
    let gated = oncekey_api::v1::ClaimRequest {
        require_approval: true,
        ..claim(NS, "gated", &text)
    };
    rust.claim(gated).await.unwrap();
    for d in drivers::all() {
        let replay = d.run(&["replay", &server.grpc, TENANT, NS, "gated"]);
        assert_eq!(
            replay["outcome"], "CLAIM_OUTCOME_AWAITING_APPROVAL",
            "{}: {replay}",
            d.lang
        );
    }
    // A fresh connection: the drivers ran while this thread was blocked, unable to answer the
    // server's HTTP/2 keepalive pings, so the first connection may have been closed meanwhile.
    let mut rust = server.client(TENANT).await;
    let record = rust
        .lookup(lookup(NS, "gated"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(status(&record), RecordStatus::AwaitingApproval);
    assert_eq!((record.fencing_token, record.dedup_hits), (0, 3));
}
