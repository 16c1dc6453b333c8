//! `examples/charge.rs` killed (SIGKILL) right after the fake provider charged, then rerun: the
//! provider counts exactly one charge, the rerun reconciles and prints that charge, and a third run
//! replays it.

use oncekey_tests::Server;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// target/<profile>/examples/charge, next to this test's target/<profile>/deps/<exe>.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let path = profile_dir.join("examples").join("charge");
    if !path.exists() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-p", "oncekey-client", "--example", "charge"])
            .status()
            .expect("cargo build --example charge");
        assert!(status.success());
    }
    assert!(path.exists(), "missing {}", path.display());
    path
}

fn command(server: &Server, provider: &Path, delay_ms: u64) -> Command {
    let mut cmd = Command::new(example());
    cmd.args(["order-1042", "1999"])
        .env("ONCEKEY_SERVER", &server.grpc)
        .env("ONCEKEY_TENANT", "shop")
        .env("CHARGE_PROVIDER_FILE", provider)
        .env("CHARGE_PROVIDER_DELAY_MS", delay_ms.to_string())
        .env("CHARGE_LEASE_MS", "1000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn charges(provider: &Path) -> Vec<String> {
    std::fs::read_to_string(provider)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn run(cmd: &mut Command) -> (String, Output) {
    let out = cmd.output().expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "example failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (stdout, out)
}

#[test]
fn killed_mid_charge_and_rerun_charges_exactly_once() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let provider = dir.path().join("charges.tsv");

    // First run: the provider charges, then hangs; the process is killed before it hears back.
    let mut first = command(&server, &provider, 60_000).spawn().unwrap();
    let started = Instant::now();
    while charges(&provider).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the first run never charged"
        );
        if let Some(status) = first.try_wait().unwrap() {
            panic!("the first run exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let charged = charges(&provider);
    assert_eq!(charged.len(), 1);
    let charge_id = charged[0].split('\t').next().unwrap().to_owned();

    // Rerun: the operation's outcome is unknown; the example asks the provider and records it.
    let (stdout, _) = run(&mut command(&server, &provider, 0));
    assert!(stdout.contains(r#""status":"reconciled""#), "{stdout}");
    assert!(
        stdout.contains(&format!(r#""charge_id":"{charge_id}""#)),
        "{stdout}"
    );
    assert_eq!(charges(&provider).len(), 1, "never charged twice");

    // And again: the stored receipt is replayed.
    let (stdout, _) = run(&mut command(&server, &provider, 0));
    assert!(stdout.contains(r#""status":"replayed""#), "{stdout}");
    assert!(
        stdout.contains(&format!(r#""charge_id":"{charge_id}""#)),
        "{stdout}"
    );
    assert_eq!(charges(&provider).len(), 1);
}

#[test]
fn a_clean_run_charges_and_a_rerun_replays() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let provider = dir.path().join("charges.tsv");
    let (stdout, _) = run(&mut command(&server, &provider, 0));
    assert!(stdout.contains(r#""status":"charged""#), "{stdout}");
    assert!(stdout.contains(r#""charge_id":"ch_000001""#), "{stdout}");
    let (stdout, _) = run(&mut command(&server, &provider, 0));
    assert!(stdout.contains(r#""status":"replayed""#), "{stdout}");
    assert_eq!(charges(&provider).len(), 1);
}
