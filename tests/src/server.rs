//! The real `oncekey` binary under test: where it is, `oncekey serve` on free ports (started,
//! killed, stopped, restarted: see also `restart`), and any other command run to completion. A
//! server that cannot start fails the test loudly with its stderr.

use oncekey_client::{Client, ConnectOptions, LedgerRpc};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The `oncekey` binary under test: `$ONCEKEY_BIN`, or `oncekey` in the cargo target directory
/// these tests were built into. `cargo test --workspace` builds it (the `oncekey` crate has
/// integration tests, so cargo builds its binary first); when a narrower run did not, it is built
/// here once, with `cargo build -p oncekey` for the same profile. A binary that is there is used
/// as it is: after changing the server, `cargo build -p oncekey` (or test the whole workspace).
pub fn binary() -> PathBuf {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY
        .get_or_init(|| {
            if let Some(path) = std::env::var_os("ONCEKEY_BIN") {
                return PathBuf::from(path);
            }
            // target/<profile>/deps/<test-exe> → target/<profile>/oncekey
            let exe = std::env::current_exe().expect("current exe");
            let profile_dir = exe.parent().and_then(Path::parent).expect("target dir");
            let path = profile_dir.join("oncekey");
            if !path.exists() {
                build_binary(profile_dir);
            }
            assert!(
                path.exists(),
                "the oncekey binary is missing at {}: build it (cargo build -p oncekey) or set ONCEKEY_BIN",
                path.display()
            );
            path
        })
        .clone()
}

/// `cargo build -p oncekey` into the target directory holding `profile_dir`.
fn build_binary(profile_dir: &Path) {
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev",
        Some(other) => other,
    };
    let target_dir = profile_dir.parent().expect("target dir");
    eprintln!("oncekey-tests: building the oncekey binary ({profile} profile)");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--locked",
            "-p",
            "oncekey",
            "--bin",
            "oncekey",
            "--profile",
        ])
        .arg(profile)
        .arg("--target-dir")
        .arg(target_dir)
        .status()
        .expect("run cargo build -p oncekey");
    assert!(status.success(), "cargo build -p oncekey failed");
}

/// A running `oncekey serve`.
pub struct Server {
    pub(crate) child: Option<Child>,
    /// `http://ADDR` of the gRPC port.
    pub grpc: String,
    /// `http://ADDR` of the admin port.
    pub admin: String,
    /// The embedded store's directory.
    pub data_dir: PathBuf,
    stderr_path: PathBuf,
    pub(crate) _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts a server on a fresh data directory with extra flags.
    pub fn start(extra: &[&str]) -> Server {
        Self::start_with(extra, &[])
    }

    /// Starts a server on a fresh data directory with extra flags and environment variables
    /// (e.g. the test-only `ONCEKEY_TEST_*` knobs).
    pub fn start_with(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let data_dir = dir.path().join("data");
        let mut server = Self::spawn(&data_dir, extra, env, None);
        server._dir = Some(dir);
        server
    }

    /// Starts a server on `data_dir` (kept by the caller, e.g. across a restart).
    pub fn start_on(data_dir: &Path, extra: &[&str]) -> Server {
        Self::start_with_env(data_dir, extra, &[])
    }

    /// Starts a server on `data_dir` with extra flags and environment variables.
    pub fn start_with_env(data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
        Self::spawn(data_dir, extra, env, None)
    }

    /// Starts a server on `data_dir` that may not grow any file past `limit_kib` KiB (the
    /// file-size resource limit, `ulimit -f`), the way a full disk looks to the store. The signal
    /// is left as the shell has it (SIGXFSZ's default action ends the process): the server must
    /// handle it itself.
    pub fn start_with_file_limit(data_dir: &Path, extra: &[&str], limit_kib: u64) -> Server {
        Self::spawn(data_dir, extra, &[], Some(format!("-f {limit_kib}")))
    }

