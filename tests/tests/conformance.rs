//! Conformance of the Python, Go and TypeScript clients (client/{python,go,typescript}) against the
//! real binary, through the drivers in tests/conformance: the same scenario from each language, a
//! fingerprint equal to the Rust one, one ledger shared across languages, and 32 concurrent claims
//! from the three languages with exactly one ACQUIRED.
//!
//! Needs the toolchains that `scripts/polyglot-setup` installs (the Python venv, the TypeScript
//! client's node_modules, Go). A missing toolchain fails the test with that hint; it never skips.

use oncekey_api::fingerprint::fingerprint_of;
use oncekey_api::v1::RecordStatus;
use oncekey_tests::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const TENANT: &str = "conformance";
const NS: &str = "conformance.charge";
const SETUP_HINT: &str = "run scripts/polyglot-setup first";

/// The arguments every driver fingerprints (tests/conformance/README.md: ARGS).
fn args() -> Value {
    json!([
        {"currency": "EUR", "\u{20ac}": "euro", "\u{1F600}": "emoji", "\u{e9}": "e-acute",
         "\u{fb01}": "ligature", "text": "line\nbreak \"q\" \\ \u{1} </> \u{2028}"},
        {"amount": 1250, "rate": 0.1, "big": 1e21, "tiny": 5e-324, "neg": -12.5, "small": 1e-7},
        [true, false],
        null,
        "order-481",
        u64::MAX
    ])
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
}

fn cache() -> PathBuf {
    match std::env::var_os("ONCEKEY_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/oncekey"),
    }
}

/// How to start one language's driver.
#[derive(Debug)]
struct Driver {
    lang: &'static str,
    program: PathBuf,
    prefix: Vec<PathBuf>,
    env: Vec<(&'static str, PathBuf)>,
}

impl Driver {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix)
            .args(args)
            .envs(self.env.iter().cloned());
        cmd
    }

    /// Runs the driver to completion (at most 60 s) and parses the JSON it printed.
    fn run(&self, args: &[&str]) -> Value {
        let child = self
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{}: cannot start {:?}: {e}; {SETUP_HINT}",
                    self.lang, self.program
                )
            });
        self.finish(child, args)
    }

    fn finish(&self, mut child: Child, args: &[&str]) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().expect("try_wait").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{} driver {args:?} did not finish within 60 s", self.lang);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let (mut out, mut err) = (String::new(), String::new());
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(
            status.success(),
            "{} driver {args:?} failed ({status}):\n{err}{out}",
            self.lang
        );
        let last = out.lines().last().unwrap_or_default();
        serde_json::from_str(last)
            .unwrap_or_else(|e| panic!("{} driver printed no JSON ({e}):\n{out}\n{err}", self.lang))
    }
}

/// The three drivers, built once per test process.
fn drivers() -> &'static [Driver; 3] {
    static DRIVERS: OnceLock<[Driver; 3]> = OnceLock::new();
    DRIVERS.get_or_init(|| {
        let conformance = repo().join("tests/conformance");

        let python = cache().join("venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: {SETUP_HINT}",
            python.display()
        );

        // The Go driver, built into the cargo target dir next to this test.
        let go_bin = std::env::current_exe()
            .unwrap()
            .with_file_name("oncekey-conformance-go-driver");
        let built = Command::new("go")
            .args(["build", "-o"])
            .arg(&go_bin)
            .arg(".")
            .current_dir(conformance.join("go"))
            .status()
            .unwrap_or_else(|e| panic!("cannot run go: {e}; {SETUP_HINT}"));
        assert!(built.success(), "go build of the Go driver failed");

        // The TypeScript client, compiled so that the driver runs the current source.
        let ts = repo().join("client/typescript");
        let tsc = ts.join("node_modules/.bin/tsc");
        assert!(tsc.exists(), "{} is missing: {SETUP_HINT}", tsc.display());
        let compiled = Command::new(&tsc)
            .args(["-p"])
            .arg(&ts)
            .status()
            .expect("run tsc");
        assert!(compiled.success(), "tsc of client/typescript failed");

        [
            Driver {
                lang: "python",
                program: python,
                prefix: vec![conformance.join("python/driver.py")],
                env: vec![("PYTHONPATH", repo().join("client/python/src"))],
            },
            Driver {
                lang: "go",
                program: go_bin,
                prefix: vec![],
                env: vec![],
            },
            Driver {
                lang: "typescript",
                program: PathBuf::from("node"),
                prefix: vec![conformance.join("typescript/driver.js")],
                env: vec![],
            },
        ]
    })
}

fn driver(lang: &str) -> &'static Driver {
    drivers().iter().find(|d| d.lang == lang).expect("driver")
}

#[tokio::test]
async fn each_language_acquires_replays_byte_for_byte_and_refuses_key_reuse() {
    let server = Server::start(&[]);
    let body = |lang: &str| {
        let mut body = format!("{{\"charged_by\":\"{lang}\"}}").into_bytes();
        body.extend_from_slice(&[0x00, 0xff, 0x80, b'\n']); // not UTF-8: bytes, not text
        body
    };
    let reports: Vec<(&str, Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = drivers()
            .iter()
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
async fn fingerprints_of_the_same_arguments_are_equal_in_every_language() {
    let rust = fingerprint_of(&args()).expect("fingerprint");
    for d in drivers() {
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
