//! Token scopes against the real binary: a tokens file with labels and scopes, MISSING_SCOPE
//! naming the scope each RPC needs, `decided_by` from the label, a SIGHUP reload that changes
//! scopes, and dev mode opened to other hosts, where nobody may approve or purge.

use oncekey_api::v1;
use oncekey_tests::*;
use sha2::Digest;
use std::path::Path;
use std::time::{Duration, Instant};
use tonic::Code;
use tonic_types::StatusExt;

const NS: &str = "payouts.send";
const LEDGER: &str = "tok-ledger-9f1";
const APPROVER: &str = "tok-approver-2b7";
const ADMIN: &str = "tok-admin-5c3";
const THEIR_APPROVER: &str = "tok-globex-approver-8d4";

fn hash(token: &str) -> String {
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

fn write_tokens(path: &Path, ledger_scopes: &str) {
    let text = format!(
        "# scopes\nacme:{}{ledger_scopes}\nacme:alice@example.com:{}:approve\nacme:ops:{}:admin\n\
         globex:mallory:{}:approve,admin,ledger\n",
        hash(LEDGER),
        hash(APPROVER),
        hash(ADMIN),
        hash(THEIR_APPROVER)
    );
    std::fs::write(path, text).unwrap();
}

fn gated(key: &str) -> v1::ClaimRequest {
    v1::ClaimRequest {
        require_approval: true,
        ..claim(NS, key, r#"{"to":"acct-1","cents":500}"#)
    }
}

fn approve(key: &str) -> v1::ApproveRequest {
    v1::ApproveRequest {
        namespace: NS.into(),
        key: key.into(),
        note: "checked".into(),
        ..Default::default()
    }
}

fn purge(key: &str) -> v1::PurgeRequest {
    v1::PurgeRequest {
        namespace: NS.into(),
        key: key.into(),
        force: true,
    }
}

/// PERMISSION_DENIED, reason MISSING_SCOPE, the scope in the ErrorInfo and in the message.
fn assert_missing(e: &tonic::Status, scope: &str) {
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert_eq!(reason(e), "MISSING_SCOPE");
    let info = e.get_details_error_info().unwrap();
    assert_eq!(info.metadata.get("scope").map(String::as_str), Some(scope));
    assert!(e.message().contains(scope), "{}", e.message());
}

#[tokio::test]
async fn each_token_may_do_what_its_scopes_say() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write_tokens(&tokens, "");
    let server = Server::start(&["--tokens-file", tokens.to_str().unwrap()]);
    let mut ledger = server.client_with_token(LEDGER).await;
    let mut approver = server.client_with_token(APPROVER).await;
    let mut admin = server.client_with_token(ADMIN).await;
    let mut theirs = server.client_with_token(THEIR_APPROVER).await;

    ledger.claim(gated("s-1")).await.unwrap();
    // A line without scopes has `ledger` only.
    assert_missing(
        &ledger.approve(approve("s-1")).await.unwrap_err(),
        "approve",
    );
    assert_missing(&ledger.purge(purge("s-1")).await.unwrap_err(), "admin");
    // The approver may look and decide, not claim or purge.
    assert_missing(&approver.claim(gated("s-2")).await.unwrap_err(), "ledger");
    assert_missing(&approver.purge(purge("s-1")).await.unwrap_err(), "admin");
    let seen = approver
        .lookup(lookup(NS, "s-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status(&seen.record.unwrap()),
        v1::RecordStatus::AwaitingApproval
    );
    // Another tenant's approver finds nothing to approve.
    let e = theirs.approve(approve("s-1")).await.unwrap_err();
    assert_eq!(reason(&e), "NOT_FOUND");
    let decided = approver.approve(approve("s-1")).await.unwrap().into_inner();
    let approval = decided.record.unwrap().approval.unwrap();
    assert_eq!(
        approval.decided_by, "alice@example.com",
        "the token's label"
    );
    // The admin may look and purge, not decide.
    assert_missing(&admin.approve(approve("s-1")).await.unwrap_err(), "approve");
    assert_missing(
        &admin
            .complete(complete(NS, "s-1", 1, result(200, b"x")))
            .await
            .unwrap_err(),
        "ledger",
    );
    let e = theirs.purge(purge("s-1")).await.unwrap_err();
    assert_eq!(reason(&e), "NOT_FOUND");
    admin.lookup(lookup(NS, "s-1")).await.unwrap();
    admin.purge(purge("s-1")).await.unwrap();
    let e = ledger.lookup(lookup(NS, "s-1")).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // No error names a token or its hash.
    for token in [LEDGER, APPROVER, ADMIN] {
        assert!(!server.stderr().contains(token));
        assert!(!server.stderr().contains(&hash(token)));
    }
}

#[tokio::test]
async fn a_sighup_reload_changes_the_scopes() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    write_tokens(&tokens, "");
    let server = Server::start(&["--tokens-file", tokens.to_str().unwrap()]);
    let mut ledger = server.client_with_token(LEDGER).await;
    ledger.claim(gated("h-1")).await.unwrap();
    assert_missing(
        &ledger.approve(approve("h-1")).await.unwrap_err(),
        "approve",
    );
    write_tokens(&tokens, ":ledger,approve");
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    let decided = loop {
        match ledger.approve(approve("h-1")).await {
            Ok(answer) => break answer.into_inner(),
            Err(e) => {
                assert_missing(&e, "approve");
                assert!(Instant::now() < deadline, "the reload did not take");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    // A line without a label decides as its tenant.
    assert_eq!(decided.record.unwrap().approval.unwrap().decided_by, "acme");
}

#[tokio::test]
async fn dev_mode_open_to_other_hosts_may_not_approve_or_purge() {
    let server = Server::start(&["--listen", "0.0.0.0:0", "--allow-unauthenticated"]);
    let mut c = server.client("acme").await;
    c.claim(gated("o-1")).await.unwrap();
    assert_missing(&c.approve(approve("o-1")).await.unwrap_err(), "approve");
    assert_missing(&c.purge(purge("o-1")).await.unwrap_err(), "admin");
    c.lookup(lookup(NS, "o-1")).await.unwrap();
    // On loopback, dev mode has every scope and decides as "dev".
    let local = Server::start(&[]);
    let mut c = local.client("acme").await;
    c.claim(gated("o-2")).await.unwrap();
    let decided = c.approve(approve("o-2")).await.unwrap().into_inner();
    assert_eq!(decided.record.unwrap().approval.unwrap().decided_by, "dev");
    c.purge(purge("o-2")).await.unwrap();
}
