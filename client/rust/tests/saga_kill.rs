//! `examples/trip.rs` (a saga: flight, hotel, payment, each with a cancellation) killed with
//! SIGKILL between steps, in the middle of a step and in the middle of compensating, then rerun
//! with the same trip id once its short lease lapsed: every booking and every cancellation in the
//! fake providers' log happens exactly once, and a further rerun only replays.

use oncekey_tests::Server;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

/// target/<profile>/examples/trip, next to this test's target/<profile>/deps/<exe> (`cargo test`
/// builds it; a narrower run builds it here, once).
fn example() -> PathBuf {
    static EXAMPLE: OnceLock<PathBuf> = OnceLock::new();
    EXAMPLE
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().and_then(Path::parent).unwrap();
            let path = profile_dir.join("examples").join("trip");
            if !path.exists() {
                let status = Command::new(env!("CARGO"))
                    .args(["build", "-p", "oncekey-client", "--example", "trip"])
                    .status()
                    .expect("cargo build --example trip");
                assert!(status.success());
            }
            assert!(path.exists(), "missing {}", path.display());
            path
        })
        .clone()
}

fn command(server: &Server, log: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(example());
    cmd.arg("trip-7")
        .env("ONCEKEY_SERVER", &server.grpc)
        .env("ONCEKEY_TENANT", "travel")
        .env("TRIP_LOG", log)
        .env("TRIP_LEASE_MS", "1000")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs the example to completion; its JSON line.
fn run(server: &Server, log: &Path, env: &[(&str, &str)]) -> serde_json::Value {
    let out = command(server, log, env).output().expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "example failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Starts the example paused at `point` and kills it (SIGKILL) once it stopped there.
fn kill_at(server: &Server, log: &Path, point: &str, env: &[(&str, &str)]) {
    let mut env = env.to_vec();
    env.push(("TRIP_PAUSE", point));
    let mut child: Child = command(server, log, &env).spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(60));
    let paused = matches!(&line, Ok(l) if *l == format!("paused at {point}"));
    child.kill().unwrap(); // SIGKILL: no destructor, no goodbye to the ledger
    let status = child.wait().unwrap();
    assert!(paused, "expected to pause at {point}, got {line:?}");
    assert!(!status.success());
}

fn lines(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const BOOKED: &[&str] = &[
    "book flight trip-7",
    "book hotel trip-7",
    "book payment trip-7",
];

#[test]
fn killed_between_steps_and_rerun_books_each_step_once() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("providers.log");

    kill_at(&server, &log, "before-hotel", &[]);
    assert_eq!(lines(&log), strings(&["book flight trip-7"]));

    // The rerun waits for the dead run's lease to lapse, reconciles the saga and resumes it.
    let out = run(&server, &log, &[]);
    assert_eq!(out["status"], "booked", "{out}");
    assert_eq!(out["resumed"], true, "{out}");
    assert_eq!(lines(&log), strings(BOOKED));

    let out = run(&server, &log, &[]);
    assert_eq!(out["status"], "replayed", "{out}");
    assert_eq!(
        out["bookings"],
        serde_json::json!(["flight-trip-7", "hotel-trip-7", "payment-trip-7"])
    );
    assert_eq!(lines(&log), strings(BOOKED));
}

#[test]
fn killed_inside_a_step_before_it_acted_and_rerun_takes_the_step_over() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("providers.log");

    // Killed holding the hotel step's lease: the rerun takes the step over once it lapses.
    kill_at(&server, &log, "hotel", &[]);
    assert_eq!(lines(&log), strings(&["book flight trip-7"]));
    let out = run(&server, &log, &[]);
    assert_eq!(out["status"], "booked", "{out}");
    assert_eq!(lines(&log), strings(BOOKED));
}

#[test]
fn killed_while_compensating_and_rerun_cancels_each_booking_once() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("providers.log");
    let declined = [("TRIP_FAIL", "payment")];

    // The payment is declined; the hotel is cancelled, then the run is killed before the
    // flight's cancellation acts.
    kill_at(&server, &log, "undo-flight", &declined);
    let before = [
        "book flight trip-7",
        "book hotel trip-7",
        "declined payment trip-7",
        "cancel hotel hotel-trip-7",
    ];
    assert_eq!(lines(&log), strings(&before));

    // The rerun would now be paid (no TRIP_FAIL), but the payment step's failure is on record:
    // it resumes the rollback. The hotel's cancellation replays; the flight's runs.
    let out = run(&server, &log, &[]);
    assert_eq!(out["status"], "rolled_back", "{out}");
    assert_eq!(out["step"], "payment", "{out}");
    assert_eq!(out["cause"], "payment declined", "{out}");
    let all: Vec<&str> = before
        .iter()
        .copied()
        .chain(["cancel flight flight-trip-7"])
        .collect();
    assert_eq!(lines(&log), strings(&all));

    let out = run(&server, &log, &[]);
    assert_eq!(out["status"], "rolled_back", "{out}");
    assert_eq!(lines(&log), strings(&all));
}

#[test]
fn killed_while_compensating_twice_still_cancels_each_booking_once() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("providers.log");
    let declined = [("TRIP_FAIL", "payment")];

    // Killed before the first cancellation, then again before the second.
    kill_at(&server, &log, "undo-hotel", &declined);
    kill_at(&server, &log, "undo-flight", &[]);
    let out = run(&server, &log, &[]);
    assert_eq!(out["status"], "rolled_back", "{out}");
    assert_eq!(
        lines(&log),
        strings(&[
            "book flight trip-7",
            "book hotel trip-7",
            "declined payment trip-7",
            "cancel hotel hotel-trip-7",
            "cancel flight flight-trip-7",
        ])
    );
}

#[test]
fn a_refused_cancellation_needs_reconciliation_on_every_rerun() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("providers.log");
    let env = [("TRIP_FAIL", "payment"), ("TRIP_FAIL_UNDO", "hotel")];
    let out = run(&server, &log, &env);
    assert_eq!(out["status"], "needs_reconciliation", "{out}");
    assert_eq!(out["step"], "hotel", "{out}");
    let before = lines(&log);
    assert_eq!(before.last().unwrap(), "refused cancel hotel hotel-trip-7");

    // Rerun (the lease lapses first): still stuck at the hotel, and nothing is tried again.
    let out = run(&server, &log, &[]);
    assert_eq!(out["status"], "needs_reconciliation", "{out}");
    assert_eq!(lines(&log), before);
}
