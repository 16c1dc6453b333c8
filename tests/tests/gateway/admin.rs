//! The admin port (`/healthz`, `/readyz`, `/metrics` with requests by method and result and the
//! upstream latency histogram) and configuration mistakes (exit 64, the flag named).

use crate::setup;
use oncekey_tests::{http_get, run_cli};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let (_server, _up, gw, http) = setup(&[]).await;
    assert_eq!(http_get(&gw.admin, "/healthz").await.0, 200);
    assert_eq!(http_get(&gw.admin, "/readyz").await.0, 200);
    let url = format!("{}/v1/charges", gw.url);
    http.post(&url, Some("m-1"), "{}", &[]).await;
    http.post(&url, Some("m-1"), "{}", &[]).await;
    http.post(&url, Some("m-1"), r#"{"other":1}"#, &[]).await;
    http.post(&url, None, "{}", &[]).await;
    let (code, text) = http_get(&gw.admin, "/metrics").await;
    assert_eq!(code, 200);
    for line in [
        r#"oncekey_gateway_requests_total{method="POST",result="forwarded"} 1"#,
        r#"oncekey_gateway_requests_total{method="POST",result="replayed"} 1"#,
        r#"oncekey_gateway_requests_total{method="POST",result="reused"} 1"#,
        r#"oncekey_gateway_requests_total{method="POST",result="passthrough"} 1"#,
        "oncekey_gateway_upstream_duration_seconds_count 2",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[test]
fn configuration_mistakes_exit_64_naming_the_flag() {
    for (args, flag) in [
        (&["--upstream", "https://example.invalid"][..], "--upstream"),
        (
            &["--upstream", "http://127.0.0.1:1", "--lease", "0s"],
            "--lease",
        ),
        (
            &["--upstream", "http://127.0.0.1:1", "--wait", "2m"],
            "--wait",
        ),
        (
            &[
                "--upstream",
                "http://127.0.0.1:1",
                "--store-headers",
                "transfer-encoding",
            ],
            "--store-headers",
        ),
        (
            &[
                "--upstream",
                "http://127.0.0.1:1",
                "--retryable-status",
                "503,600",
            ],
            "--retryable-status",
        ),
        (
            &["--upstream", "http://127.0.0.1:1", "--max-connections", "0"],
            "--max-connections",
        ),
        (
            &[
                "--upstream",
                "http://127.0.0.1:1",
                "--header-read-timeout",
                "0s",
            ],
            "--header-read-timeout",
        ),
        (
            &[
                "--upstream",
                "http://127.0.0.1:1",
                "--caller-header",
                "proxy-authorization",
            ],
            "--caller-header",
        ),
    ] {
        let mut argv = vec!["gateway"];
        argv.extend_from_slice(args);
        let (code, _, stderr) = run_cli(&argv);
        assert_eq!(code, 64, "{argv:?}: {stderr}");
        assert!(stderr.contains(flag), "{argv:?}: {stderr}");
    }
}
