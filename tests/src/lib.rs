//! The end-to-end harness: starts the real `oncekey` binary on free ports, connects gRPC clients to
//! it, and kills or stops it. A test that cannot start the server fails loudly with its stderr.
//!
//! The binary is `$ONCEKEY_BIN`, or `oncekey` in the cargo target directory these tests were built
//! into (the test command builds it first).

pub mod drivers;
mod restart;

pub use restart::free_addr;

use oncekey_api::v1;
use oncekey_client::{Client, ConnectOptions, LedgerRpc};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tonic_types::StatusExt;

mod mount;
pub use mount::SecretMount;

/// The `oncekey` binary under test.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("ONCEKEY_BIN") {
        return PathBuf::from(path);
    }
    // target/<profile>/deps/<test-exe> → target/<profile>/oncekey
    let exe = std::env::current_exe().expect("current exe");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .join("oncekey");
    assert!(
        path.exists(),
        "the oncekey binary is missing at {}: build it first (cargo build -p oncekey-server) or set ONCEKEY_BIN",
        path.display()
    );
    path
}

/// A running `oncekey serve`.
pub struct Server {
    child: Option<Child>,
    /// `http://ADDR` of the gRPC port.
    pub grpc: String,
    /// `http://ADDR` of the admin port.
    pub admin: String,
    /// The embedded store's directory.
    pub data_dir: PathBuf,
    stderr_path: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Starts a server on a fresh data directory with extra flags.
    pub fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let data_dir = dir.path().join("data");
        let mut server = Self::start_on(&data_dir, extra);
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

    fn spawn(
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
        let mut child = command
            .arg("serve")
            .args(defaults)
            .arg("--data-dir")
            .arg(data_dir)
            .args(extra)
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

/// The ErrorInfo reason of a status (panics if the status has none: every error must carry one).
pub fn reason(status: &tonic::Status) -> String {
    let info = status
        .get_details_error_info()
        .unwrap_or_else(|| panic!("status without ErrorInfo: {status:?}"));
    assert_eq!(info.domain, oncekey_api::ERROR_DOMAIN);
    info.reason
}

/// The field a BadRequest names.
pub fn bad_field(status: &tonic::Status) -> String {
    let bad = status
        .get_details_bad_request()
        .unwrap_or_else(|| panic!("INVALID_ARGUMENT without BadRequest: {status:?}"));
    bad.field_violations
        .first()
        .expect("a violation")
        .field
        .clone()
}

/// A Claim with `payload_json`.
pub fn claim(ns: &str, key: &str, payload: &str) -> v1::ClaimRequest {
    v1::ClaimRequest {
        namespace: ns.into(),
        key: key.into(),
        arguments: Some(v1::claim_request::Arguments::PayloadJson(payload.into())),
        owner: "e2e".into(),
        ..Default::default()
    }
}

/// A protobuf Duration of `ms` milliseconds.
pub fn ms(ms: i64) -> prost_types::Duration {
    prost_types::Duration {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    }
}

/// An OperationResult with `body`.
pub fn result(code: i32, body: &[u8]) -> v1::OperationResult {
    v1::OperationResult {
        code,
        body: body.to_vec(),
        content_type: "application/json".into(),
        ..Default::default()
    }
}

/// A Complete of `key` with `token`.
pub fn complete(ns: &str, key: &str, token: u64, res: v1::OperationResult) -> v1::CompleteRequest {
    v1::CompleteRequest {
        namespace: ns.into(),
        key: key.into(),
        lease_token: token,
        result: Some(res),
    }
}

/// A Fail of `key` with `token`.
pub fn fail(
    ns: &str,
    key: &str,
    token: u64,
    disposition: v1::Disposition,
    message: &str,
) -> v1::FailRequest {
    v1::FailRequest {
        namespace: ns.into(),
        key: key.into(),
        lease_token: token,
        error: Some(v1::OperationError {
            code: 1,
            message: message.into(),
            details: vec![],
        }),
        disposition: disposition as i32,
    }
}

/// A Lookup of `key`.
pub fn lookup(ns: &str, key: &str) -> v1::LookupRequest {
    v1::LookupRequest {
        namespace: ns.into(),
        key: key.into(),
        include_history: false,
    }
}

/// The outcome of a Claim response.
pub fn outcome(r: &v1::ClaimResponse) -> v1::ClaimOutcome {
    v1::ClaimOutcome::try_from(r.outcome).expect("known outcome")
}

/// The status of a record.
pub fn status(r: &v1::Record) -> v1::RecordStatus {
    v1::RecordStatus::try_from(r.status).expect("known status")
}

/// A minimal HTTP/1.1 GET of `path` on `base` (`http://ADDR`): (status code, body).
pub async fn http_get(base: &str, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (code, body)
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl is installed");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.pem`), a server certificate for localhost/127.0.0.1 (`server.pem`, `server.key`)
/// and a client certificate (`client.pem`, `client.key`) in `dir`, made with the openssl command.
pub fn make_certificates(dir: &Path) {
    make_certificates_valid_for(dir, 2);
}

/// `make_certificates` with certificates valid for `days` days from now.
pub fn make_certificates_valid_for(dir: &Path, days: u32) {
    let days = days.to_string();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec![
        "req",
        "-x509",
        "-days",
        &days,
        "-subj",
        "/CN=oncekey test CA",
    ];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(dir, &ca);
    for (name, ext) in [
        (
            "server",
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ),
        ("client", "extendedKeyUsage=clientAuth\n"),
    ] {
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        let (key, csr, pem, extfile) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        let mut req = vec!["req", "-subj"];
        let subject = format!("/CN={name}");
        req.push(&subject);
        req.extend(ec);
        req.extend(["-keyout", &key, "-out", &csr]);
        openssl(dir, &req);
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                &days,
                "-extfile",
                &extfile,
                "-out",
                &pem,
            ],
        );
    }
}

/// The value of the sample `series` (name with its labels, as exposed) in Prometheus text.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// `scripts/cassandra COMMAND` with extra environment (e.g. another port); panics with its output
/// unless it succeeds; returns its last stdout line (`start` prints the node's address there).
pub fn cassandra(env: &[(String, String)], command: &str) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/cassandra");
    let out = Command::new(script)
        .arg(command)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script} {command} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().trim().to_owned()
}

