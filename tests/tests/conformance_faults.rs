//! Fault conformance of the Python, TypeScript and Go clients: each language's driver
//! (tests/conformance/<lang>, command `fault`) runs a key through its client's one-line wrapper
//! while this test SIGKILLs and restarts the real server around it (embedded store, same port and
//! data directory), takes the key over behind its back, or has the driver cancel its own call.
//!
//! In every scenario: exactly one effect line per key (the effect file counts them), the outcome
//! stored in the ledger, and the documented error type. The protocol is in
//! tests/conformance/README.md; one test per language. Like `conformance.rs`, ignored by a plain
//! `cargo test`: `scripts/test polyglot` runs them.

use oncekey_api::fingerprint::fingerprint_of;
use oncekey_api::v1::{self, ClaimOutcome, RecordStatus};
use oncekey_tests::drivers::{args, driver, Session};
use oncekey_tests::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

const TENANT: &str = "faults";
const NS: &str = "conformance.faults";
/// The drivers' lease (their default `--lease-ms`).
const LEASE: Duration = Duration::from_millis(2000);
/// How long to wait for a driver's next event: generous, the machine may be loaded.
const EVENT: Duration = Duration::from_secs(60);

/// One language's run of the scenarios: its driver, a scratch directory and a runtime for the
/// harness's own gRPC calls.
struct Faults {
    lang: &'static str,
    dir: tempfile::TempDir,
    rt: Runtime,
}

impl Faults {
    fn new(lang: &'static str) -> Self {
        let _ = driver(lang); // found or built now, so a missing toolchain fails first
        Faults {
            lang,
            dir: tempfile::tempdir().expect("tempdir"),
            rt: Runtime::new().expect("runtime"),
        }
    }

    fn key(&self, scenario: &str) -> String {
        format!("{}-{scenario}", self.lang)
    }

    fn effects_file(&self, key: &str) -> PathBuf {
        self.dir.path().join(format!("{key}.effects"))
    }

