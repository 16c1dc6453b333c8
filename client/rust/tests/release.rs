//! Releasing a lease under which nothing ran, against the real server: the one-call API releases
//! a lease that had run out before its Claim's answer arrived with `nothing_ran`, so an
//! operation capped at one attempt keeps it (before, the release used it up and the operation
//! was FAILED 429 for good); `Client::release_unused` says the same for a caller's own lease.

use oncekey_client::{Claim, Claimed, OnceError, RecordStatus, StoredError};
use oncekey_tests::client::*;
use oncekey_tests::Server;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A server whose clock runs 2 s behind grants 1 s leases that have ended on this machine's
/// clock when the answer arrives, as a Claim answered after its lease would.
#[tokio::test]
async fn a_lapsed_lease_released_by_the_one_call_api_leaves_the_attempt() {
    let server = Server::start_with(&[], &[("ONCEKEY_TEST_CLOCK_SKEW_MS", "-2000")]);
    let client = client(&server.grpc).await;
    let key = key("one-attempt");
    let runs = &AtomicU32::new(0);
    let err = client
        .once(&key, &args("x"))
        .max_attempts(1)
        .lease_ttl(Duration::from_secs(1))
        .wait_timeout(Duration::from_millis(500))
        .run(|_| async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, TestError>(Output {
                id: "ran".into(),
                token: 0,
            })
        })
        .await
        .unwrap_err();
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");
    assert!(
        matches!(
            err,
            OnceError::LeaseLost {
                operation: None,
                ..
            }
        ),
        "released and claimed again while the wait lasted, never FAILED 429: {err:?}"
    );
    let record = client.lookup(&key).await.unwrap().unwrap();
    assert_eq!(record.status, RecordStatus::Retry);
    // A lease long enough to outlast the skew: acquired, the one attempt still there.
    let claim = Claim::new(&key, &args("x"))
        .unwrap()
        .max_attempts(1)
        .lease_ttl(Duration::from_secs(10));
    let claimed = client.claim(&claim).await.unwrap();
    assert!(matches!(claimed, Claimed::Acquired { .. }), "{claimed:?}");
}

#[tokio::test]
async fn release_unused_gives_the_attempt_back_and_fail_does_not() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let error = || StoredError {
        code: 0,
        message: "not started".into(),
        details: Vec::new(),
    };
    for (name, unused) in [("unused", true), ("spent", false)] {
        let key = key(name);
        let claim = Claim::new(&key, &args("x")).unwrap().max_attempts(1);
        let Claimed::Acquired { lease, .. } = client.claim(&claim).await.unwrap() else {
            panic!("a new key is acquired")
        };
        let released = match unused {
            true => client.release_unused(&key, lease.token, error()).await,
            false => {
                client
                    .fail(
                        &key,
                        lease.token,
                        error(),
                        oncekey_client::Disposition::Retryable,
                    )
                    .await
            }
        };
        assert_eq!(released.unwrap().unwrap().status, RecordStatus::Retry);
        match (unused, client.claim(&claim).await.unwrap()) {
            (true, Claimed::Acquired { lease, .. }) => assert_eq!(lease.token, 2),
            (false, Claimed::Failed { error, .. }) => assert_eq!(error.code, 429),
            (_, other) => panic!("{name}: {other:?}"),
        }
    }
}
