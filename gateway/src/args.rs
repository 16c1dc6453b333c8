//! The gateway's own flags (every one also as `ONCEKEY_GATEWAY_<FLAG>`) and their checks. The
//! ledger connection (`--server`, `--token`, `--tenant`, `--tls-*`) is the client commands' and is
//! handed to [`crate::run`] separately, already turned into connect options.
//!
//! Nothing here does I/O.

use clap::{Args, ValueEnum};
use http::{HeaderName, Method, Uri};
use std::net::SocketAddr;
use std::time::Duration;

/// The longest `--wait` (the ledger holds a Claim at most this long).
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// What happens to a key whose holder vanished mid-request (fixed by the key's first request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SemanticsArg {
    /// Once the lease lapses, the next request with the key goes upstream again.
    AtLeastOnce,
    /// Once the lease lapses, the key answers 409 "outcome unknown" until reconciled.
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
    /// What a key whose holder vanished mid-request does next (fixed by its first request).
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
}

/// A configuration mistake: the message names the flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// The flags, checked and parsed.
#[derive(Debug, Clone)]
pub struct Config {
    /// The raw flags.
    pub args: GatewayArgs,
    /// `--upstream`'s scheme and authority.
    pub upstream_authority: http::uri::Authority,
    /// `--upstream`'s path prefix without a trailing `/` (empty for none).
    pub upstream_prefix: String,
    /// `--methods`.
    pub methods: Vec<Method>,
    /// `--caller-header`.
    pub caller_header: HeaderName,
    /// `--store-headers`, plus `location`.
    pub store_headers: Vec<HeaderName>,
}

/// Headers a proxy must never store or replay as metadata: hop-by-hop fields, the framing of the
/// body (recomputed on replay), the content type (stored on its own) and the replay marker.
const NOT_STORABLE: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
    "content-length",
    "content-type",
    "idempotent-replayed",
];

impl GatewayArgs {
    /// Checks the flags against each other and the ledger's bounds.
    pub fn validate(self) -> Result<Config, ConfigError> {
        let bad = |m: String| Err(ConfigError(m));
        if !valid_namespace(&self.namespace) {
            return bad(format!(
                "--namespace {:?} must match ^[a-z0-9][a-z0-9._-]{{0,127}}$",
                self.namespace
            ));
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.lease) {
            return bad("--lease must be between 1s and 1h".into());
        }
        if self.retention < Duration::from_secs(60) {
            return bad("--retention must be at least 1m".into());
        }
        if self.wait > MAX_WAIT {
            return bad("--wait must be at most 60s".into());
        }
        if self.upstream_timeout.is_zero() {
            return bad("--upstream-timeout must be positive".into());
        }
        if self.max_request_bytes == 0 || self.max_response_bytes == 0 {
            return bad("--max-request-bytes and --max-response-bytes must be positive".into());
        }
        // The ledger client decodes answers of at most 4 MiB, and a replay carries the body.
        if self.max_response_bytes > 3 * 1024 * 1024 {
            return bad("--max-response-bytes must be at most 3145728".into());
        }
        let uri: Uri = self
            .upstream
            .parse()
            .map_err(|e| ConfigError(format!("--upstream {:?}: {e}", self.upstream)))?;
        if uri.scheme_str() != Some("http") {
            return bad(format!(
                "--upstream {:?} must be an http:// address",
                self.upstream
            ));
        }
        let Some(upstream_authority) = uri.authority().cloned() else {
            return bad(format!("--upstream {:?} names no host", self.upstream));
        };
        if uri.query().is_some() {
            return bad(format!(
                "--upstream {:?} must not have a query",
                self.upstream
            ));
        }
        let upstream_prefix = uri.path().trim_end_matches('/').to_owned();
        let mut methods = Vec::new();
        for m in self
            .methods
            .iter()
            .map(|m| m.trim())
            .filter(|m| !m.is_empty())
        {
            let method = Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                .map_err(|_| ConfigError(format!("--methods: {m:?} is not a method")))?;
            methods.push(method);
        }
        if methods.is_empty() {
            return bad("--methods names no method".into());
        }
        let caller_header =
            HeaderName::from_bytes(self.caller_header.trim().as_bytes()).map_err(|_| {
                ConfigError(format!(
                    "--caller-header {:?} is not a header name",
                    self.caller_header
                ))
            })?;
        let mut store_headers = vec![http::header::LOCATION];
        for h in self
            .store_headers
            .iter()
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
        {
            let name = HeaderName::from_bytes(h.as_bytes())
                .map_err(|_| ConfigError(format!("--store-headers: {h:?} is not a header name")))?;
            if NOT_STORABLE.contains(&name.as_str()) {
                return bad(format!(
                    "--store-headers: {name} cannot be stored (it is hop-by-hop, body framing, or stored already)"
                ));
            }
            if !store_headers.contains(&name) {
                store_headers.push(name);
            }
        }
        Ok(Config {
            args: self,
            upstream_authority,
            upstream_prefix,
            methods,
            caller_header,
            store_headers,
        })
    }
}

