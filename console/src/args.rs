//! The console's own flags (every one also as `ONCEKEY_CONSOLE_<FLAG>`) and their checks. The
//! ledger connection (`--server`, the client TLS flags) is the client commands' and reaches
//! [`crate::run`] separately. Nothing here does I/O but reading the files the flags name.

use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `oncekey console`: the operator console, a web app over the ledger.
#[derive(Debug, Clone, Args)]
pub struct ConsoleArgs {
    /// Address the console listens on (HTTP/1.1 and HTTP/2; HTTPS with --tls-cert/--tls-key).
    #[arg(long, env = "ONCEKEY_CONSOLE_LISTEN", default_value = "127.0.0.1:8088")]
    pub listen: SocketAddr,
    /// PEM certificate chain the console serves HTTPS with.
    #[arg(long, env = "ONCEKEY_CONSOLE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "ONCEKEY_CONSOLE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback --listen (TLS ends in front of the console, e.g. at an
    /// Ingress); without it such a listen address is refused.
    #[arg(long, env = "ONCEKEY_CONSOLE_ALLOW_PLAINTEXT")]
    pub allow_plaintext: bool,
    /// File with the key that seals session cookies: 32 bytes as 64 hex digits. Every replica
    /// behind one load balancer needs the same; without it each process makes its own, and
    /// sessions end when it restarts.
    #[arg(long, env = "ONCEKEY_CONSOLE_SESSION_KEY_FILE")]
    pub session_key_file: Option<PathBuf>,
    /// A session ends after this long without a page view (the live refresh does not count).
    #[arg(long, env = "ONCEKEY_CONSOLE_IDLE_TIMEOUT", default_value = "30m", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// A session ends this long after sign-in, however active.
    #[arg(long, env = "ONCEKEY_CONSOLE_SESSION_LIFETIME", default_value = "12h", value_parser = parse_duration)]
    pub session_lifetime: Duration,
    /// How often the Needs attention page refreshes its lists (1s ..= 10m).
    #[arg(long, env = "ONCEKEY_CONSOLE_REFRESH", default_value = "5s", value_parser = parse_duration)]
    pub refresh: Duration,
    /// The origin browsers reach the console at, e.g. `https://console.example.com`, when it is
    /// not the one the requests' Host header gives (behind a proxy). Cookies are Secure when it
    /// is https.
    #[arg(long, env = "ONCEKEY_CONSOLE_PUBLIC_ORIGIN")]
    pub public_origin: Option<String>,
}

/// A flag is wrong; the message names it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Parses `500ms`, `30s`, `5m`, `24h` (or a bare number of seconds), as `oncekey serve` does.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let ms = oncekey_server::settings::parse_duration(text)?;
    Ok(Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
}

impl ConsoleArgs {
    /// Checks the flags against each other; reads nothing.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.listen.ip().is_loopback() && self.tls_cert.is_none() && !self.allow_plaintext {
            return Err(ConfigError(format!(
                "--listen {}: a non-loopback address needs --tls-cert and --tls-key, or \
                 --allow-plaintext when TLS ends in front of the console (operators sign in with \
                 bearer tokens)",
                self.listen
            )));
        }
        let refresh = Duration::from_secs(1)..=Duration::from_secs(600);
        if !refresh.contains(&self.refresh) {
            return Err(ConfigError(format!(
                "--refresh {:?}: must be 1s ..= 10m",
                self.refresh
            )));
        }
        if self.idle_timeout < Duration::from_secs(1) {
            return Err(ConfigError("--idle-timeout: at least 1s".into()));
        }
        if self.session_lifetime < self.idle_timeout {
            return Err(ConfigError(
                "--session-lifetime: at least --idle-timeout".into(),
            ));
        }
        if let Some(origin) = &self.public_origin {
            crate::guard::parse_origin(origin).ok_or_else(|| {
                ConfigError(format!(
                    "--public-origin {origin}: expected scheme://host[:port], e.g. \
                     https://console.example.com"
                ))
            })?;
        }
        Ok(())
    }

    /// Whether cookies carry `Secure`: served over TLS, or reached over https.
    pub(crate) fn secure_cookies(&self) -> bool {
        self.tls_cert.is_some()
            || self
                .public_origin
                .as_deref()
                .is_some_and(|o| o.starts_with("https://"))
    }
}

/// Reads a session key file: 64 hex digits (surrounding whitespace ignored).
pub(crate) fn read_session_key(path: &std::path::Path) -> Result<[u8; 32], ConfigError> {
    let flag = |e: String| ConfigError(format!("--session-key-file {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| flag(e.to_string()))?;
    let bytes = hex::decode(text.trim()).map_err(|e| flag(format!("not hex: {e}")))?;
    bytes
        .try_into()
        .map_err(|b: Vec<u8>| flag(format!("{} bytes; expected 32 (64 hex digits)", b.len())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ConsoleArgs,
    }

    fn parse(args: &[&str]) -> ConsoleArgs {
        Cli::parse_from(std::iter::once("console").chain(args.iter().copied())).args
    }

    #[test]
    fn a_public_listen_needs_tls_or_the_flag() {
        let e = parse(&["--listen", "0.0.0.0:8088"]).validate().unwrap_err();
        assert!(e.0.contains("--listen 0.0.0.0:8088"), "{e}");
        parse(&["--listen", "0.0.0.0:8088", "--allow-plaintext"])
            .validate()
            .unwrap();
        parse(&["--listen", "127.0.0.1:0"]).validate().unwrap();
    }

    #[test]
    fn bad_values_name_their_flag() {
        let e = parse(&["--refresh", "0s"]).validate().unwrap_err();
        assert!(e.0.starts_with("--refresh"), "{e}");
        let e = parse(&["--public-origin", "console.example"])
            .validate()
            .unwrap_err();
        assert!(e.0.starts_with("--public-origin"), "{e}");
        let e = parse(&["--idle-timeout", "2h", "--session-lifetime", "1h"])
            .validate()
            .unwrap_err();
        assert!(e.0.starts_with("--session-lifetime"), "{e}");
    }

    #[test]
    fn session_keys_are_64_hex_digits() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        std::fs::write(&path, format!("{}\n", "ab".repeat(32))).unwrap();
        assert_eq!(read_session_key(&path).unwrap(), [0xab; 32]);
        std::fs::write(&path, "abcd").unwrap();
        let e = read_session_key(&path).unwrap_err();
        assert!(e.0.contains("2 bytes"), "{e}");
    }
}
