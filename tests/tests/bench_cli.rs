//! `oncekey bench` against the real binary: a tiny cycle run succeeds and its JSON report has the
//! expected shape and op count, CPU per op included; with `--cql-raw` against a `--store cql` server (the shared test
//! Cassandra node, see the harness) it also reports the raw LWT cycle and the service's overhead.
//! The bench is not a test of speed: no timing is asserted here.

use oncekey_tests::*;
use serde_json::Value;

#[test]
fn tiny_cycle_bench_reports_json() {
    let server = Server::start(&[]);
    let metrics = format!("{}/metrics", server.admin);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--server-metrics",
        &metrics,
        "--scenario",
        "cycle",
        "--ops",
        "200",
        "--workers",
        "4",
        "--warmup",
        "100ms",
        "--json",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    assert_eq!(report["workers"], 4);
    let results = report["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{report:#}");
    let cycle = &results[0];
    assert_eq!(cycle["scenario"], "cycle");
    assert_eq!(cycle["target"], "oncekey");
    assert_eq!(cycle["ops"], 200);
    assert!(cycle["ops_per_sec"].as_f64().unwrap() > 0.0, "{cycle:#}");
    assert_eq!(cycle["errors"], serde_json::json!({}));
    // Every measured cycle acquired its fresh key (warm-up ops are not counted).
    assert_eq!(cycle["claim_outcomes"]["ACQUIRED"], 200, "{cycle:#}");
    for series in ["op", "claim", "complete"] {
        let s = &cycle["latency_ms"][series];
        assert_eq!(s["count"], 200, "{series}: {cycle:#}");
        for p in ["p50", "p90", "p99", "p99_9", "max"] {
            assert!(s[p].as_f64().is_some(), "{series}.{p}: {cycle:#}");
        }
        assert!(s["p50"].as_f64() <= s["p99_9"].as_f64());
    }
    // CPU per op of both ends is reported (the server's from its /metrics); its size is not
    // asserted, only that it was measured.
    for end in ["client", "server"] {
        let us = cycle["cpu_us_per_op"][end].as_f64();
        assert!(us.is_some_and(|us| us >= 0.0), "{end}: {cycle:#}");
    }
}

/// `--cql-raw` next to a `--store cql` server on the same keyspace: both cycles are reported
/// and so is the service's overhead over the raw LWTs (no timing asserted).
#[test]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
fn tiny_cql_raw_bench_reports_the_overhead() {
    let node = cql_node();
    let keyspace = migrated_keyspace(node);
    let server = Server::start(&[
        "--store",
        "cql",
        "--cql-nodes",
        node,
        "--cql-keyspace",
        &keyspace,
    ]);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--scenario",
        "cycle",
        "--ops",
        "40",
        "--workers",
        "2",
        "--connections",
        "1",
        "--warmup",
        "0s",
        "--cql-raw",
        node,
        "--cql-raw-keyspace",
        &keyspace,
        "--json",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    let results = report["results"].as_array().expect("results");
    let targets: Vec<_> = results
        .iter()
        .map(|r| (r["scenario"].as_str(), r["target"].as_str()))
        .collect();
    assert_eq!(
        targets,
        [
            (Some("cycle"), Some("oncekey")),
            (Some("cycle"), Some("cql-raw"))
        ],
        "{report:#}"
    );
    let raw = &results[1];
    assert_eq!(raw["ops"], 40, "{raw:#}");
    assert_eq!(raw["errors"], serde_json::json!({}));
    assert_eq!(raw["claim_outcomes"]["ACQUIRED"], 40, "{raw:#}");
    for series in ["op", "claim", "complete"] {
        assert_eq!(raw["latency_ms"][series]["count"], 40, "{series}: {raw:#}");
    }
    assert_eq!(report["cql_raw"]["keyspace"], keyspace.as_str());
    let overhead = &report["cql_overhead"];
    for series in ["cycle", "claim", "complete"] {
        for stat in ["p50", "p99"] {
            let cell = &overhead[series][stat];
            assert!(cell["oncekey"].as_f64().is_some(), "{overhead:#}");
            assert!(cell["cql_raw"].as_f64().is_some(), "{overhead:#}");
            assert!(cell["overhead_pct"].as_f64().is_some(), "{overhead:#}");
        }
    }
    assert!(report["ratios"]["cycle_vs_cql_raw"].as_f64().is_some());
}