/// `^[a-z0-9][a-z0-9._-]{0,127}$`, the ledger's namespace rule.
fn valid_namespace(ns: &str) -> bool {
    let bytes = ns.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(b))
}

/// Parses `500ms`, `30s`, `5m`, `24h`, `30d` (or a bare number of seconds), as `oncekey serve`
/// does.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 30s, 5m, 24h or 30d"))?;
    let ms_per_unit: u64 = match unit {
        "ms" => 1,
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?} (use ms, s, m, h or d)"
            ))
        }
    };
    n.checked_mul(ms_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too long"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: GatewayArgs,
    }

    fn parse(extra: &[&str]) -> Result<Config, ConfigError> {
        let mut argv = vec!["gateway", "--upstream", "http://127.0.0.1:9000/api/"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args.validate()
    }

    #[test]
    fn defaults_follow_the_contract() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.methods, vec![Method::POST, Method::PATCH]);
        assert_eq!(c.caller_header, http::header::AUTHORIZATION);
        assert_eq!(c.args.namespace, "http");
        assert_eq!(c.args.lease, Duration::from_secs(30));
        assert_eq!(c.args.retention, Duration::from_secs(86_400));
        assert_eq!(c.args.wait, Duration::ZERO);
        assert_eq!(c.args.max_request_bytes, 1 << 20);
        assert_eq!(c.upstream_prefix, "/api");
        assert_eq!(c.store_headers, vec![http::header::LOCATION]);
    }

    #[test]
    fn bad_flags_are_named() {
        for (flags, flag) in [
            (&["--lease", "2h"][..], "--lease"),
            (&["--wait", "61s"], "--wait"),
            (&["--namespace", "Bad"], "--namespace"),
            (&["--methods", "PO ST"], "--methods"),
            (&["--store-headers", "content-length"], "--store-headers"),
            (&["--store-headers", "Connection"], "--store-headers"),
            (&["--retention", "10s"], "--retention"),
        ] {
            let err = parse(flags).unwrap_err();
            assert!(err.0.contains(flag), "{flags:?}: {err}");
        }
        let https = Cli::parse_from(["gateway", "--upstream", "https://x"])
            .args
            .validate()
            .unwrap_err();
        assert!(https.0.contains("--upstream"), "{https}");
    }

    #[test]
    fn methods_and_store_headers_are_normalized() {
        let c = parse(&[
            "--methods",
            "post, put",
            "--store-headers",
            "ETag,set-cookie",
        ])
        .unwrap();
        assert_eq!(c.methods, vec![Method::POST, Method::PUT]);
        let names: Vec<_> = c.store_headers.iter().map(|h| h.as_str()).collect();
        assert_eq!(names, ["location", "etag", "set-cookie"]);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("24h"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("soon").is_err());
    }
}
