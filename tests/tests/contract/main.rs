//! The Claim transitions of docs/api.md#claim-transitions over real gRPC against the real binary: every Claim rule, Complete/Fail/Renew with
//! their errors, Lookup, KeepAlive and Claim.wait (`leases`), and the health and admin endpoints
//! (`endpoints`).

mod endpoints;
mod leases;

use oncekey_api::v1::{self, ClaimOutcome, Disposition, RecordStatus};
use oncekey_tests::*;
use std::time::Duration;
use tonic::Code;

const NS: &str = "payments.charge";

#[tokio::test]
async fn claim_complete_replay_and_key_reuse() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;

    let first = c
        .claim(claim(NS, "order-1", r#"{"amount":100,"currency":"EUR"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&first), ClaimOutcome::Acquired);
    let lease = first.lease.unwrap();
    assert_eq!((lease.token, lease.attempt), (1, 1));
    assert_eq!(
        status(first.record.as_ref().unwrap()),
        RecordStatus::Processing
    );

    // Rule 6: a duplicate while in flight.
    let dup = c
        .claim(claim(NS, "order-1", r#"{"currency":"EUR","amount":100}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&dup), ClaimOutcome::InProgress);
    assert!(dup.retry_after.is_some() && dup.lease.is_none());

    let body = b"{\"charge\":\"ch_1\"}\x00\xff".to_vec();
    let done = c
        .complete(complete(NS, "order-1", 1, result(201, &body)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status(done.record.as_ref().unwrap()),
        RecordStatus::Succeeded
    );

    // Rule 4: replay byte for byte, counted.
    let replay = c
        .claim(claim(NS, "order-1", r#"{"amount":1e2,"currency":"EUR"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&replay), ClaimOutcome::Completed);
    let record = replay.record.unwrap();
    assert_eq!(record.result.as_ref().unwrap().body, body);
    assert_eq!(record.result.as_ref().unwrap().code, 201);
    assert_eq!(record.dedup_hits, 2);

    // Rule 3: another payload → KEY_REUSED, nothing changes.
    let err = c
        .claim(claim(NS, "order-1", r#"{"amount":5}"#))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::FailedPrecondition, "KEY_REUSED")
    );
    let after = c
        .lookup(lookup(NS, "order-1"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(
        (after.dedup_hits, status(&after)),
        (2, RecordStatus::Succeeded)
    );

    // The identical Complete again is OK; a different one is ALREADY_SETTLED.
    c.complete(complete(NS, "order-1", 1, result(201, &body)))
        .await
        .unwrap();
    let err = c
        .complete(complete(NS, "order-1", 1, result(200, b"other")))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "ALREADY_SETTLED");
    // A token that never held it: LEASE_LOST.
    let err = c
        .complete(complete(NS, "order-1", 9, result(201, &body)))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::FailedPrecondition, "LEASE_LOST")
    );
}

#[tokio::test]
async fn fail_final_retryable_and_abandon() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;

    c.claim(claim(NS, "final", "{}")).await.unwrap();
    c.fail(fail(NS, "final", 1, Disposition::Final, "card declined"))
        .await
        .unwrap();
    let replay = c
        .claim(claim(NS, "final", "{}"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&replay), ClaimOutcome::Failed);
    assert_eq!(
        replay.record.unwrap().error.unwrap().message,
        "card declined"
    );

    // Rule 9: RETRY is acquired again with token+1.
    c.claim(claim(NS, "retry", "{}")).await.unwrap();
    let rec = c
        .fail(fail(NS, "retry", 1, Disposition::Retryable, "timeout"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status(rec.record.as_ref().unwrap()), RecordStatus::Retry);
    let again = c
        .claim(claim(NS, "retry", "{}"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (outcome(&again), again.lease.unwrap().token),
        (ClaimOutcome::Acquired, 2)
    );
    let err = c
        .renew(v1::RenewRequest {
            namespace: NS.into(),
            key: "retry".into(),
            lease_token: 1,
            lease_ttl: None,
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "LEASE_LOST");

    // ABANDON deletes: the key may be claimed again, even with another payload.
    c.claim(claim(NS, "abandon", r#"{"v":1}"#)).await.unwrap();
    let gone = c
        .fail(fail(
            NS,
            "abandon",
            1,
            Disposition::Abandon,
            "invalid input",
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(gone.record.is_none());
    // The identical ABANDON again (a lost answer retried) is OK.
    let again = c
        .fail(fail(
            NS,
            "abandon",
            1,
            Disposition::Abandon,
            "invalid input",
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(again.record.is_none());
    // ABANDON of a key nobody claimed is a lease the caller does not hold.
    let err = c
        .fail(fail(NS, "never-claimed", 1, Disposition::Abandon, "x"))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::FailedPrecondition, "LEASE_LOST")
    );
    let err = c.lookup(lookup(NS, "abandon")).await.unwrap_err();
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::NotFound, "NOT_FOUND")
    );
    let fresh = c
        .claim(claim(NS, "abandon", r#"{"v":2}"#))
        .await
        .unwrap()
        .into_inner();
    // A new claim with new arguments; its token continues the sequence, so the abandoning
    // holder's token 1 cannot act on it.
    assert_eq!(
        (outcome(&fresh), fresh.lease.unwrap().token),
        (ClaimOutcome::Acquired, 2)
    );
    let err = c
        .complete(complete(NS, "abandon", 1, result(200, b"stale")))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "LEASE_LOST");
}

#[tokio::test]
async fn expired_leases_takeover_and_reconciliation() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    let short = |key: &str, semantics: v1::Semantics| v1::ClaimRequest {
        lease_ttl: Some(ms(1000)),
        semantics: semantics as i32,
        ..claim(NS, key, "{}")
    };

    // Rule 7: at-least-once takeover after the lease ran out.
    c.claim(short("alo", v1::Semantics::AtLeastOnce))
        .await
        .unwrap();
    // Rule 8: at-most-once becomes UNKNOWN.
    c.claim(short("amo", v1::Semantics::AtMostOnce))
        .await
        .unwrap();
    // A lease that ran out but was not taken over stays valid for its holder.
    c.claim(short("late", v1::Semantics::AtLeastOnce))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let taken = c
        .claim(short("alo", v1::Semantics::AtLeastOnce))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&taken), ClaimOutcome::Acquired);
    assert_eq!(
        (
            taken.lease.as_ref().unwrap().token,
            taken.lease.unwrap().attempt
        ),
        (2, 2)
    );
    let err = c
        .complete(complete(NS, "alo", 1, result(200, b"late")))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "LEASE_LOST");

    let unknown = c
        .claim(short("amo", v1::Semantics::AtMostOnce))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&unknown), ClaimOutcome::NeedsReconciliation);
    assert_eq!(
        status(unknown.record.as_ref().unwrap()),
        RecordStatus::Unknown
    );
    let reconcile = v1::ClaimRequest {
        reconcile: true,
        ..short("amo", v1::Semantics::AtMostOnce)
    };
    let rec = c.claim(reconcile).await.unwrap().into_inner();
    assert_eq!(
        (outcome(&rec), rec.lease.unwrap().token),
        (ClaimOutcome::Acquired, 2)
    );

    let late = c
        .complete(complete(NS, "late", 1, result(200, b"ok")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        status(late.record.as_ref().unwrap()),
        RecordStatus::Succeeded
    );
}
