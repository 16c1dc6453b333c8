//! Expiry by state through the real binary, on both stores: servers whose clocks run an hour and
//! more ahead (the test-only `ONCEKEY_TEST_CLOCK_SKEW_MS`) see what the records claimed "now" have become.
//!
//! - an unsettled AT_MOST_ONCE record never expires: long after its retention it still answers
//!   NEEDS_RECONCILIATION with its first token (the sweeper leaves it), and its `expires_at` is
//!   unset on the wire;
//! - an unsettled AT_LEAST_ONCE record expires `retention` after its lease end: a Claim within
//!   that window takes it over with token 2 (never token 1 again);
//! - a settled record still expires `retention` after it settled: the key is a new operation.
//!
//! Embedded: one data directory, restarted with the skew. CQL: servers with different clocks on
//! one keyspace at once.

use oncekey_api::v1::{self, ClaimOutcome, RecordStatus, Semantics};
use oncekey_tests::*;
use std::time::Duration;
use tonic::Code;

const NS: &str = "payments.charge";
const MINUTE: i64 = 60_000;
const HOUR: i64 = 3_600_000;
/// Past the hour-long lease of `alo`, well within the retention after it.
const LATER: i64 = HOUR + 30_000;
/// Far past every retention.
const MUCH_LATER: i64 = 1000 * HOUR;

/// A Claim with a minute of retention (the shortest), except `alo`'s hour: the window its
/// lapsed lease is kept in must not depend on how fast servers restart.
fn claim_with(key: &str, semantics: Semantics, lease: i64) -> v1::ClaimRequest {
    let retention = if key == "alo" { HOUR } else { MINUTE };
    v1::ClaimRequest {
        lease_ttl: Some(ms(lease)),
        retention: Some(ms(retention)),
        semantics: semantics as i32,
        ..claim(NS, key, r#"{"order":1}"#)
    }
}

/// Flags of every server here: sweeps run often.
const SWEEP_OFTEN: [&str; 2] = ["--sweep-interval", "100ms"];

/// The environment of a server whose clock runs `ms` ahead.
fn skew(ms: &str) -> [(&'static str, &str); 1] {
    [("ONCEKEY_TEST_CLOCK_SKEW_MS", ms)]
}

/// Claims made "now": `amo` (at-most-once, holder gone), `alo` (at-least-once with an hour's
/// lease and retention, holder gone) and `done` (completed).
async fn claim_now(server: &Server) {
    let mut c = server.client("acme").await;
    let amo = c
        .claim(claim_with("amo", Semantics::AtMostOnce, 1_000))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&amo), ClaimOutcome::Acquired);
    let record = amo.record.unwrap();
    assert_eq!(record.expires_at, None, "kept until it settles");

    let alo = c
        .claim(claim_with("alo", Semantics::AtLeastOnce, HOUR))
        .await
        .unwrap()
        .into_inner();
    let lease_end = alo.lease.unwrap().expires_at.unwrap();
    let expires = alo.record.unwrap().expires_at.unwrap();
    assert_eq!(
        expires.seconds,
        lease_end.seconds + HOUR / 1000,
        "retention after the lease end"
    );

    let done = c
        .claim(claim_with("done", Semantics::AtLeastOnce, 1_000))
        .await
        .unwrap()
        .into_inner();
    let token = done.lease.unwrap().token;
    c.complete(complete(NS, "done", token, result(200, b"ok")))
        .await
        .unwrap();
}

/// What a server `LATER` sees.
async fn check_later(server: &Server) {
    // Sweeps have run on the embedded store.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut c = server.client("acme").await;
    let amo = c
        .claim(claim_with("amo", Semantics::AtMostOnce, 1_000))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&amo), ClaimOutcome::NeedsReconciliation);
    let record = amo.record.unwrap();
    assert_eq!(
        (status(&record), record.fencing_token, record.expires_at),
        (RecordStatus::Unknown, 1, None)
    );

    let alo = c
        .claim(claim_with("alo", Semantics::AtLeastOnce, 1_000))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&alo), ClaimOutcome::Acquired);
    let lease = alo.lease.unwrap();
    assert_eq!(
        (lease.token, lease.attempt),
        (2, 2),
        "taken over, not forgotten"
    );
    let old = c
        .complete(complete(NS, "alo", 1, result(200, b"late")))
        .await
        .unwrap_err();
    assert_eq!(
        (old.code(), reason(&old).as_str()),
        (Code::FailedPrecondition, "LEASE_LOST")
    );

    let gone = c.lookup(lookup(NS, "done")).await.unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
    let again = c
        .claim(claim_with("done", Semantics::AtLeastOnce, 1_000))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (outcome(&again), again.lease.unwrap().token),
        (ClaimOutcome::Acquired, 1),
        "a new operation"
    );
}

/// What a server `MUCH_LATER` sees: the at-most-once record still waits for its reconciler,
/// which settles it; from then on it expires like any settled record.
async fn check_much_later(server: &Server) {
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut c = server.client("acme").await;
    let found = c
        .lookup(lookup(NS, "amo"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(
        (status(&found), found.fencing_token, found.expires_at),
        (RecordStatus::Unknown, 1, None)
    );
    let reconcile = v1::ClaimRequest {
        reconcile: true,
        ..claim_with("amo", Semantics::AtMostOnce, 1_000)
    };
    let lease = c
        .claim(reconcile)
        .await
        .unwrap()
        .into_inner()
        .lease
        .unwrap();
    assert_eq!(lease.token, 2);
    let done = c
        .complete(complete(NS, "amo", 2, result(200, b"it had happened")))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    let (settled, expires) = (done.updated_at.unwrap(), done.expires_at.unwrap());
    assert_eq!(expires.seconds - settled.seconds, 60);
}

#[tokio::test]
async fn embedded_records_past_their_retention() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut now = Server::start_on(&data, &[]);
    claim_now(&now).await;
    now.terminate(Duration::from_secs(30));

    let later_ms = LATER.to_string();
    let mut later = Server::start_with_env(&data, &SWEEP_OFTEN, &skew(&later_ms));
    check_later(&later).await;
    later.terminate(Duration::from_secs(30));

    let much_later_ms = MUCH_LATER.to_string();
    let much_later = Server::start_with_env(&data, &SWEEP_OFTEN, &skew(&much_later_ms));
    check_much_later(&much_later).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs Cassandra: scripts/test cql runs it"]
async fn cql_records_past_their_retention() {
    let node = cql_node();
    let keyspace = migrated_keyspace(node);
    let start = |skew_ms: i64| {
        let mut flags = vec![
            "--store",
            "cql",
            "--cql-nodes",
            node,
            "--cql-keyspace",
            &keyspace,
        ];
        flags.extend(SWEEP_OFTEN);
        let skew_ms = skew_ms.to_string();
        tokio::task::block_in_place(|| Server::start_with(&flags, &skew(&skew_ms)))
    };
    let (now, later, much_later) = (start(0), start(LATER), start(MUCH_LATER));
    claim_now(&now).await;
    check_later(&later).await;
    check_much_later(&much_later).await;
}
