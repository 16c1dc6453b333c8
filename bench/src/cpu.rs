//! CPU time per measured operation, for both ends: the bench's own process (from `/proc/self`)
//! and, with `--server-metrics`, the server's (its `process_cpu_seconds_total`). On a machine
//! whose load moves the throughput, CPU per operation is the steadier number, and on a shared
//! machine it says how the cores were split between client and server.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where to read the server's CPU time from.
#[derive(Clone, Default)]
pub struct Probe {
    /// `http://HOST:PORT/PATH` of the server's Prometheus metrics.
    server_metrics: Option<String>,
    /// `HOST:PORT` of a Redis peer, whose CPU time INFO reports.
    redis: Option<String>,
}

/// CPU seconds used so far by each end (`None`: not measurable).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub client: Option<f64>,
    pub server: Option<f64>,
}

/// CPU seconds used during a measurement, by each end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Used {
    pub client: Option<f64>,
    pub server: Option<f64>,
}

impl Probe {
    /// Reads the server's CPU time from `server_metrics` (when given).
    pub fn new(server_metrics: Option<String>) -> Self {
        Self {
            server_metrics,
            redis: None,
        }
    }

    /// The CPU time of the Redis server at `HOST:PORT` in the server's place.
    pub fn redis(addr: &str) -> Self {
        Self {
            server_metrics: None,
            redis: Some(addr.to_owned()),
        }
    }

    /// The same probe without the server (a peer database or raw CQL is not that server).
    pub fn client_only(&self) -> Self {
        Self::default()
    }

    /// CPU time used so far.
    pub async fn sample(&self) -> Sample {
        let server = match (&self.server_metrics, &self.redis) {
            (Some(url), _) => server_cpu_seconds(url).await,
            (None, Some(addr)) => super::peers::redis::cpu_seconds(addr).await,
            (None, None) => None,
        };
        Sample {
            client: oncekey_server::telemetry::process::cpu_seconds(),
            server,
        }
    }
}

impl Used {
    /// Both measurements' CPU time (unknown when either end is unknown in either).
    pub fn plus(self, other: Used) -> Self {
        let add = |a: Option<f64>, b: Option<f64>| Some(a? + b?);
        Self {
            client: add(self.client, other.client),
            server: add(self.server, other.server),
        }
    }

    /// What was used between two samples.
    pub fn between(before: Sample, after: Sample) -> Self {
        let diff = |a: Option<f64>, b: Option<f64>| Some(b? - a?).filter(|d| *d >= 0.0);
        Self {
            client: diff(before.client, after.client),
            server: diff(before.server, after.server),
        }
    }
}

/// `process_cpu_seconds_total` from the Prometheus text at `url` (plain HTTP), or `None` when it
/// cannot be read in a second.
async fn server_cpu_seconds(url: &str) -> Option<f64> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/metrics" } else { path };
    let fetch = async {
        let mut stream = tokio::net::TcpStream::connect(authority).await.ok()?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut body = String::new();
        stream.read_to_string(&mut body).await.ok()?;
        Some(body)
    };
    let body = tokio::time::timeout(Duration::from_secs(1), fetch)
        .await
        .ok()??;
    parse_cpu_seconds(&body)
}

fn parse_cpu_seconds(metrics: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("process_cpu_seconds_total "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cpu_counter_from_prometheus_text() {
        let text = "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total 12.5\n# EOF\n";
        assert_eq!(parse_cpu_seconds(text), Some(12.5));
        assert_eq!(parse_cpu_seconds("oncekey_rpc_requests_total 3\n"), None);
        let before = Sample {
            client: Some(1.0),
            server: Some(2.0),
        };
        let after = Sample {
            client: Some(1.5),
            server: None,
        };
        let used = Used::between(before, after);
        assert_eq!((used.client, used.server), (Some(0.5), None));
    }
}