    /// The lines of the effect file of `key` (none when it does not exist).
    fn effects(&self, key: &str) -> Vec<String> {
        std::fs::read_to_string(self.effects_file(key))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Starts `driver fault TARGET TENANT NS KEY EFFECT_FILE [extra]`.
    fn start(&self, target: &str, key: &str, extra: &[&str]) -> Session {
        let target = if target.starts_with("http://") {
            target.to_owned()
        } else {
            format!("http://{target}")
        };
        let effects = self.effects_file(key);
        let lease_ms = LEASE.as_millis().to_string();
        let mut args = vec![
            "fault",
            &target,
            TENANT,
            NS,
            key,
            effects.to_str().expect("utf-8 path"),
            "--lease-ms",
            &lease_ms,
        ];
        args.extend_from_slice(extra);
        let stderr = self.dir.path().join(format!("{key}.{}.stderr", nonce()));
        driver(self.lang).spawn(&args, &stderr)
    }

    fn lookup(&self, server: &Server, key: &str) -> Option<v1::Record> {
        self.rt.block_on(async {
            let mut c = server.client(TENANT).await;
            match c.lookup(lookup(NS, key)).await {
                Ok(r) => r.into_inner().record,
                Err(s) if s.code() == tonic::Code::NotFound => None,
                Err(s) => panic!("lookup {key}: {s:?}"),
            }
        })
    }

    /// A Claim of `key` with ARGS, as another caller would send it.
    fn claim(&self, server: &Server, key: &str, owner: &str) -> v1::ClaimResponse {
        let mut request = claim(NS, key, &serde_json::to_string(&args()).unwrap());
        request.owner = owner.into();
        request.lease_ttl = Some(ms(LEASE.as_millis() as i64));
        self.rt.block_on(async {
            let mut c = server.client(TENANT).await;
            c.claim(request)
                .await
                .unwrap_or_else(|s| panic!("claim {key}: {s:?}"))
                .into_inner()
        })
    }

    fn complete(&self, server: &Server, key: &str, token: u64) {
        let body = serde_json::to_vec(&json!({ "done": key })).unwrap();
        self.rt.block_on(async {
            let mut c = server.client(TENANT).await;
            c.complete(complete(NS, key, token, result(0, &body)))
                .await
                .unwrap_or_else(|s| panic!("complete {key}: {s:?}"));
        });
    }

    /// The record of `key` is SUCCEEDED with `{"done": KEY}` under fencing token `token`, the
    /// driver fingerprinted ARGS, and the effect happened exactly once.
    fn assert_succeeded(&self, server: &Server, key: &str, token: u64) {
        let lang = self.lang;
        let record = self
            .lookup(server, key)
            .unwrap_or_else(|| panic!("{lang} {key}: no record"));
        assert_eq!(status(&record), RecordStatus::Succeeded, "{lang} {key}");
        assert_eq!(record.fencing_token, token, "{lang} {key}: {record:?}");
        let body: Value = serde_json::from_slice(&record.result.expect("result").body)
            .unwrap_or_else(|e| panic!("{lang} {key}: stored result is not JSON: {e}"));
        assert_eq!(body, json!({ "done": key }), "{lang} {key}");
        assert_eq!(
            record.fingerprint,
            fingerprint_of(&args()).unwrap(),
            "{lang} {key}: the driver must fingerprint ARGS"
        );
        assert_eq!(self.effects(key), [key], "{lang} {key}: exactly one effect");
    }

    fn assert_done_ok(&self, done: &Value, key: &str, replayed: bool) {
        let want =
            json!({"event": "done", "replayed": replayed, "result": {"done": key}, "error": null});
        assert_eq!(*done, want, "{} {key}", self.lang);
    }

    fn assert_done_error(&self, done: &Value, key: &str, error_type: &str) {
        let lang = self.lang;
        assert_eq!(done["error"]["type"], error_type, "{lang} {key}: {done}");
        assert_eq!(done["result"], Value::Null, "{lang} {key}: {done}");
        assert_eq!(done["replayed"], false, "{lang} {key}: {done}");
    }

    /// Runs started → go → effect → finish → done on a driver already started.
    fn run_through(&self, mut session: Session, key: &str) -> Value {
        session.expect("started", EVENT);
        session.send("go");
        session.expect("effect", EVENT);
        session.send("finish");
        let done = session.done(EVENT);
        self.assert_done_ok(&done, key, false);
        done
    }

    /// 1. The server restarts while the function runs: only a reopened KeepAlive keeps the lease
    ///    through 2.5 lease lengths, so a rival Claim still finds it IN_PROGRESS.
    fn restart_during_effect(&self) {
        let key = self.key("restart-during-effect");
        let mut server = Server::start(&[]);
        let mut session = self.start(&server.grpc, &key, &[]);
        let started = session.expect("started", EVENT);
        assert_eq!(started["token"], 1, "{}: {started}", self.lang);
        server.restart(&[]);
        std::thread::sleep(LEASE * 5 / 2);
        let rival = self.claim(&server, &key, "rival");
        assert_eq!(
            outcome(&rival),
            ClaimOutcome::InProgress,
            "{} {key}: the lease lapsed: the KeepAlive was not reopened after the restart\n{}",
            self.lang,
            session.transcript()
        );
        session.send("go");
        session.expect("effect", EVENT);
        session.send("finish");
        let done = session.done(EVENT);
        self.assert_done_ok(&done, &key, false);
        self.assert_succeeded(&server, &key, 1);
    }

    /// 2. The server dies between the effect and Complete and comes back 1.5 s later: the
    ///    client's Complete retries; a second run replays without calling the function.
    fn restart_before_complete(&self) {
        let key = self.key("restart-before-complete");
        let mut server = Server::start(&[]);
        let mut session = self.start(&server.grpc, &key, &[]);
        session.expect("started", EVENT);
        session.send("go");
        session.expect("effect", EVENT);
        server.kill9();
        session.send("finish");
        std::thread::sleep(Duration::from_millis(1500));
        server.restart(&[]);
        let done = session.done(EVENT);
        self.assert_done_ok(&done, &key, false);
        self.assert_succeeded(&server, &key, 1);

        // The same key again: replayed; `done` must come first (the function is not called).
        let again = self.start(&server.grpc, &key, &[]).done(EVENT);
        self.assert_done_ok(&again, &key, true);
        self.assert_succeeded(&server, &key, 1);
    }

    /// 3. The server is down when the call starts and comes up 1.5 s later.
    fn server_down_at_start(&self) {
        let key = self.key("server-down-at-start");
        let addr = free_addr();
        let session = self.start(&addr, &key, &[]);
        std::thread::sleep(Duration::from_millis(1500));
        let server = Server::start_at(&self.dir.path().join("down-at-start"), &addr, &[]);
        self.run_through(session, &key);
        self.assert_succeeded(&server, &key, 1);
    }

    /// 4. The server dies while the function runs; after the lease lapsed, another server over the
    ///    same data takes the key over, performs the effect and completes it. When the first port
    ///    comes back, the driver's KeepAlive learns LEASE_LOST: its function is cancelled before
    ///    writing, and the call ends with `LeaseLost`.
    fn takeover_while_running(&self) {
        let key = self.key("takeover");
        let data = self.dir.path().join("takeover");
        let mut first = Server::start_on(&data, &[]);
        let first_addr = first.grpc.clone();
        let mut session = self.start(&first.grpc, &key, &[]);
        session.expect("started", EVENT);
        first.kill9();
        std::thread::sleep(LEASE * 3 / 2);

        let mut other = Server::start_on(&data, &[]);
        let deadline = Instant::now() + Duration::from_secs(30);
        let token = loop {
            let answer = self.claim(&other, &key, "harness");
            match outcome(&answer) {
                ClaimOutcome::Acquired => break answer.lease.expect("lease").token,
                ClaimOutcome::InProgress if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(200))
                }
                o => panic!("{} {key}: takeover got {o:?}", self.lang),
            }
        };
        assert_eq!(token, 2, "{} {key}", self.lang);
        append_line(&self.effects_file(&key), &key);
        self.complete(&other, &key, token);
        assert!(other.terminate(Duration::from_secs(30)).success());