/// Against a TLS server: `--tls-ca` and an `https://` address; without the CA the run fails with
/// an error instead of a report.
#[test]
fn tiny_bench_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let file = |name: &str| certs.path().join(name).to_str().unwrap().to_owned();
    let server = Server::start(&[
        "--tls-cert",
        &file("server.pem"),
        "--tls-key",
        &file("server.key"),
    ]);
    let https = server.grpc.replace("http://", "https://");
    let bench = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "--server",
            &https,
            "--scenario",
            "cycle",
            "--ops",
            "50",
            "--workers",
            "2",
            "--connections",
            "1",
            "--warmup",
            "0s",
            "--json",
        ];
        args.extend_from_slice(extra);
        run_cli(&args)
    };
    let (code, stdout, stderr) = bench(&["--tls-ca", &file("ca.pem"), "--tls-domain", "localhost"]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    assert_eq!(report["results"][0]["ops"], 50, "{report:#}");
    assert_eq!(report["results"][0]["errors"], serde_json::json!({}));
    let (code, stdout, _) = bench(&[]);
    assert_ne!(
        code, 0,
        "a TLS server answered a bench without its CA:\n{stdout}"
    );
}

/// `--scenario noisy` against a server that admits the noisy tenant 5 Claims a second (limits
/// file) and the quiet one plenty: both phases of the quiet tenant, the flood and the summary are
/// reported, every quiet op succeeded and every noisy Claim was admitted or refused RATE_LIMITED.
/// The latencies and their ratio are reported, not asserted.
#[test]
fn tiny_noisy_bench_reports_both_phases_and_the_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let limits = dir.path().join("limits");
    std::fs::write(&limits, "noisy rate=5 burst=5\n").unwrap();
    let server = Server::start(&[
        "--tenant-rate",
        "1000",
        "--limits-file",
        limits.to_str().unwrap(),
    ]);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--scenario",
        "noisy",
        "--noisy-limit",
        "5",
        "--quiet-rate",
        "10",
        "--duration",
        "2s",
        "--warmup",
        "200ms",
        "--connections",
        "1",
        "--workers",
        "1",
        "--json",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    let results = report["results"].as_array().expect("results");
    let targets: Vec<_> = results
        .iter()
        .map(|r| (r["scenario"].as_str(), r["target"].as_str()))
        .collect();
    assert_eq!(
        targets,
        [
            (Some("noisy"), Some("quiet-alone")),
            (Some("noisy"), Some("quiet+noisy")),
            (Some("noisy"), Some("noisy")),
        ],
        "{report:#}"
    );
    for quiet in &results[..2] {
        // 10 cycles a second for 2 s, every one acquired and completed.
        assert_eq!(quiet["ops"], 20, "{quiet:#}");
        assert_eq!(quiet["errors"], serde_json::json!({}), "{quiet:#}");
        assert_eq!(quiet["claim_outcomes"]["ACQUIRED"], 20, "{quiet:#}");
    }
    let summary = &report["noisy"];
    let count = |k: &str| {
        summary["noisy"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {summary:#}"))
    };
    // 50 Claims a second offered for 2 s, none skipped, each admitted or refused.
    assert_eq!(count("sent"), 100, "{summary:#}");
    assert_eq!(count("skipped"), 0, "{summary:#}");
    assert_eq!(
        count("admitted") + count("refused_rate_limited"),
        100,
        "{summary:#}"
    );
    assert!(count("refused_rate_limited") > 0, "{summary:#}");
    assert_eq!(summary["noisy_offered_per_sec"], 50.0);
    for phase in ["quiet_alone_ms", "quiet_with_noisy_ms"] {
        for p in ["p50", "p99"] {
            assert!(
                summary[phase][p].as_f64().is_some(),
                "{phase}.{p}: {summary:#}"
            );
        }
    }
    assert!(summary["quiet_p99_ratio"].as_f64().is_some(), "{summary:#}");

    // Without --noisy-limit the scenario cannot say what 10x is: exit 64 naming the flag.
    let (code, _, stderr) = run_cli(&["bench", "--server", &server.grpc, "--scenario", "noisy"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("--noisy-limit"), "{stderr}");
}

/// `--scenario gateway`: the same POSTs to an upstream directly and through an in-process
/// gateway on the server, both measured, and the overhead between them reported.
#[test]
fn tiny_gateway_bench_reports_the_overhead() {
    let server = Server::start(&[]);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--scenario",
        "gateway",
        "--ops",
        "100",
        "--workers",
        "4",
        "--connections",
        "1",
        "--warmup",
        "100ms",
        "--json",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    let results = report["results"].as_array().expect("results");
    let targets: Vec<&str> = results
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, ["direct", "gateway"], "{report:#}");
    for r in results {
        assert_eq!(r["scenario"], "gateway");
        assert_eq!(r["ops"], 100, "{r:#}");
        assert_eq!(r["errors"], serde_json::json!({}), "{r:#}");
    }
    for p in ["p50", "p90", "p99"] {
        assert!(
            report["gateway_overhead_ms"][p].is_number(),
            "{p}: {report:#}"
        );
    }
}

/// Starts (or reuses) a peer with `scripts/NAME start`; its URL is the script's last stdout line.
/// A peer that cannot be started fails the test with the script's output (never a skip).
fn start_peer(name: &str) -> String {
    let script = oncekey_tests::drivers::repo().join("scripts").join(name);
    let out = std::process::Command::new(&script)
        .arg("start")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} start failed:\n{stdout}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().trim().to_owned()
}

