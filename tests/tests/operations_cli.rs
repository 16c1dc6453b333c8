//! The operator's command line against the real binary, as docs/runbooks.md ("Approvals,
//! reconciliation and purge") shows it: an approval flow (`claim --require-approval`, `claim
//! --dry-run`, `approve`, `reject`), the attempt cap (`claim --max-attempts`), a reconciliation
//! runbook ending in `purge`, and tokens with a label and scopes (`token new --label --scope`).

use oncekey_tests::*;
use serde_json::Value;

fn cli(server: &Server, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--server", &server.grpc]);
    let (code, out, err) = run_cli(&all);
    assert_eq!(code, 0, "oncekey {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("oncekey {args:?}: {e}: {out}"))
}

fn cli_error(server: &Server, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["--server", &server.grpc]);
    let (code, _, err) = run_cli(&all);
    assert_eq!(code, 1, "oncekey {args:?} should fail: {err}");
    err
}

const PAYLOAD: &str = r#"{"order":"o-77","cents":4200}"#;

#[test]
fn an_approval_flow_with_the_cli() {
    let server = Server::start(&[]);
    let claim = ["claim", "refunds.issue", "o-77", "--payload", PAYLOAD];
    let gated: Vec<&str> = claim
        .iter()
        .copied()
        .chain(["--require-approval"])
        .collect();
    let first = cli(&server, &gated);
    assert_eq!(first["outcome"], "AWAITING_APPROVAL");
    assert_eq!(first["record"]["status"], "AWAITING_APPROVAL");
    assert_eq!(first["record"]["require_approval"], true);
    let dry: Vec<&str> = claim.iter().copied().chain(["--dry-run"]).collect();
    let preview = cli(&server, &dry);
    assert_eq!(
        (preview["dry_run"].clone(), preview["outcome"].clone()),
        (true.into(), "AWAITING_APPROVAL".into())
    );
    let approved = cli(
        &server,
        &[
            "approve",
            "refunds.issue",
            "o-77",
            "--note",
            "refund agreed with the customer",
        ],
    );
    assert_eq!(approved["record"]["status"], "APPROVED");
    assert_eq!(approved["record"]["approval"]["decision"], "APPROVED");
    assert_eq!(approved["record"]["approval"]["decided_by"], "dev");
    let acquired = cli(&server, &claim);
    assert_eq!(acquired["outcome"], "ACQUIRED");
    assert_eq!(acquired["lease"]["token"], 1);
    let done = cli(
        &server,
        &[
            "complete",
            "refunds.issue",
            "o-77",
            "--lease-token",
            "1",
            "--body",
            "refunded",
        ],
    );
    assert_eq!(done["record"]["status"], "SUCCEEDED");
    let err = cli_error(&server, &["approve", "refunds.issue", "o-77"]);
    assert!(err.contains("NOT_AWAITING_APPROVAL"), "{err}");

    // A rejection.
    cli(
        &server,
        &[
            "claim",
            "refunds.issue",
            "o-78",
            "--payload",
            PAYLOAD,
            "--require-approval",
        ],
    );
    let rejected = cli(
        &server,
        &[
            "reject",
            "refunds.issue",
            "o-78",
            "--note",
            "duplicate of o-77",
        ],
    );
    assert_eq!(rejected["record"]["status"], "FAILED");
    assert_eq!(rejected["record"]["error"]["code"], 403);
    assert_eq!(rejected["record"]["error"]["message"], "duplicate of o-77");
    let replay = cli(
        &server,
        &["claim", "refunds.issue", "o-78", "--payload", PAYLOAD],
    );
    assert_eq!(replay["outcome"], "FAILED");
    let err = cli_error(
        &server,
        &["approve", "refunds.issue", "o-78", "--fingerprint", "zz"],
    );
    assert!(err.contains("--fingerprint"), "{err}");
}

#[test]
fn a_reconciliation_runbook_with_the_cli() {
    let server = Server::start(&[]);
    let ns = "emails.send";
    // A capped at-least-once job whose holder vanished past the cap.
    let capped = [
        "claim",
        ns,
        "welcome-9",
        "--payload",
        "{}",
        "--max-attempts",
        "1",
        "--lease",
        "1s",
    ];
    assert_eq!(cli(&server, &capped)["outcome"], "ACQUIRED");
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let stuck = cli(&server, &["claim", ns, "welcome-9", "--payload", "{}"]);
    assert_eq!(stuck["outcome"], "NEEDS_RECONCILIATION");
    assert_eq!(stuck["record"]["status"], "UNKNOWN");
    let (code, timeline, err) = run_cli(&[
        "lookup",
        ns,
        "welcome-9",
        "--history",
        "--server",
        &server.grpc,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(timeline.contains("ATTEMPTS_EXHAUSTED"), "{timeline}");
    // The reconciler takes it over, checks the outside world, and records what it found.
    let reconciling = cli(
        &server,
        &[
            "claim",
            ns,
            "welcome-9",
            "--payload",
            "{}",
            "--reconcile",
            "--owner",
            "oncall",
        ],
    );
    assert_eq!(reconciling["outcome"], "ACQUIRED");
    assert_eq!(reconciling["lease"]["token"], 2);
    let settled = cli(
        &server,
        &[
            "complete",
            ns,
            "welcome-9",
            "--lease-token",
            "2",
            "--body",
            "found in the mail log",
        ],
    );
    assert_eq!(settled["record"]["status"], "SUCCEEDED");

    // An at-most-once record nobody can reconcile: purged by force.
    let amo = [
        "claim",
        ns,
        "welcome-10",
        "--payload",
        "{}",
        "--at-most-once",
    ];
    cli(&server, &amo);
    let err = cli_error(&server, &["purge", ns, "welcome-10"]);
    assert!(err.contains("UNSETTLED_AT_MOST_ONCE"), "{err}");
    let purged = cli(&server, &["purge", ns, "welcome-10", "--force"]);
    assert_eq!(purged["purged"], true);
    let err = cli_error(&server, &["lookup", ns, "welcome-10"]);
    assert!(err.contains("NOT_FOUND"), "{err}");
    let again = cli(&server, &amo);
    assert_eq!(again["lease"]["token"], 2, "the fencing sequence continues");
}

#[test]
fn token_new_writes_a_label_and_scopes() {
    let (code, out, err) = run_cli(&[
        "token",
        "new",
        "--tenant",
        "acme",
        "--label",
        "alice@example.com",
        "--scope",
        "approve",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("tokens-file line: "))
        .expect("a tokens-file line");
    let fields: Vec<&str> = line.split(':').collect();
    assert_eq!(fields.len(), 4, "{line}");
    assert_eq!(
        (fields[0], fields[1], fields[3]),
        ("acme", "alice@example.com", "approve")
    );
    assert_eq!(fields[2].len(), 64);
    let (code, _, err) = run_cli(&["token", "new", "--tenant", "acme", "--scope", "root"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("--scope"), "{err}");
}
