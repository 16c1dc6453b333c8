//! The gateway's own flags (every one also as `ONCEKEY_GATEWAY_<FLAG>`); their checks are in
//! `config`. The ledger connection (`--server`, `--token`, `--tenant`, `--tls-*`) is the client
//! commands' and is handed to [`crate::run`] separately, already turned into connect options.
//!
//! Nothing here does I/O.

use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::time::Duration;

/// The longest `--wait` (the ledger holds a Claim at most this long).
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// What the gateway does with a key whose request may have reached the upstream without a
/// stored answer (fixed by the key's first request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SemanticsArg {
    /// A request whose outcome is uncertain (timeout, broken connection) and 5xx, 408, 425, 429
    /// answers release the key: the next request with it goes upstream again.
    AtLeastOnce,
    /// Once a request may have reached the upstream, the key is never forwarded again by the
    /// gateway: an uncertain outcome answers 409 "outcome unknown" until reconciled, and every
    /// complete answer is stored (except `--retryable-status`).
    AtMostOnce,
}

/// `oncekey gateway`: an Idempotency-Key reverse proxy in front of one upstream HTTP service.
#[derive(Debug, Clone, Args)]
pub struct GatewayArgs {
    /// Address the proxy listens on (HTTP/1.1 and cleartext HTTP/2).
    #[arg(long, env = "ONCEKEY_GATEWAY_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Admin HTTP address: /metrics, /healthz, /readyz.
    #[arg(
        long,
        env = "ONCEKEY_GATEWAY_ADMIN_LISTEN",
        default_value = "127.0.0.1:9091"
    )]
    pub admin_listen: SocketAddr,
    /// The upstream service, `http://HOST:PORT[/base-path]`.
    #[arg(long, env = "ONCEKEY_GATEWAY_UPSTREAM")]
    pub upstream: String,
    /// The ledger namespace the keys are claimed in.
    #[arg(long, env = "ONCEKEY_GATEWAY_NAMESPACE", default_value = "http")]
    pub namespace: String,
    /// Methods that get Idempotency-Key semantics (comma-separated); others pass through.
    #[arg(
        long,
        env = "ONCEKEY_GATEWAY_METHODS",
        value_delimiter = ',',
        default_value = "POST,PATCH"
    )]
    pub methods: Vec<String>,
    /// The request header naming the caller; keys are scoped to its value (empty when absent).
    #[arg(
        long,
        env = "ONCEKEY_GATEWAY_CALLER_HEADER",
        default_value = "authorization"
    )]
    pub caller_header: String,
    /// What a key whose request had an uncertain outcome does next (fixed by its first request).
    #[arg(
        long,
        env = "ONCEKEY_GATEWAY_SEMANTICS",
        value_enum,
        default_value = "at-least-once"
    )]
    pub semantics: SemanticsArg,
    /// Answer 400 to a request of a --methods method without an Idempotency-Key.
    #[arg(long, env = "ONCEKEY_GATEWAY_REQUIRE_KEY")]
    pub require_key: bool,
    /// Lease of a forwarded request (1s ..= 1h), kept alive while the upstream works.
    #[arg(long, env = "ONCEKEY_GATEWAY_LEASE", default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// How long a stored response is replayed (at least 1m; at most the ledger's --max-retention).
    #[arg(long, env = "ONCEKEY_GATEWAY_RETENTION", default_value = "24h", value_parser = parse_duration)]
    pub retention: Duration,
    /// Hold a request whose key is in flight up to this long (at most 60s), then replay; 0 answers
    /// 409 at once.
    #[arg(long, env = "ONCEKEY_GATEWAY_WAIT", default_value = "0s", value_parser = parse_duration)]
    pub wait: Duration,
    /// How long the upstream may take to answer a request (status line and stored body).
    #[arg(long, env = "ONCEKEY_GATEWAY_UPSTREAM_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub upstream_timeout: Duration,
    /// Response headers stored and replayed besides content-type and location (comma-separated).
    #[arg(long, env = "ONCEKEY_GATEWAY_STORE_HEADERS", value_delimiter = ',')]
    pub store_headers: Vec<String>,
    /// Largest request body of a keyed request, in bytes (413 beyond).
    #[arg(long, env = "ONCEKEY_GATEWAY_MAX_REQUEST_BYTES", default_value_t = 1024 * 1024)]
    pub max_request_bytes: usize,
    /// Largest response body stored, in bytes: keep it equal to the ledger's --max-result-bytes.
    /// A larger response is returned once and its key fails with 507.
    #[arg(long, env = "ONCEKEY_GATEWAY_MAX_RESPONSE_BYTES", default_value_t = 1024 * 1024)]
    pub max_response_bytes: usize,
    /// How long SIGTERM waits for requests in flight before exiting anyway.
    #[arg(long, env = "ONCEKEY_GATEWAY_DRAIN_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// Upstream statuses that mean "nothing happened, try again" (comma-separated, 100..=599): the
    /// key is Failed RETRYABLE instead of storing the answer, in either semantics.
    #[arg(long, env = "ONCEKEY_GATEWAY_RETRYABLE_STATUS", value_delimiter = ',')]
    pub retryable_status: Vec<String>,
    /// Most client connections open at once (default: the lower of 10000 and 80% of the
    /// descriptor soft limit); beyond it new connections are closed at once.
    #[arg(long, env = "ONCEKEY_GATEWAY_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// How long a client has to send a whole request head (from connecting, or from the first
    /// byte of a later request on a kept-alive connection); then the connection is closed.
    #[arg(long, env = "ONCEKEY_GATEWAY_HEADER_READ_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub header_read_timeout: Duration,
    /// How long a client connection may stay open with no request on it; then it is closed.
    #[arg(long, env = "ONCEKEY_GATEWAY_IDLE_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
}

/// Parses `500ms`, `30s`, `5m`, `24h`, `30d` (or a bare number of seconds): `oncekey serve`'s
/// parser (`oncekey_server::settings::parse_duration`), as a `Duration`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let ms = oncekey_server::settings::parse_duration(text)?;
    // Digits only, so never negative.
    Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("soon").is_err());
    }
}