/// `--peer redis://…` and `--peer etcd://…` in one run: after the server's cycle and replay, each
/// peer's design runs the same cycle (every key acquired, then completed) and replay (every Claim
/// answered with the stored result, which the bench checks byte for byte), and the report gives
/// the ratio to each peer. No timing is asserted.
#[test]
#[ignore = "needs Redis and etcd: scripts/test bench-peers runs it"]
fn tiny_bench_against_the_redis_and_etcd_peers() {
    let redis = start_peer("redis");
    let etcd = start_peer("etcd");
    let server = Server::start(&[]);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--scenario",
        "cycle,replay",
        "--ops",
        "60",
        "--workers",
        "3",
        "--connections",
        "1",
        "--replay-keys",
        "20",
        "--warmup",
        "0s",
        "--peer",
        &redis,
        "--peer",
        &etcd,
        "--json",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    let results = report["results"].as_array().expect("results");
    assert_eq!(
        targets(&report),
        [
            ("cycle", "oncekey"),
            ("replay", "oncekey"),
            ("cycle", "redis"),
            ("replay", "redis"),
            ("cycle", "etcd"),
            ("replay", "etcd"),
        ],
        "{report:#}"
    );
    assert_eq!(report["peers"], serde_json::json!(["redis", "etcd"]));
    for r in results {
        assert_eq!(r["ops"], 60, "{r:#}");
        assert_eq!(r["errors"], serde_json::json!({}), "{r:#}");
        let outcome = match r["scenario"].as_str() {
            Some("cycle") => "ACQUIRED",
            _ => "COMPLETED",
        };
        assert_eq!(r["claim_outcomes"][outcome], 60, "{r:#}");
        // Each peer's own CPU time (Redis's INFO, etcd's /metrics) takes the server's place.
        let us = r["cpu_us_per_op"]["server"].as_f64();
        if r["target"] != "oncekey" {
            assert!(us.is_some_and(|us| us >= 0.0), "{r:#}");
        }
    }
    for peer in ["redis", "etcd"] {
        for name in ["cycle", "replay"] {
            let ratio = &report["ratios"][format!("{name}_vs_{peer}")];
            assert!(ratio.as_f64().is_some_and(|x| x > 0.0), "{report:#}");
        }
    }
}

