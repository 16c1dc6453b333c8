//! Shared by the client's end-to-end tests: a client for a test server, keys, and an error type
//! whose disposition the test chooses.
#![allow(dead_code)]

use oncekey_client::{
    BreakerPolicy, Client, ConnectOptions, Disposition, Failure, OperationKey, RetryPolicy,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The namespace most tests use.
pub const NS: &str = "tests.client";

/// A dev-mode client for tenant `acme`.
pub async fn client(url: &str) -> Client {
    client_with(url, ConnectOptions::default()).await
}

/// A dev-mode client for tenant `acme` with options.
pub async fn client_with(url: &str, options: ConnectOptions) -> Client {
    Client::connect(
        url,
        ConnectOptions {
            tenant: Some("acme".into()),
            ..options
        },
    )
    .await
    .expect("connect")
}

/// Retries fast and often enough to outlast a server restart; no breaker.
pub fn patient() -> ConnectOptions {
    ConnectOptions {
        retry: RetryPolicy {
            max_attempts: 40,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(400),
        },
        breaker: BreakerPolicy::disabled(),
        ..Default::default()
    }
}

/// `NS/<name>:v1`.
pub fn key(name: &str) -> OperationKey {
    OperationKey::new(NS, [name, "v1"]).unwrap()
}

/// Arguments of a test operation.
#[derive(Debug, Clone, Serialize)]
pub struct Args {
    pub item: String,
    pub quantity: u32,
}

/// `Args` for `item`, quantity 1.
pub fn args(item: &str) -> Args {
    Args {
        item: item.into(),
        quantity: 1,
    }
}

/// Output of a test operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub id: String,
    pub token: u64,
}

/// An error that settles the operation the way the test says.
#[derive(Debug, thiserror::Error)]
#[error("test failure ({0:?})")]
pub struct TestError(pub Disposition);

impl Failure for TestError {
    fn disposition(&self) -> Disposition {
        self.0
    }
    fn code(&self) -> i32 {
        42
    }
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `oncekey serve` on a fixed `listen` address, so that it can be killed and restarted on the same
/// port and data. (`oncekey_tests::Server::start_on` always passes its own `--listen`, and the
/// command line refuses a second one.)
pub struct FixedServer {
    child: Option<std::process::Child>,
    /// `http://ADDR` of the gRPC port.
    pub grpc: String,
}

impl FixedServer {
    /// Starts the server and waits until it listens.
    pub fn start(data_dir: &std::path::Path, listen: &str) -> FixedServer {
        use std::io::BufRead;
        let mut child = std::process::Command::new(oncekey_tests::binary())
            .arg("serve")
            .args([
                "--listen",
                listen,
                "--admin-listen",
                "127.0.0.1:0",
                "--data-dir",
            ])
            .arg(data_dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn oncekey");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        assert!(
            line.contains("grpc="),
            "oncekey serve did not start: {line:?}"
        );
        FixedServer {
            child: Some(child),
            grpc: format!("http://{listen}"),
        }
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for FixedServer {
    fn drop(&mut self) {
        self.kill9();
    }
}