/// Contact point of the shared test node: `$ONCEKEY_TEST_CQL_NODES` (the test command starts the
/// node and says where), or a local node started once per process. Never skips: no node, panic.
pub fn cql_node() -> &'static str {
    static NODE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NODE.get_or_init(|| match std::env::var("ONCEKEY_TEST_CQL_NODES") {
        Ok(nodes) if !nodes.trim().is_empty() => nodes.trim().to_owned(),
        _ => cassandra(&[], "start"),
    })
}

/// A node of its own that speaks CQL over TLS only and requires client certificates
/// (`scripts/cassandra` with `ONCEKEY_CASSANDRA_TLS`): its address and the directory holding
/// `ca.pem`, `client.pem`, `client.key` and `other-ca.pem`. `$ONCEKEY_TEST_CQL_TLS_NODES` and
/// `$ONCEKEY_TEST_CQL_TLS_DIR` when the test command started it, else started once per process
/// on `$ONCEKEY_TLS_CQL_PORT` (default 9142) and `$ONCEKEY_TLS_CQL_STORAGE_PORT` (7142), never
/// the shared node's ports. Never skips: no node, panic.
pub fn cql_tls_node() -> &'static (String, PathBuf) {
    static NODE: std::sync::OnceLock<(String, PathBuf)> = std::sync::OnceLock::new();
    NODE.get_or_init(|| {
        let given = (
            std::env::var("ONCEKEY_TEST_CQL_TLS_NODES"),
            std::env::var("ONCEKEY_TEST_CQL_TLS_DIR"),
        );
        if let (Ok(nodes), Ok(dir)) = given {
            if !nodes.trim().is_empty() && !dir.trim().is_empty() {
                return (nodes.trim().to_owned(), PathBuf::from(dir.trim()));
            }
        }
        let port = std::env::var("ONCEKEY_TLS_CQL_PORT").unwrap_or_else(|_| "9142".into());
        let storage =
            std::env::var("ONCEKEY_TLS_CQL_STORAGE_PORT").unwrap_or_else(|_| "7142".into());
        let dir = PathBuf::from(format!("/tmp/oncekey-cassandra-{port}-tls"));
        let env = [
            ("ONCEKEY_CQL_PORT".to_owned(), port),
            ("ONCEKEY_CQL_STORAGE_PORT".to_owned(), storage),
            (
                "ONCEKEY_CASSANDRA_TLS".to_owned(),
                dir.display().to_string(),
            ),
            ("ONCEKEY_CASSANDRA_HEAP".to_owned(), "512m".to_owned()),
        ];
        (cassandra(&env, "start"), dir)
    })
}

/// A fresh keyspace on `node`, migrated with the real `oncekey migrate`; named `oncekey_t_…` so
/// the CQL store's tests drop it once stale.
pub fn migrated_keyspace(node: &str) -> String {
    migrated_keyspace_with(node, &[])
}

/// `migrated_keyspace` with extra `oncekey migrate` flags (e.g. TLS to the node).
pub fn migrated_keyspace_with(node: &str, extra: &[&str]) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock");
    let keyspace = format!(
        "oncekey_t_{}_{:x}_{:x}_{}",
        now.as_secs(),
        std::process::id(),
        now.subsec_nanos(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let mut args = vec![
        "migrate",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
        "--cql-replication",
        "SimpleStrategy:1",
    ];
    args.extend_from_slice(extra);
    let (code, stdout, stderr) = run_cli(&args);
    assert_eq!(code, 0, "migrate failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("0001_ledger applied"), "{stdout}");
    keyspace
}