/// Each result's (scenario, target), in report order.
fn targets(report: &Value) -> Vec<(&str, &str)> {
    let results = report["results"].as_array().expect("results");
    results
        .iter()
        .map(|r| {
            (
                r["scenario"].as_str().unwrap(),
                r["target"].as_str().unwrap(),
            )
        })
        .collect()
}

/// The ratios of an interleaved report, checked for shape, for the `--slices` tests.
fn interleaved_ratios(report: &Value, slices: usize) -> &serde_json::Map<String, Value> {
    assert_eq!(report["interleaved"]["slices"], slices, "{report:#}");
    let ratios = report["interleaved"]["ratios"].as_object().expect("ratios");
    for (name, r) in ratios {
        let per_slice = r["slices"].as_array().expect("per-slice ratios");
        assert_eq!(per_slice.len(), slices, "{name}: {r:#}");
        let (min, median, max) = (r["min"].as_f64(), r["median"].as_f64(), r["max"].as_f64());
        assert!(
            min > Some(0.0) && min <= median && median <= max,
            "{name}: {r:#}"
        );
    }
    ratios
}

/// `--slices 3`: noop, cycle and replay are measured in three interleaved slices each, merged
/// into one row per scenario, and each ratio to noop comes with its three per-slice values.
/// `--slices` with `--ops` is refused (a slice is a share of `--duration`).
#[test]
fn interleaved_bench_merges_the_slices_and_reports_each_ratios_spread() {
    let server = Server::start(&[]);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--scenario",
        "noop,cycle,replay",
        "--slices",
        "3",
        "--duration",
        "900ms",
        "--warmup",
        "100ms",
        "--workers",
        "4",
        "--replay-keys",
        "8",
        "--json",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    let results = report["results"].as_array().expect("results");
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["noop", "cycle", "replay"], "{report:#}");
    for r in results {
        assert!(r["ops"].as_u64().unwrap() > 0, "{r:#}");
        assert_eq!(r["errors"], serde_json::json!({}), "{r:#}");
        // Three slices of 300 ms each, merged.
        let seconds = r["seconds"].as_f64().unwrap();
        assert!((0.8..3.0).contains(&seconds), "{r:#}");
    }
    assert_eq!(stderr.matches("bench: slice ").count(), 9, "{stderr}");
    let ratios = interleaved_ratios(&report, 3);
    let names: Vec<&String> = ratios.keys().collect();
    assert_eq!(names, ["cycle_vs_noop", "replay_vs_noop"], "{report:#}");

    let (code, _, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--slices",
        "2",
        "--ops",
        "10",
    ]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("--slices"), "{stderr}");
}

/// `--slices 2 --peer redis://…`: the server's and Redis's cycle and replay alternate slice by
/// slice, and the ratios to Redis come with their per-slice values.
#[test]
#[ignore = "needs Redis and etcd: scripts/test bench-peers runs it"]
fn interleaved_bench_against_peers_redis() {
    let redis = start_peer("redis");
    let server = Server::start(&[]);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
        "--scenario",
        "cycle,replay",
        "--slices",
        "2",
        "--duration",
        "600ms",
        "--warmup",
        "100ms",
        "--workers",
        "3",
        "--connections",
        "1",
        "--replay-keys",
        "8",
        "--peer",
        &redis,
        "--json",
    ]);
    assert_eq!(code, 0, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let report: Value = serde_json::from_str(&stdout).expect("the report is JSON");
    assert_eq!(
        targets(&report),
        [
            ("cycle", "oncekey"),
            ("replay", "oncekey"),
            ("cycle", "redis"),
            ("replay", "redis"),
        ],
        "{report:#}"
    );
    // Slice 1 runs oncekey first, slice 2 Redis first.
    let order: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("bench: slice "))
        .map(|l| {
            if l.contains(" on redis ") {
                "redis"
            } else {
                "oncekey"
            }
        })
        .collect();
    assert_eq!(
        order,
        ["oncekey", "oncekey", "redis", "redis", "redis", "redis", "oncekey", "oncekey"],
        "{stderr}"
    );
    let ratios = interleaved_ratios(&report, 2);
    for name in ["cycle_vs_redis", "replay_vs_redis"] {
        assert!(ratios.contains_key(name), "{report:#}");
    }
}
