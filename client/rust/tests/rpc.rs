//! The typed low-level API, one RPC at a time: Claim, Renew, KeepAlive, Complete, Fail, Lookup,
//! with Rust types out and typed errors (code and ErrorInfo reason).

use oncekey_client::{
    Arguments, Claim, Claimed, Client, Disposition, Reason, RecordStatus, StoredError, StoredResult,
};
use oncekey_tests::client::*;
use oncekey_tests::Server;
use std::time::Duration;

#[tokio::test]
async fn each_rpc_has_a_typed_method() {
    let server = Server::start(&[]);
    let client = client(&server.grpc).await;
    let nobody = key("nobody");
    let other = key("abandoned");
    let key = key("typed");
    assert_eq!(client.lookup(&key).await.unwrap(), None);

    // The server fingerprints payload_json exactly like the client fingerprints the struct.
    let json = Claim::with_arguments(
        &key,
        Arguments::PayloadJson(r#"{"quantity":1,"item":"x"}"#.into()),
    )
    .lease_ttl(Duration::from_secs(2));
    let Claimed::Acquired { lease, record, .. } = client.claim(&json).await.unwrap() else {
        panic!("acquired")
    };
    assert_eq!(record.fingerprint, Client::fingerprint(&args("x")).unwrap());
    assert_eq!((lease.token, lease.attempt), (1, 1));
    let duplicate = client
        .claim(&Claim::new(&key, &args("x")).unwrap())
        .await
        .unwrap();
    assert!(
        matches!(duplicate, Claimed::InProgress { .. }),
        "{duplicate:?}"
    );

    let renewed = client
        .renew(&key, lease.token, Some(Duration::from_secs(3)))
        .await
        .unwrap();
    assert!(renewed.expires_at > lease.expires_at);

    let mut stream = client
        .keep_alive(&key, lease.token, Some(Duration::from_secs(1)))
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    let second = stream.next().await.unwrap().unwrap();
    assert!(second.expires_at > first.expires_at);

    let record = client
        .complete(&key, lease.token, StoredResult::json(&"ok").unwrap())
        .await
        .unwrap();
    assert_eq!(record.status, RecordStatus::Succeeded);
    // Settling ends the keep-alive stream normally.
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if stream.next().await.is_none() {
                break;
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the stream ends once the record settles");

    let err = client.keep_alive(&nobody, 1, None).await.unwrap_err();
    assert_eq!(err.reason(), Some(Reason::LeaseLost));
    let err = client.renew(&key, lease.token, None).await.unwrap_err();
    assert_eq!(err.reason(), Some(Reason::AlreadySettled));

    let Claimed::Acquired { lease, .. } = client
        .claim(&Claim::new(&other, &args("y")).unwrap())
        .await
        .unwrap()
    else {
        panic!("acquired")
    };
    let gone = client
        .fail(
            &other,
            lease.token,
            StoredError::default(),
            Disposition::Abandon,
        )
        .await
        .unwrap();
    assert_eq!(gone, None);
    assert_eq!(client.lookup(&other).await.unwrap(), None);
}
