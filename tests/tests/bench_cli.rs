//! `oncekey bench` against the real binary: a tiny cycle run succeeds and its JSON report has the
//! expected shape and op count. The bench is not a test of speed: no timing is asserted here.

use oncekey_tests::*;
use serde_json::Value;

#[test]
fn tiny_cycle_bench_reports_json() {
    let server = Server::start(&[]);
    let (code, stdout, stderr) = run_cli(&[
        "bench",
        "--server",
        &server.grpc,
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
}
