//! Bad input against the real binary: every malformed Claim field and bad tenant is refused with
//! INVALID_ARGUMENT naming the field, and the ledger is left unchanged.

use super::NS;
use oncekey_api::v1::{self, RecordStatus};
use oncekey_tests::*;
use tonic::Code;

#[tokio::test]
async fn bad_input_names_the_field_and_changes_nothing() {
    let server = Server::start(&["--max-result-bytes", "1024"]);
    let mut c = server.client("acme").await;
    let base = || claim(NS, "k", "{}");
    let cases: Vec<(v1::ClaimRequest, &str, &str)> = vec![
        (
            v1::ClaimRequest {
                namespace: "Bad NS".into(),
                ..base()
            },
            "INVALID_FIELD",
            "namespace",
        ),
        (
            v1::ClaimRequest {
                key: String::new(),
                ..base()
            },
            "INVALID_FIELD",
            "key",
        ),
        (
            v1::ClaimRequest {
                key: "a\u{7}b".into(),
                ..base()
            },
            "INVALID_FIELD",
            "key",
        ),
        (
            v1::ClaimRequest {
                key: "k".repeat(257),
                ..base()
            },
            "TOO_LARGE",
            "key",
        ),
        (
            v1::ClaimRequest {
                arguments: None,
                ..base()
            },
            "INVALID_FIELD",
            "fingerprint",
        ),
        (
            v1::ClaimRequest {
                arguments: Some(v1::claim_request::Arguments::Fingerprint(vec![0; 16])),
                ..base()
            },
            "INVALID_FIELD",
            "fingerprint",
        ),
        (claim(NS, "k", "{\"a\":"), "INVALID_FIELD", "payload_json"),
        (
            claim(NS, "k", r#"{"a":1,"a":2}"#),
            "INVALID_FIELD",
            "payload_json",
        ),
        (
            v1::ClaimRequest {
                lease_ttl: Some(ms(500)),
                ..base()
            },
            "INVALID_FIELD",
            "lease_ttl",
        ),
        (
            v1::ClaimRequest {
                lease_ttl: Some(ms(3_600_001)),
                ..base()
            },
            "INVALID_FIELD",
            "lease_ttl",
        ),
        (
            v1::ClaimRequest {
                retention: Some(ms(59_000)),
                ..base()
            },
            "INVALID_FIELD",
            "retention",
        ),
        (
            v1::ClaimRequest {
                wait: Some(ms(61_000)),
                ..base()
            },
            "INVALID_FIELD",
            "wait",
        ),
        // A nanosecond over the maximum is over it.
        (
            v1::ClaimRequest {
                lease_ttl: Some(prost_types::Duration {
                    seconds: 3600,
                    nanos: 1,
                }),
                ..base()
            },
            "INVALID_FIELD",
            "lease_ttl",
        ),
        (
            v1::ClaimRequest {
                wait: Some(prost_types::Duration {
                    seconds: 60,
                    nanos: 1,
                }),
                ..base()
            },
            "INVALID_FIELD",
            "wait",
        ),
        (
            v1::ClaimRequest {
                semantics: 42,
                ..base()
            },
            "INVALID_FIELD",
            "semantics",
        ),
        (
            v1::ClaimRequest {
                owner: "o".repeat(257),
                ..base()
            },
            "TOO_LARGE",
            "owner",
        ),
        (
            v1::ClaimRequest {
                parent: Some(v1::OperationRef {
                    namespace: "ok".into(),
                    key: String::new(),
                }),
                ..base()
            },
            "INVALID_FIELD",
            "parent.key",
        ),
    ];
    for (req, want_reason, want_field) in cases {
        let err = c.claim(req).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{want_field}: {err:?}");
        assert_eq!(
            (reason(&err).as_str(), bad_field(&err).as_str()),
            (want_reason, want_field)
        );
    }
    assert_eq!(
        c.lookup(lookup(NS, "k")).await.unwrap_err().code(),
        Code::NotFound,
        "nothing was created"
    );

    c.claim(base()).await.unwrap();
    let big = c
        .complete(complete(NS, "k", 1, result(200, &[7; 1025])))
        .await
        .unwrap_err();
    assert_eq!(
        (reason(&big).as_str(), bad_field(&big).as_str()),
        ("TOO_LARGE", "result.body")
    );
    let mut many = result(200, b"");
    many.metadata = (0..33).map(|i| (format!("k{i}"), "v".into())).collect();
    let err = c.complete(complete(NS, "k", 1, many)).await.unwrap_err();
    assert_eq!(bad_field(&err), "result.metadata");
    let err = c
        .complete(complete(NS, "k", 0, result(200, b"")))
        .await
        .unwrap_err();
    assert_eq!(bad_field(&err), "lease_token");
    let err = c
        .fail(fail(NS, "k", 1, v1::Disposition::Unspecified, "x"))
        .await
        .unwrap_err();
    assert_eq!(bad_field(&err), "disposition");
    let mut huge = fail(NS, "k", 1, v1::Disposition::Final, "x");
    huge.error.as_mut().unwrap().details = vec![0; 64 * 1024 + 1];
    assert_eq!(bad_field(&c.fail(huge).await.unwrap_err()), "error.details");
    let record = c
        .lookup(lookup(NS, "k"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    assert_eq!(
        (status(&record), record.fencing_token),
        (RecordStatus::Processing, 1),
        "still untouched"
    );

    let mut bad_tenant = server.client("not a tenant").await;
    assert_eq!(
        bad_tenant.lookup(lookup(NS, "k")).await.unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[tokio::test]
async fn numbers_a_double_cannot_hold_are_refused_naming_their_path() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    // Two ids a double cannot tell apart: each refused, neither stored.
    for payload in [
        r#"{"id":1234567890123456789}"#,
        r#"{"id":1234567890123456790}"#,
    ] {
        let err = c.claim(claim(NS, "ids", payload)).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert_eq!(
            (reason(&err).as_str(), bad_field(&err).as_str()),
            ("INVALID_FIELD", "payload_json.$.id")
        );
        assert!(err.message().contains("send it as a string"), "{err:?}");
        assert!(!err.message().contains("123456789"), "{err:?}");
    }
    let err = c
        .claim(claim(
            NS,
            "rate",
            r#"{"order":[1,{"rate":0.1000000000000000055511151231257827}]}"#,
        ))
        .await
        .unwrap_err();
    assert_eq!(bad_field(&err), "payload_json.$.order[1].rate");
    for key in ["ids", "rate"] {
        let absent = c.lookup(lookup(NS, key)).await.unwrap_err();
        assert_eq!(absent.code(), Code::NotFound, "{key}: nothing was created");
    }
    // Sent as strings, as the error says, they are two intents: the second is KEY_REUSED.
    c.claim(claim(NS, "ids", r#"{"id":"1234567890123456789"}"#))
        .await
        .unwrap();
    let err = c
        .claim(claim(NS, "ids", r#"{"id":"1234567890123456790"}"#))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "KEY_REUSED");
}
