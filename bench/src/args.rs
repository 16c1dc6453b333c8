//! The `oncekey bench` flags and their checks. Nothing here talks to a server.

use clap::{Args, ValueEnum};
use oncekey_server::ledger::Millis;
use oncekey_server::settings::{parse_duration, ConfigError};
use oncekey_server::store::cql::CqlConfig;
use std::path::PathBuf;

/// A workload to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// grpc.health.v1 Check: the cheapest RPC the server has, the ceiling.
    Noop,
    /// Claim then Complete on a fresh key: the common path (one op = two RPCs).
    Cycle,
    /// Claim on a completed key: the stored result is replayed.
    Replay,
    /// All workers on a few hot keys at a time: acquire races, IN_PROGRESS, replays.
    Storm,
    /// A blend of the above, weighted by --mix.
    Mixed,
    /// A quiet tenant's steady cycles, alone and then beside a noisy tenant offering
    /// --noisy-factor × --noisy-limit Claims a second (per-tenant admission at work).
    Noisy,
    /// HTTP POSTs with fresh Idempotency-Keys through an in-process `oncekey gateway` on this
    /// ledger, and the same POSTs to its (in-process) upstream directly: the gateway's overhead.
    Gateway,
}

impl Scenario {
    /// The scenario's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Noop => "noop",
            Scenario::Cycle => "cycle",
            Scenario::Replay => "replay",
            Scenario::Storm => "storm",
            Scenario::Mixed => "mixed",
            Scenario::Noisy => "noisy",
            Scenario::Gateway => "gateway",
        }
    }
}

