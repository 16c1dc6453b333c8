//! The conformance drivers of the Python, Go and TypeScript clients (tests/conformance/<lang>): how
//! to find or build each one, run it to completion, or drive it step by step over stdin/stdout.
//!
//! Needs the toolchains that `scripts/polyglot-setup` installs (the Python venv, the TypeScript
//! client's node_modules, Go). A missing toolchain fails the test with that hint; it never skips.

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What to tell someone whose toolchain is missing.
pub const SETUP_HINT: &str = "run scripts/polyglot-setup first";

/// The languages with a driver.
pub const LANGUAGES: [&str; 3] = ["python", "go", "typescript"];

/// The arguments every driver runs its keys with (tests/conformance/README.md: ARGS): a string map
/// with UTF-16 sorting traps and escapes, a number map, booleans, null, an order id and 2^64-1 as a string (a number that large is refused: docs/api.md#numbers).
pub fn args() -> Value {
    json!([
        {"currency": "EUR", "\u{20ac}": "euro", "\u{1F600}": "emoji", "\u{e9}": "e-acute",
         "\u{fb01}": "ligature", "text": "line\nbreak \"q\" \\ \u{1} </> \u{2028}"},
        {"amount": 1250, "rate": 0.1, "big": 9_007_199_254_740_991u64, "tiny": 5e-324, "neg": -12.5, "small": 1e-7},
        [true, false],
        null,
        "order-481",
        "18446744073709551615"
    ])
}

/// The repository root.
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
}

/// Where `scripts/polyglot-setup` installs things: `$ONCEKEY_CACHE` or `~/.cache/oncekey`.
pub fn cache() -> PathBuf {
    match std::env::var_os("ONCEKEY_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/oncekey"),
    }
}

/// How to start one language's driver.
#[derive(Debug)]
pub struct Driver {
    /// `python`, `go` or `typescript`.
    pub lang: &'static str,
    program: PathBuf,
    prefix: Vec<PathBuf>,
    env: Vec<(&'static str, PathBuf)>,
}

/// The driver of `lang`, found or built once per test process.
pub fn driver(lang: &str) -> &'static Driver {
    static PYTHON: OnceLock<Driver> = OnceLock::new();
    static GO: OnceLock<Driver> = OnceLock::new();
    static TYPESCRIPT: OnceLock<Driver> = OnceLock::new();
    match lang {
        "python" => PYTHON.get_or_init(python),
        "go" => GO.get_or_init(go),
        "typescript" => TYPESCRIPT.get_or_init(typescript),
        other => panic!("no conformance driver for {other}"),
    }
}

/// Every language's driver.
pub fn all() -> Vec<&'static Driver> {
    LANGUAGES.iter().map(|lang| driver(lang)).collect()
}

fn conformance() -> PathBuf {
    repo().join("tests/conformance")
}

fn python() -> Driver {
    let python = cache().join("venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: {SETUP_HINT}",
        python.display()
    );
    Driver {
        lang: "python",
        program: python,
        prefix: vec![conformance().join("python/driver.py")],
        env: vec![("PYTHONPATH", repo().join("client/python/src"))],
    }
}

fn go() -> Driver {
    // Built into the cargo target dir next to this test binary (one output per test binary, so
    // two test binaries building at once do not write the same file).
    let exe = std::env::current_exe().expect("current exe");
    let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("test");
    let bin = exe.with_file_name(format!("oncekey-conformance-go-driver-{stem}"));
    let built = Command::new("go")
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(conformance().join("go"))
        .status()
        .unwrap_or_else(|e| panic!("cannot run go: {e}; {SETUP_HINT}"));
    assert!(built.success(), "go build of the Go driver failed");
    Driver {
        lang: "go",
        program: bin,
        prefix: vec![],
        env: vec![],
    }
}

fn typescript() -> Driver {
    // The TypeScript client, compiled so that the driver runs the current source.
    let ts = repo().join("client/typescript");
    let tsc = ts.join("node_modules/.bin/tsc");
    assert!(tsc.exists(), "{} is missing: {SETUP_HINT}", tsc.display());
    let compiled = Command::new(&tsc)
        .arg("-p")
        .arg(&ts)
        .status()
        .expect("run tsc");
    assert!(compiled.success(), "tsc of client/typescript failed");
    Driver {
        lang: "typescript",
        program: PathBuf::from("node"),
        prefix: vec![conformance().join("typescript/driver.js")],
        env: vec![],
    }
}

impl Driver {
    /// The driver's command line with `args`.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix)
            .args(args)
            .envs(self.env.iter().cloned());
        cmd
    }

    /// Runs the driver to completion (at most 60 s) and parses the JSON of its last line.
    pub fn run(&self, args: &[&str]) -> Value {
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

    /// Waits (at most 60 s) for a driver started with piped stdout and stderr, and parses the
    /// JSON of its last line.
    pub fn finish(&self, mut child: Child, args: &[&str]) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        while child.try_wait().expect("try_wait").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("{} driver {args:?} did not finish within 60 s", self.lang);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let (mut out, mut err) = (String::new(), String::new());
        if let Some(mut stdout) = child.stdout.take() {
            stdout.read_to_string(&mut out).unwrap();
        }
        if let Some(mut stderr) = child.stderr.take() {
            stderr.read_to_string(&mut err).unwrap();
        }
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

    /// Starts the driver to be driven line by line: JSON events out, commands in.
    pub fn spawn(&self, args: &[&str], stderr: &Path) -> Session {
        let log = std::fs::File::create(stderr).expect("driver stderr file");
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: cannot start: {e}; {SETUP_HINT}", self.lang));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Session {
            lang: self.lang,
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            stderr: stderr.to_owned(),
        }
    }
}

/// A running driver that prints one JSON event per line and reads commands from stdin.
pub struct Session {
    lang: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Session {
    /// What the driver printed so far and wrote to stderr, for failure messages.
    pub fn transcript(&self) -> String {
        let err = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        format!(
            "{} driver stdout:\n{}\nstderr:\n{err}",
            self.lang,
            self.seen.join("\n")
        )
    }

    /// The next event (a JSON line), waiting at most `timeout`; None if the driver ended first.
    pub fn next_event(&mut self, timeout: Duration) -> Option<Value> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => {
                self.seen.push(line.clone());
                let event = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("not a JSON event ({e}): {line}\n{}", self.transcript())
                });
                Some(event)
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!(
                "no event from the {} driver within {timeout:?}\n{}",
                self.lang,
                self.transcript()
            ),
        }
    }

    /// Waits for the event named `name`; panics if another comes first.
    pub fn expect(&mut self, name: &str, timeout: Duration) -> Value {
        match self.next_event(timeout) {
            Some(event) if event["event"] == name => event,
            Some(event) => panic!("expected {name}, got {event}\n{}", self.transcript()),
            None => panic!("the driver ended before {name}\n{}", self.transcript()),
        }
    }

    /// Sends one line on stdin.
    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        // A driver that already ended cannot read it; what it printed says why.
        let _ = writeln!(stdin, "{line}").and_then(|_| stdin.flush());
    }

    /// Waits for the final `done` event and a clean exit; returns the event.
    pub fn done(mut self, timeout: Duration) -> Value {
        let done = self.expect("done", timeout);
        self.exit(done)
    }

    /// After the `done` event the driver printed: waits for a clean exit; returns the event.
    pub fn exit(mut self, done: Value) -> Value {
        assert_eq!(done["event"], "done", "{}", self.transcript());
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the driver did not exit after done\n{}", self.transcript());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "driver exited with {status}\n{}",
            self.transcript()
        );
        done
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