    /// Starts a server on a fresh data directory that may hold at most `limit` open file
    /// descriptors (`ulimit -n`).
    pub fn start_with_descriptor_limit(extra: &[&str], limit: u64) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let data_dir = dir.path().join("data");
        let mut server = Self::spawn(&data_dir, extra, &[], Some(format!("-n {limit}")));
        server._dir = Some(dir);
        server
    }

    pub(crate) fn spawn(
        data_dir: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
        ulimit: Option<String>,
    ) -> Server {
        let stderr_path = data_dir.with_extension(format!(
            "stderr-{}",
            std::process::id() as u64 * 1000 + nonce()
        ));
        let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
        // Free ports unless the caller chose them (e.g. to restart on the same port).
        let mut defaults = Vec::new();
        for flag in ["--listen", "--admin-listen"] {
            if !extra.contains(&flag) {
                defaults.extend([flag, "127.0.0.1:0"]);
            }
        }
        let mut command = match ulimit {
            None => Command::new(binary()),
            Some(limit) => {
                // bash's `ulimit` (`-f` counts KiB); `exec` keeps the pid, so kill/terminate
                // still work.
                let mut c = Command::new("bash");
                c.arg("-c")
                    .arg(format!(r#"ulimit {limit} && exec "$0" "$@""#))
                    .arg(binary());
                c
            }
        };
        let sealed = sealed_flags(data_dir, extra);
        let mut child = command
            .arg("serve")
            .args(defaults)
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
            .args(&sealed)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn oncekey");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(|a| format!("http://{a}"))
        };
        match (field("grpc="), field("admin=")) {
            (Some(grpc), Some(admin)) => Server {
                child: Some(child),
                grpc,
                admin,
                data_dir: data_dir.to_owned(),
                stderr_path,
                _dir: None,
            },
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "oncekey serve did not start; stderr:\n{}",
                    read(&stderr_path)
                );
            }
        }
    }

    /// A client for `tenant` (dev mode: the tenant header).
    pub async fn client(&self, tenant: &str) -> LedgerRpc {
        self.connect(ConnectOptions {
            tenant: Some(tenant.into()),
            ..Default::default()
        })
        .await
    }

    /// A client with a bearer token.
    pub async fn client_with_token(&self, token: &str) -> LedgerRpc {
        self.connect(ConnectOptions {
            token: Some(token.into()),
            ..Default::default()
        })
        .await
    }

    /// A client with explicit options.
    pub async fn connect(&self, options: ConnectOptions) -> LedgerRpc {
        Client::connect(&self.grpc, options)
            .await
            .expect("connect")
            .ledger()
    }

    /// `kill -9`: no chance to flush anything.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("wait");
        }
    }

    /// SIGTERM, then waits (at most `timeout`) for the exit status.
    pub fn terminate(&mut self, timeout: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("running");
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("kill -TERM");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "oncekey did not exit within {timeout:?} of SIGTERM; stderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's process id (e.g. to send it SIGHUP or read its memory use).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// What the server wrote to stderr so far.
    pub fn stderr(&self) -> String {
        read(&self.stderr_path)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(&self.stderr_path);
    }
}

fn read(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text
}

/// With `ONCEKEY_TEST_SEALED=1` (scripts/test runs the contract suite so), every server the
/// harness starts seals what it stores and hashes keys (docs/api.md#data-protection): a key ring
/// made once per data directory, beside it (a restart on the same directory reads the same
/// ring), and `--key-privacy hmac`. Not when the test chose its own `--encryption-keys`.
fn sealed_flags(data_dir: &Path, extra: &[&str]) -> Vec<String> {
    if std::env::var("ONCEKEY_TEST_SEALED").as_deref() != Ok("1")
        || extra.contains(&"--encryption-keys")
    {
        return Vec::new();
    }
    let ring = data_dir.with_extension("keyring");
    if !ring.exists() {
        let mut lines = String::new();
        for args in [["--id", "k1", "--primary"], ["--id", "names", "--hmac"]] {
            let (code, stdout, stderr) = run_cli(&[&["new-key"][..], &args].concat());
            assert_eq!(code, 0, "new-key: {stderr}");
            lines.push_str(&stdout);
        }
        std::fs::write(&ring, lines).expect("write the test key ring");
    }
    vec![
        "--encryption-keys".into(),
        ring.display().to_string(),
        "--key-privacy".into(),
        "hmac".into(),
    ]
}

fn nonce() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Runs `oncekey` with `args` to completion: (exit code, stdout, stderr).
pub fn run_cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary())
        .args(args)
        .output()
        .expect("run oncekey");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