/// `oncekey bench`
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Server address.
    #[arg(long, env = "ONCEKEY_SERVER", default_value = "http://127.0.0.1:50051")]
    pub server: String,
    /// Bearer token (servers with a tokens file).
    #[arg(long, env = "ONCEKEY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Tenant header (dev-mode servers).
    #[arg(long, env = "ONCEKEY_TENANT", default_value = "bench")]
    pub tenant: String,
    /// TLS to the server (with an `https://` --server): set by the command line from the client
    /// commands' TLS flags.
    #[arg(skip)]
    pub tls: Option<oncekey_client::TlsOptions>,
    /// Scenarios to run, in order, comma-separated.
    #[arg(
        long = "scenario",
        visible_alias = "scenarios",
        value_enum,
        value_delimiter = ',',
        default_value = "noop,cycle,replay,storm"
    )]
    pub scenarios: Vec<Scenario>,
    /// Concurrent workers (each keeps one operation in flight).
    #[arg(long, default_value_t = 64)]
    pub workers: usize,
    /// HTTP/2 connections (separate channels) the workers share round-robin.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// How long each scenario is measured (after the warm-up); ignored with --ops.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Millis,
    /// Measure exactly this many ops per scenario instead of a duration.
    #[arg(long)]
    pub ops: Option<u64>,
    /// Unmeasured load before each scenario.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub warmup: Millis,
    /// Measure noop, cycle and replay and every `--peer`'s cycle and replay interleaved in this
    /// many slices of `--duration / N` each (A B … then … B A), so that a ratio is not a minute
    /// of drift on the machine; the report gives each ratio's median and spread over the slices.
    /// 1: each target in turn, whole.
    #[arg(long, default_value_t = 1)]
    pub slices: u32,
    /// Before the scenarios, create this many completed records (reported as `fill`).
    #[arg(long, default_value_t = 0)]
    pub preload: u64,
    /// Completed keys the `replay` scenario claims, prepared before it runs.
    #[arg(long, default_value_t = 10_000)]
    pub replay_keys: u64,
    /// Keys `storm` hammers at the same time.
    #[arg(long, default_value_t = 4)]
    pub hot_keys: u64,
    /// Claims each storm key receives before the storm moves on to a fresh key.
    #[arg(long, default_value_t = 256)]
    pub claims_per_key: u64,
    /// The `mixed` blend as kind=weight pairs (kinds: noop, cycle, replay, storm).
    #[arg(long, default_value = "cycle=40,replay=40,storm=10,noop=10", value_parser = parse_mix)]
    pub mix: std::vec::Vec<(Kind, u32)>,
    /// Bytes of the result body each Complete stores.
    #[arg(long, default_value_t = 64)]
    pub body_bytes: usize,
    /// Keys in claim order (`sequential`, the default: neighbours in the store's index) or
    /// scattered over the key space (`random`, like UUIDs or the HMACs of key privacy).
    #[arg(long, default_value = "sequential", value_parser = ["sequential", "random"])]
    pub key_order: String,
    /// Namespace of the bench's records.
    #[arg(long, default_value = "bench.ops")]
    pub namespace: String,
    /// A peer design to also run cycle and replay through, by URL (repeat for several, each kind
    /// once): `postgres://…` the PostgreSQL idempotency-key table, `redis://HOST:PORT` the Redis
    /// design (Lua scripts run with EVALSHA), `etcd://HOST:PORT` the etcd v3 transactions.
    #[arg(long)]
    pub peer: Vec<String>,
    /// The server's Prometheus metrics (`http://ADMIN/metrics`): adds the server's CPU time per
    /// operation (its `process_cpu_seconds_total`) next to the bench's own.
    #[arg(long)]
    pub server_metrics: Option<String>,
    /// PostgreSQL and Redis connections (default: one per worker, so the peer gets the same
    /// concurrency); etcd, served over HTTP/2 like the server, gets --connections.
    #[arg(long)]
    pub peer_pool: Option<usize>,
    /// CQL contact points (host:port, comma-separated): also run `cycle` as the raw lightweight
    /// transactions the CQL store issues for it — INSERT … IF NOT EXISTS, then UPDATE … IF
    /// version = … — through the same driver, session settings and prepared statements, with the
    /// same workers (target `cql-raw`). Point `--server` at `oncekey serve --store cql` on the
    /// same keyspace and the report shows the service's latency overhead over the raw LWTs.
    #[arg(
        long,
        env = "ONCEKEY_CQL_RAW",
        value_delimiter = ',',
        value_name = "NODES"
    )]
    pub cql_raw: Option<Vec<String>>,
    /// Run the raw LWT cycle before the server's scenarios instead of after them (run both orders
    /// to see whether drift on the node, e.g. compactions left by the first, favours either).
    #[arg(long, requires = "cql_raw")]
    pub cql_raw_first: bool,
    /// Keyspace for --cql-raw, migrated with `oncekey migrate` (rows go to its records table,
    /// with the server's default 24 h TTL).
    #[arg(
        long,
        env = "ONCEKEY_CQL_RAW_KEYSPACE",
        default_value = "oncekey",
        value_name = "KEYSPACE"
    )]
    pub cql_raw_keyspace: String,
    /// Local datacenter for --cql-raw (LOCAL_QUORUM, Paxos at SERIAL, like `serve --cql-local-dc`).
    #[arg(long, env = "ONCEKEY_CQL_RAW_LOCAL_DC", value_name = "DC")]
    pub cql_raw_local_dc: Option<String>,
    /// CQL user name for --cql-raw.
    #[arg(long, env = "ONCEKEY_CQL_RAW_USERNAME")]
    pub cql_raw_username: Option<String>,
    /// CQL password for --cql-raw.
    #[arg(long, env = "ONCEKEY_CQL_RAW_PASSWORD", hide_env_values = true)]
    pub cql_raw_password: Option<String>,
    /// `noisy`: the tenant header of the noisy tenant (the quiet one is --tenant).
    #[arg(long, default_value = "noisy")]
    pub noisy_tenant: String,
    /// `noisy`: the noisy tenant's bearer token (the quiet one's is --token).
    #[arg(long, env = "ONCEKEY_NOISY_TOKEN", hide_env_values = true)]
    pub noisy_token: Option<String>,
    /// `noisy`: the rate the server admits for the noisy tenant, in requests a second (its
    /// --tenant-rate, or its limits-file rate).
    #[arg(long)]
    pub noisy_limit: Option<f64>,
    /// `noisy`: the noisy tenant offers this many times --noisy-limit.
    #[arg(long, default_value_t = 10.0)]
    pub noisy_factor: f64,
    /// `noisy`: the quiet tenant's Claim + Complete cycles a second (keep it under the server's
    /// limit for it).
    #[arg(long, default_value_t = 100.0)]
    pub quiet_rate: f64,
    /// `noisy`: measure in this many rounds of (quiet alone, quiet beside the flood), each an
    /// equal share of --duration, so that drift in a shared machine's load falls on both alike.
    #[arg(long, default_value_t = 1)]
    pub noisy_rounds: u32,
    /// Print the JSON report on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long)]
    pub output: Option<PathBuf>,
}

