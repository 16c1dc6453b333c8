//! The operator features against the real binary (embedded store, dev mode on loopback, where
//! every caller has every scope): the approval gate with `wait` held until decided, dry runs,
//! the attempt cap, Purge, and the errors of each — code, ErrorInfo reason and the field named.

use oncekey_api::v1;
use oncekey_api::v1::{ClaimOutcome, RecordStatus};
use oncekey_tests::*;
use std::time::Duration;
use tonic::Code;

const NS: &str = "refunds.issue";
const TENANT: &str = "acme";

fn gated(key: &str) -> v1::ClaimRequest {
    v1::ClaimRequest {
        require_approval: true,
        ..claim(NS, key, r#"{"order":"o-1","cents":1200}"#)
    }
}

fn plain(key: &str) -> v1::ClaimRequest {
    claim(NS, key, r#"{"order":"o-1","cents":1200}"#)
}

fn approve(key: &str, note: &str) -> v1::ApproveRequest {
    v1::ApproveRequest {
        namespace: NS.into(),
        key: key.into(),
        note: note.into(),
        ..Default::default()
    }
}

fn reject(key: &str, note: &str) -> v1::RejectRequest {
    v1::RejectRequest {
        namespace: NS.into(),
        key: key.into(),
        note: note.into(),
        ..Default::default()
    }
}

fn purge(key: &str, force: bool) -> v1::PurgeRequest {
    v1::PurgeRequest {
        namespace: NS.into(),
        key: key.into(),
        force,
    }
}

#[tokio::test]
async fn an_approval_flow_from_request_to_replay() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    let first = c.claim(gated("r-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&first), ClaimOutcome::AwaitingApproval);
    assert!(first.lease.is_none());
    let record = first.record.unwrap();
    assert_eq!(status(&record), RecordStatus::AwaitingApproval);
    assert!(record.require_approval);
    assert_eq!((record.fencing_token, record.attempt), (0, 0));
    // Every later Claim awaits approval too, even one that does not ask for it.
    let again = c.claim(plain("r-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&again), ClaimOutcome::AwaitingApproval);

    let approved = c
        .approve(approve("r-1", "refund ok"))
        .await
        .unwrap()
        .into_inner();
    let record = approved.record.unwrap();
    assert_eq!(status(&record), RecordStatus::Approved);
    let approval = record.approval.unwrap();
    assert_eq!(approval.decision, v1::ApprovalDecision::Approved as i32);
    assert_eq!(
        (approval.decided_by.as_str(), approval.note.as_str()),
        ("dev", "refund ok")
    );
    assert!(approval.decided_at.is_some());
    // A lost answer is safe to resend.
    c.approve(approve("r-1", "refund ok")).await.unwrap();

    let acquired = c.claim(plain("r-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&acquired), ClaimOutcome::Acquired);
    let lease = acquired.lease.unwrap();
    assert_eq!((lease.token, lease.attempt), (1, 1));
    c.complete(complete(NS, "r-1", 1, result(200, b"refunded")))
        .await
        .unwrap();
    let replay = c.claim(plain("r-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&replay), ClaimOutcome::Completed);
    assert_eq!(replay.record.unwrap().result.unwrap().body, b"refunded");

    // The receipts tell the story.
    let looked = c
        .lookup(v1::LookupRequest {
            include_history: true,
            ..lookup(NS, "r-1")
        })
        .await
        .unwrap()
        .into_inner();
    let kinds: Vec<_> = looked
        .history
        .iter()
        .map(|e| (e.kind, e.outcome.as_str()))
        .collect();
    use v1::EventKind as K;
    assert!(
        kinds.contains(&(K::Approve as i32, "APPROVED")),
        "{kinds:?}"
    );
    let approve_receipt = looked.history.iter().find(|e| e.kind == K::Approve as i32);
    assert_eq!(approve_receipt.unwrap().owner, "dev");

    // Decisions now are refused: the record moved on.
    let e = c.approve(approve("r-1", "")).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Code::FailedPrecondition, "NOT_AWAITING_APPROVAL".into())
    );
}

#[tokio::test]
async fn a_rejection_is_replayed_as_a_403_failure() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    c.claim(gated("r-2")).await.unwrap();
    let rejected = c
        .reject(reject("r-2", "amount above the limit"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(status(&rejected), RecordStatus::Failed);
    let replay = c.claim(plain("r-2")).await.unwrap().into_inner();
    assert_eq!(outcome(&replay), ClaimOutcome::Failed);
    let error = replay.record.unwrap().error.unwrap();
    assert_eq!(
        (error.code, error.message.as_str()),
        (403, "amount above the limit")
    );
    c.reject(reject("r-2", "again")).await.unwrap();
    let e = c.approve(approve("r-2", "")).await.unwrap_err();
    assert_eq!(reason(&e), "NOT_AWAITING_APPROVAL");
}

#[tokio::test]
async fn a_claim_with_wait_is_held_until_the_approval() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    c.claim(gated("r-3")).await.unwrap();
    let mut waiter = server.client(TENANT).await;
    let held = tokio::spawn(async move {
        let request = v1::ClaimRequest {
            wait: Some(ms(30_000)),
            ..plain("r-3")
        };
        waiter.claim(request).await.unwrap().into_inner()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.approve(approve("r-3", "go")).await.unwrap();
    let answer = held.await.unwrap();
    assert_eq!(outcome(&answer), ClaimOutcome::Acquired, "{answer:?}");
    assert_eq!(answer.lease.unwrap().token, 1);
}

#[tokio::test]
async fn a_dry_run_answers_without_writing_anything() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    let dry = |key: &str| v1::ClaimRequest {
        dry_run: true,
        ..plain(key)
    };
    let answer = c.claim(dry("d-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::Acquired);
    assert!(answer.record.is_none() && answer.lease.is_none());
    let e = c.lookup(lookup(NS, "d-1")).await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "nothing was created");
    let gated_dry = v1::ClaimRequest {
        dry_run: true,
        ..gated("d-1")
    };
    let answer = c.claim(gated_dry).await.unwrap().into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::AwaitingApproval);

    let held = c.claim(plain("d-1")).await.unwrap().into_inner();
    let version_before = held.record.unwrap().updated_at;
    let answer = c.claim(dry("d-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::InProgress);
    assert!(answer.lease.is_none(), "never a lease");
    let shown = answer.record.unwrap();
    assert_eq!((shown.dedup_hits, shown.updated_at), (0, version_before));
    let other = v1::ClaimRequest {
        dry_run: true,
        ..claim(NS, "d-1", r#"{"other":true}"#)
    };
    let e = c.claim(other).await.unwrap_err();
    assert_eq!(reason(&e), "KEY_REUSED");
    let looked = c
        .lookup(v1::LookupRequest {
            include_history: true,
            ..lookup(NS, "d-1")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(looked.record.unwrap().dedup_hits, 0, "no dedup hit");
    assert_eq!(looked.history.len(), 1, "no receipt: {:?}", looked.history);
}

#[tokio::test]
async fn the_attempt_cap_fails_the_operation_with_429() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    let capped = v1::ClaimRequest {
        max_attempts: 2,
        ..plain("c-1")
    };
    for token in 1..=2 {
        let answer = c.claim(capped.clone()).await.unwrap().into_inner();
        assert_eq!(answer.lease.unwrap().token, token);
        c.fail(fail(NS, "c-1", token, v1::Disposition::Retryable, "down"))
            .await
            .unwrap();
    }
    let answer = c.claim(plain("c-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&answer), ClaimOutcome::Failed);
    let record = answer.record.unwrap();
    assert_eq!((record.attempt, record.max_attempts), (2, 2));
    let error = record.error.unwrap();
    assert_eq!(
        (error.code, error.message.as_str()),
        (429, "attempts exhausted")
    );
    let looked = c
        .lookup(v1::LookupRequest {
            include_history: true,
            ..lookup(NS, "c-1")
        })
        .await
        .unwrap()
        .into_inner();
    let last = looked.history.last().unwrap();
    assert_eq!(
        (last.outcome.as_str(), last.reason.as_str()),
        ("FAILED", "ATTEMPTS_EXHAUSTED")
    );
}

#[tokio::test]
async fn purge_removes_the_record_and_the_old_holder_loses_its_lease() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    c.claim(plain("p-1")).await.unwrap();
    c.purge(purge("p-1", false)).await.unwrap();
    let e = c.lookup(lookup(NS, "p-1")).await.unwrap_err();
    assert_eq!((e.code(), reason(&e)), (Code::NotFound, "NOT_FOUND".into()));
    let e = c
        .complete(complete(NS, "p-1", 1, result(200, b"late")))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "LEASE_LOST");
    let fresh = c
        .claim(claim(NS, "p-1", r#"{"any":"arguments"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        fresh.lease.unwrap().token,
        2,
        "the fencing sequence continues"
    );
    let e = c.purge(purge("never-claimed", true)).await.unwrap_err();
    assert_eq!((e.code(), reason(&e)), (Code::NotFound, "NOT_FOUND".into()));

    // An unsettled at-most-once operation needs force.
    let amo = v1::ClaimRequest {
        semantics: v1::Semantics::AtMostOnce as i32,
        ..plain("purge-me-amo-7c1")
    };
    c.claim(amo).await.unwrap();
    let e = c.purge(purge("purge-me-amo-7c1", false)).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Code::FailedPrecondition, "UNSETTLED_AT_MOST_ONCE".into())
    );
    assert!(
        c.lookup(lookup(NS, "purge-me-amo-7c1")).await.is_ok(),
        "nothing changed"
    );
    c.purge(purge("purge-me-amo-7c1", true)).await.unwrap();
    // Logged with the key's hash, never the key.
    let log = server.stderr();
    assert!(log.contains("record purged"), "{log}");
    assert!(!log.contains("purge-me-amo-7c1"), "the raw key is logged");
}

#[tokio::test]
async fn another_tenant_can_neither_decide_nor_purge() {
    let server = Server::start(&[]);
    let mut mine = server.client(TENANT).await;
    let mut theirs = server.client("globex").await;
    mine.claim(gated("t-1")).await.unwrap();
    let e = theirs.approve(approve("t-1", "")).await.unwrap_err();
    assert_eq!(reason(&e), "NOT_FOUND");
    let e = theirs.reject(reject("t-1", "")).await.unwrap_err();
    assert_eq!(reason(&e), "NOT_FOUND");
    let e = theirs.purge(purge("t-1", true)).await.unwrap_err();
    assert_eq!(reason(&e), "NOT_FOUND");
    let record = mine.lookup(lookup(NS, "t-1")).await.unwrap().into_inner();
    assert_eq!(
        status(&record.record.unwrap()),
        RecordStatus::AwaitingApproval
    );
    // Their own Claim of the same key is their own record.
    let own = theirs.claim(plain("t-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&own), ClaimOutcome::Acquired);
}

#[tokio::test]
async fn bad_input_names_the_field_and_changes_nothing() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    c.claim(gated("b-1")).await.unwrap();
    let cases: Vec<(v1::ApproveRequest, &str, &str)> = vec![
        (
            v1::ApproveRequest {
                fingerprint: vec![1; 5],
                ..approve("b-1", "")
            },
            "fingerprint",
            "INVALID_FIELD",
        ),
        (approve("b-1", &"n".repeat(1025)), "note", "TOO_LARGE"),
        (approve("b-1", "bell\u{7}"), "note", "INVALID_FIELD"),
        (
            v1::ApproveRequest {
                namespace: "Bad NS".into(),
                ..approve("b-1", "")
            },
            "namespace",
            "INVALID_FIELD",
        ),
        (approve("", ""), "key", "INVALID_FIELD"),
    ];
    for (request, field, why) in cases {
        // The same fields of a Reject are validated the same way.
        let rejection = v1::RejectRequest {
            namespace: request.namespace.clone(),
            key: request.key.clone(),
            fingerprint: request.fingerprint.clone(),
            note: request.note.clone(),
        };
        let e = c.approve(request).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{field}");
        assert_eq!(
            (bad_field(&e), reason(&e)),
            (field.to_owned(), why.to_owned())
        );
        let e = c.reject(rejection).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "reject {field}");
        assert_eq!(
            (bad_field(&e), reason(&e)),
            (field.to_owned(), why.to_owned())
        );
    }
    // A fingerprint pinned to other arguments than the stored ones.
    let e = c
        .reject(v1::RejectRequest {
            fingerprint: vec![9; 32],
            ..reject("b-1", "")
        })
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "KEY_REUSED");
    let record = c.lookup(lookup(NS, "b-1")).await.unwrap().into_inner();
    assert_eq!(
        status(&record.record.unwrap()),
        RecordStatus::AwaitingApproval
    );
    // A dry run validates like any Claim.
    let e = c
        .claim(v1::ClaimRequest {
            dry_run: true,
            lease_ttl: Some(ms(0)),
            ..plain("b-2")
        })
        .await
        .unwrap_err();
    assert_eq!(bad_field(&e), "lease_ttl");
    let e = c
        .purge(v1::PurgeRequest {
            namespace: String::new(),
            ..purge("b-1", true)
        })
        .await
        .unwrap_err();
    assert_eq!(bad_field(&e), "namespace");
    let e = c.purge(purge(&"k".repeat(300), true)).await.unwrap_err();
    assert_eq!(
        (e.code(), bad_field(&e)),
        (Code::InvalidArgument, "key".into())
    );
    // None of it changed the record.
    let record = c.lookup(lookup(NS, "b-1")).await.unwrap().into_inner();
    let record = record.record.unwrap();
    assert_eq!(status(&record), RecordStatus::AwaitingApproval);
    assert!(record.approval.is_none());
}

#[tokio::test]
async fn approval_and_cap_of_a_later_claim_are_ignored() {
    let server = Server::start(&[]);
    let mut c = server.client(TENANT).await;
    let first = c.claim(plain("i-1")).await.unwrap().into_inner();
    assert_eq!(outcome(&first), ClaimOutcome::Acquired);
    // Only the first Claim of a key sets require_approval and max_attempts.
    let later = c
        .claim(v1::ClaimRequest {
            require_approval: true,
            max_attempts: 1,
            ..plain("i-1")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&later), ClaimOutcome::InProgress);
    let record = later.record.unwrap();
    assert_eq!(status(&record), RecordStatus::Processing);
    assert_eq!((record.require_approval, record.max_attempts), (false, 0));
    // Released for a retry, it is acquired again: no cap of 1, no gate.
    c.fail(fail(NS, "i-1", 1, v1::Disposition::Retryable, "down"))
        .await
        .unwrap();
    let again = c
        .claim(v1::ClaimRequest {
            require_approval: true,
            max_attempts: 1,
            ..plain("i-1")
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&again), ClaimOutcome::Acquired);
    assert_eq!(again.lease.unwrap().token, 2);
}