        let back = Server::start_at(&data, &first_addr, &[]);
        let done = session.done(EVENT);
        self.assert_done_error(&done, &key, "LeaseLost");
        self.assert_succeeded(&back, &key, 2);
    }

    /// 5. The caller cancels its own call before the effect: `Cancelled`, no effect, and the key
    ///    released (RETRY, not PROCESSING for the rest of the lease); the next run does it once.
    fn caller_cancellation(&self) {
        let key = self.key("cancel");
        let server = Server::start(&[]);
        let mut session = self.start(&server.grpc, &key, &["--cancel-after-ms", "500"]);
        let first = session
            .next_event(EVENT)
            .unwrap_or_else(|| panic!("{}: no event\n{}", self.lang, session.transcript()));
        // The Claim normally acquires well within 500 ms; on a very slow machine the cancellation
        // may come first, and then nothing may be left PROCESSING either.
        let started = first["event"] == "started";
        let done = if started {
            session.done(EVENT)
        } else {
            session.exit(first)
        };
        self.assert_done_error(&done, &key, "Cancelled");
        assert!(
            self.effects(&key).is_empty(),
            "{} {key}: no effect",
            self.lang
        );
        let record = self.lookup(&server, &key);
        let left = record.as_ref().map(status);
        if started {
            assert_eq!(left, Some(RecordStatus::Retry), "{} {key}", self.lang);
        } else {
            assert_ne!(left, Some(RecordStatus::Processing), "{} {key}", self.lang);
        }

        let token = record.map_or(0, |r| r.fencing_token) + 1;
        self.run_through(self.start(&server.grpc, &key, &[]), &key);
        self.assert_succeeded(&server, &key, token);
    }

    fn all(&self) {
        self.restart_during_effect();
        self.restart_before_complete();
        self.server_down_at_start();
        self.takeover_while_running();
        self.caller_cancellation();
    }
}

fn append_line(path: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open the effect file");
    writeln!(f, "{line}").expect("write the effect");
    f.sync_all().expect("fsync the effect");
}

fn nonce() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
fn faults_python() {
    Faults::new("python").all();
}

/// Needs the TypeScript driver's `fault` command (tests/conformance/typescript).
#[test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
fn faults_typescript() {
    Faults::new("typescript").all();
}

/// Needs the Go driver's `fault` command (tests/conformance/go).
#[test]
#[ignore = "needs Python, Go and Node.js: scripts/test polyglot runs it"]
fn faults_go() {
    Faults::new("go").all();
}
