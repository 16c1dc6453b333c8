//! The checks of the gateway's flags ([`GatewayArgs::validate`]) and the [`Config`] they give: each
//! mistake is one message naming the flag (the command line exits with code 64 on it).
//!
//! Nothing here does I/O, except reading the descriptor soft limit for the default
//! `--max-connections`.

use crate::args::{GatewayArgs, SemanticsArg, MAX_WAIT};
use http::{HeaderName, Method, Uri};
use std::time::Duration;

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
    /// `--retryable-status`, sorted, without repeats.
    pub retryable_status: Vec<u16>,
    /// `--max-connections`, or its default.
    pub max_connections: usize,
}

impl Config {
    /// True when new keys are claimed at most once.
    pub fn at_most_once(&self) -> bool {
        self.args.semantics == SemanticsArg::AtMostOnce
    }
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

fn bad<T>(message: String) -> Result<T, ConfigError> {
    Err(ConfigError(message))
}

impl GatewayArgs {
    /// Checks the flags against each other and the ledger's bounds.
    pub fn validate(self) -> Result<Config, ConfigError> {
        self.check_bounds()?;
        let (upstream_authority, upstream_prefix) = self.upstream()?;
        let methods = self.methods()?;
        let caller_header = self.caller_header()?;
        let store_headers = self.store_headers()?;
        let retryable_status = self.retryable_status()?;
        let max_connections = match self.max_connections {
            Some(0) => return bad("--max-connections must be at least 1".into()),
            Some(n) => n,
            None => oncekey_server::conn::default_max_connections(
                oncekey_server::conn::descriptor_soft_limit(),
            ),
        };
        Ok(Config {
            args: self,
            upstream_authority,
            upstream_prefix,
            methods,
            caller_header,
            store_headers,
            retryable_status,
            max_connections,
        })
    }

    fn check_bounds(&self) -> Result<(), ConfigError> {
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
        for (flag, value) in [
            ("--upstream-timeout", self.upstream_timeout),
            ("--header-read-timeout", self.header_read_timeout),
            ("--idle-timeout", self.idle_timeout),
        ] {
            if value.is_zero() {
                return bad(format!("{flag} must be positive"));
            }
        }
        if self.max_request_bytes == 0 || self.max_response_bytes == 0 {
            return bad("--max-request-bytes and --max-response-bytes must be positive".into());
        }
        // The ledger client decodes answers of at most 4 MiB, and a replay carries the body.
        if self.max_response_bytes > 3 * 1024 * 1024 {
            return bad("--max-response-bytes must be at most 3145728".into());
        }
        Ok(())
    }

    /// `--upstream`'s authority and path prefix.
    fn upstream(&self) -> Result<(http::uri::Authority, String), ConfigError> {
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
        let Some(authority) = uri.authority().cloned() else {
            return bad(format!("--upstream {:?} names no host", self.upstream));
        };
        if uri.query().is_some() {
            return bad(format!(
                "--upstream {:?} must not have a query",
                self.upstream
            ));
        }
        Ok((authority, uri.path().trim_end_matches('/').to_owned()))
    }

    fn methods(&self) -> Result<Vec<Method>, ConfigError> {
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
        Ok(methods)
    }

    fn caller_header(&self) -> Result<HeaderName, ConfigError> {
        let name = HeaderName::from_bytes(self.caller_header.trim().as_bytes()).map_err(|_| {
            ConfigError(format!(
                "--caller-header {:?} is not a header name",
                self.caller_header
            ))
        })?;
        // Keys are scoped to what the upstream sees, and a hop-by-hop field never reaches it.
        if crate::headers::HOP_BY_HOP.contains(&name) {
            return bad(format!(
                "--caller-header {name} is a hop-by-hop header, which never reaches the upstream"
            ));
        }
        Ok(name)
    }

    fn store_headers(&self) -> Result<Vec<HeaderName>, ConfigError> {
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
        Ok(store_headers)
    }

    fn retryable_status(&self) -> Result<Vec<u16>, ConfigError> {
        let mut codes = Vec::new();
        for text in self
            .retryable_status
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
        {
            match text.parse::<u16>() {
                Ok(code) if (100..=599).contains(&code) => codes.push(code),
                _ => {
                    return bad(format!(
                        "--retryable-status: {text:?} is not an HTTP status code (100..=599)"
                    ))
                }
            }
        }
        codes.sort_unstable();
        codes.dedup();
        Ok(codes)
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
        assert!(c.retryable_status.is_empty());
        assert!(!c.at_most_once());
        assert_eq!(c.args.header_read_timeout, Duration::from_secs(10));
        assert_eq!(c.args.idle_timeout, Duration::from_secs(60));
        assert_eq!(
            c.max_connections,
            oncekey_server::conn::default_max_connections(
                oncekey_server::conn::descriptor_soft_limit()
            )
        );
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
            (&["--retryable-status", "503,99"], "--retryable-status"),
            (&["--retryable-status", "600"], "--retryable-status"),
            (&["--retryable-status", "5xx"], "--retryable-status"),
            (&["--max-connections", "0"], "--max-connections"),
            (&["--header-read-timeout", "0s"], "--header-read-timeout"),
            (&["--idle-timeout", "0s"], "--idle-timeout"),
            (
                &["--caller-header", "Proxy-Authorization"],
                "--caller-header",
            ),
            (&["--caller-header", "connection"], "--caller-header"),
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
    fn methods_store_headers_and_statuses_are_normalized() {
        let c = parse(&[
            "--methods",
            "post, put",
            "--store-headers",
            "ETag,set-cookie",
            "--retryable-status",
            " 503,429,503,100,599",
            "--max-connections",
            "7",
        ])
        .unwrap();
        assert_eq!(c.methods, vec![Method::POST, Method::PUT]);
        let names: Vec<_> = c.store_headers.iter().map(|h| h.as_str()).collect();
        assert_eq!(names, ["location", "etag", "set-cookie"]);
        assert_eq!(c.retryable_status, [100, 429, 503, 599]);
        assert_eq!(c.max_connections, 7);
    }
}