impl BenchArgs {
    /// The flags, checked against each other.
    pub fn validated(self) -> Result<Self, ConfigError> {
        let bad = |m: &str| Err(ConfigError(m.into()));
        if self.workers == 0 || self.workers > 100_000 {
            return bad("--workers must be between 1 and 100000");
        }
        if self.connections == 0 || self.connections > self.workers {
            return bad("--connections must be between 1 and --workers");
        }
        if self.ops == Some(0) || (self.ops.is_none() && self.duration <= 0) {
            return bad("--ops and --duration must be positive");
        }
        if self.warmup < 0 {
            return bad("--warmup must not be negative");
        }
        if !(1..=1000).contains(&self.slices) {
            return bad("--slices must be between 1 and 1000");
        }
        if self.slices > 1 && self.ops.is_some() {
            return bad("--slices divides --duration: it cannot be used with --ops");
        }
        if self.replay_keys == 0 || self.hot_keys == 0 || self.claims_per_key == 0 {
            return bad("--replay-keys, --hot-keys and --claims-per-key must be positive");
        }
        if self.peer_pool == Some(0) {
            return bad("--peer-pool must be positive");
        }
        let mut kinds = Vec::new();
        for url in &self.peer {
            let Some(kind) = super::peers::PeerKind::of(url) else {
                return Err(ConfigError(format!(
                    "--peer {url}: expected postgres://…, redis://HOST:PORT or etcd://HOST:PORT"
                )));
            };
            if kinds.contains(&kind) {
                return Err(ConfigError(format!("--peer names {} twice", kind.name())));
            }
            kinds.push(kind);
        }
        if self.scenarios.is_empty() {
            return bad("--scenarios names no scenario");
        }
        if self.scenarios.contains(&Scenario::Noisy) {
            let positive = |x: Option<f64>| x.is_some_and(|x| x.is_finite() && x > 0.0);
            if !positive(self.noisy_limit) {
                return bad("--scenario noisy needs --noisy-limit: the requests a second the server admits for the noisy tenant");
            }
            if !positive(Some(self.noisy_factor)) || !positive(Some(self.quiet_rate)) {
                return bad("--noisy-factor and --quiet-rate must be positive");
            }
            if self.ops.is_some() {
                return bad("--scenario noisy runs for --duration; drop --ops");
            }
            if !(1..=1000).contains(&self.noisy_rounds) {
                return bad("--noisy-rounds must be between 1 and 1000");
            }
            if self.noisy_limit.unwrap_or_default() * self.noisy_factor > 1e6 {
                return bad(
                    "--noisy-limit × --noisy-factor must be at most 1000000 requests a second",
                );
            }
        }
        if self
            .cql_raw
            .as_ref()
            .is_some_and(|nodes| nodes.iter().all(|n| n.trim().is_empty()))
        {
            return bad("--cql-raw: give at least one host:port");
        }
        Ok(self)
    }

    /// The CQL connection of `--cql-raw`, when given: what `serve --store cql` would use.
    pub fn cql_raw_config(&self) -> Option<CqlConfig> {
        Some(CqlConfig {
            nodes: self.cql_raw.clone()?,
            keyspace: self.cql_raw_keyspace.clone(),
            local_dc: self.cql_raw_local_dc.clone(),
            username: self.cql_raw_username.clone(),
            password: self.cql_raw_password.clone(),
            ..CqlConfig::new(&[], &self.cql_raw_keyspace)
        })
    }
}

/// Parses `cycle=40,replay=40,noop=20`.
fn parse_mix(text: &str) -> Result<Vec<(Kind, u32)>, String> {
    let mut mix = Vec::new();
    for part in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, weight) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not kind=weight"))?;
        let kind = match name.trim() {
            "noop" => Kind::Noop,
            "cycle" => Kind::Cycle,
            "replay" => Kind::Replay,
            "storm" => Kind::Storm,
            other => {
                return Err(format!(
                    "unknown kind {other:?} (noop, cycle, replay, storm)"
                ))
            }
        };
        let weight: u32 = weight
            .trim()
            .parse()
            .map_err(|_| format!("{weight:?} is not a whole number"))?;
        if weight > 0 {
            mix.push((kind, weight));
        }
    }
    if mix.is_empty() {
        return Err("the mix needs at least one kind with a positive weight".into());
    }
    Ok(mix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_parses_and_rejects() {
        assert_eq!(
            parse_mix("cycle=3, noop=1,storm=0").unwrap(),
            vec![(Kind::Cycle, 3), (Kind::Noop, 1)]
        );
        assert!(parse_mix("fly=1").is_err());
        assert!(parse_mix("noop=0").is_err());
        assert!(parse_mix("cycle").is_err());
    }
}

/// What one op does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A health Check.
    Noop,
    /// Claim + Complete of a fresh key.
    Cycle,
    /// Claim of a completed key.
    Replay,
    /// Claim of a hot key, Complete when acquired.
    Storm,
    /// A cycle creating a preload record.
    Fill,
    /// A cycle completing a key for `replay`.
    ReplaySetup,
    /// An HTTP POST with a fresh Idempotency-Key (through the gateway, or direct).
    HttpPost,
}
