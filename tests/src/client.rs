//! Fixtures of the Rust client's tests (`client/rust/tests/`): a client for a test server, retry
//! options that outlast a restart, keys, arguments and outputs of a test operation, and an error
//! type whose disposition the test chooses. Servers come from `crate::Server`.

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
    /// What is ordered.
    pub item: String,
    /// How many.
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
    /// The operation's own id.
    pub id: String,
    /// The fencing token it ran under.
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
