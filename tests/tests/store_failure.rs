//! The embedded store when a write cannot reach the disk: it stops taking writes instead of
//! guessing what is durable, keeps answering reads, says so (readiness, log), and a restart
//! recovers everything it acknowledged.

use oncekey_api::v1::{ClaimOutcome, RecordStatus};
use oncekey_tests::*;
use std::time::Duration;
use tonic::Code;

/// The embedded store when its files cannot grow (what a full disk looks like; here the file-size
/// limit, `ulimit -f`, with SIGXFSZ at its default action: the server must handle it or die): the
/// write that hits it and every write after answer STORE_UNAVAILABLE, reads still
/// answer, /readyz fails and the log says why. A restart with room again has every acknowledged
/// write and takes new ones.
#[tokio::test]
async fn a_store_that_cannot_write_refuses_writes_until_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start_with_file_limit(&data, &[], 16 * 1024);
    let mut c = server.client("t").await;
    let body = vec![b'x'; 1000 * 1000];
    let ns = "disk.full";
    let mut acknowledged = Vec::new();
    let mut refusal = None;
    for i in 0..64 {
        let key = format!("k{i}");
        let step = async {
            let claimed = c.claim(claim(ns, &key, "{}")).await?.into_inner();
            let token = claimed.lease.expect("a fresh key is acquired").token;
            c.complete(complete(ns, &key, token, result(201, &body)))
                .await
                .map(|_| ())
        };
        match step.await {
            Ok(()) => acknowledged.push(key),
            Err(status) => {
                refusal = Some(status);
                break;
            }
        }
    }
    let refusal =
        refusal.expect("64 results of 1 MB cannot all fit under a 16 MiB file-size limit");
    assert_eq!(refusal.code(), Code::Unavailable, "{refusal:?}");
    assert_eq!(reason(&refusal), "STORE_UNAVAILABLE");
    assert!(
        !acknowledged.is_empty(),
        "nothing was written before the limit"
    );
    println!(
        "{} Completes of 1 MB acknowledged, then: {}",
        acknowledged.len(),
        refusal.message()
    );

    // Every later write is refused, even a small one; reads still answer.
    let again = c.claim(claim(ns, "small", "{}")).await.unwrap_err();
    assert_eq!(
        (again.code(), reason(&again).as_str()),
        (Code::Unavailable, "STORE_UNAVAILABLE")
    );
    let first = c.lookup(lookup(ns, &acknowledged[0])).await.unwrap();
    assert_eq!(
        status(first.get_ref().record.as_ref().unwrap()),
        RecordStatus::Succeeded
    );
    let (code, _) = http_get(&server.admin, "/readyz").await;
    assert_eq!(code, 503);
    let (_, metrics) = http_get(&server.admin, "/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l == "oncekey_embedded_write_failed 1"),
        "/metrics does not show the failed store:\n{metrics}"
    );
    let log = server.stderr();
    assert!(
        log.contains("refusing writes until a restart"),
        "the log does not say why: {log}"
    );
    // The write past the limit raised SIGXFSZ (whose default action ends the process): the server
    // handled it, and the write failed instead.
    assert!(log.contains("SIGXFSZ"), "no SIGXFSZ was raised: {log}");
    server.terminate(Duration::from_secs(10));

    // Restarted with room: everything acknowledged is there, and writes work again.
    let server = Server::start_on(&data, &[]);
    let mut c = server.client("t").await;
    for key in &acknowledged {
        let found = c.lookup(lookup(ns, key)).await.unwrap().into_inner();
        let record = found.record.unwrap();
        assert_eq!(status(&record), RecordStatus::Succeeded, "{key}");
        assert_eq!(record.result.unwrap().body.len(), body.len(), "{key}");
    }
    let fresh = c.claim(claim(ns, "after-restart", "{}")).await.unwrap();
    assert_eq!(outcome(fresh.get_ref()), ClaimOutcome::Acquired);
}
