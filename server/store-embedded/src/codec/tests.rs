//! Unit tests of `codec` (the parent module).

use super::*;

#[test]
fn ids_decode_and_prefixes_select_a_tenant_or_namespace() {
    let id = RecordId::new("acme", "payments.charge", "order/1");
    let bytes = encode_id(&id);
    assert_eq!(decode_id(&bytes).unwrap(), id);
    assert!(decode_id(&bytes[..bytes.len() - 1]).is_err());
    assert!(bytes.starts_with(&id_prefix("acme", None)));
    assert!(bytes.starts_with(&id_prefix("acme", Some("payments.charge"))));
    assert!(!bytes.starts_with(&id_prefix("acm", None)));
    assert!(!bytes.starts_with(&id_prefix("acme", Some("payments"))));
    assert_eq!(tenant_part(&bytes).unwrap(), id_prefix("acme", None));
}

#[test]
fn ids_do_not_collide() {
    let a = RecordId::new("t", "ns", "a:b");
    let b = RecordId::new("t", "ns:a", "b");
    assert_ne!(encode_id(&a), encode_id(&b));
}

#[test]
fn records_round_trip() {
    let id = RecordId::new("t", "ns", "k");
    let args = oncekey_ledger::ClaimArgs {
        parent: Some(ParentRef {
            namespace: "p".into(),
            key: "pk".into(),
        }),
        ..oncekey_ledger::ClaimArgs::for_test([3; 32], Semantics::AtMostOnce, 1000, 60_000, "w")
    };
    let mut record = oncekey_ledger::claim(&id, None, &args, 5)
        .unwrap()
        .record()
        .clone();
    record.result = Some(OpResult {
        code: 1,
        body: vec![0, 1],
        content_type: "x".into(),
        metadata: [("a".into(), "b".into())].into(),
    });
    record.error = Some(OpError {
        code: 2,
        message: "m".into(),
        details: vec![9],
    });
    let encoded = encode_record(&record);
    assert!(
        encoded.outcome.is_none(),
        "a small outcome stays in the row"
    );
    let bytes = encoded.row;
    assert_eq!(expires_at(&bytes).unwrap(), record.expires_at);
    assert!(!head(&bytes).unwrap().outcome_apart);
    assert_eq!(decode_record(id.clone(), &bytes, None).unwrap(), record);
    assert!(decode_record(id, b"\xff\xff", None).is_err());
    assert!(expires_at(b"\xff\xff").is_err());

    // A large outcome goes apart; the row alone then lacks it.
    record.result.as_mut().unwrap().body = vec![7; OUTCOME_APART_BYTES];
    let encoded = encode_record(&record);
    let outcome = encoded
        .outcome
        .as_deref()
        .expect("a large outcome is apart");
    assert!(
        encoded.row.len() < OUTCOME_APART_BYTES,
        "{}",
        encoded.row.len()
    );
    assert!(head(&encoded.row).unwrap().outcome_apart);
    let id = RecordId::new("t", "ns", "k");
    assert_eq!(
        decode_record(id.clone(), &encoded.row, Some(outcome)).unwrap(),
        record
    );
    let mut brief = record.clone();
    brief.history.clear();
    assert_eq!(
        decode_brief(id.clone(), &encoded.row, Some(outcome)).unwrap(),
        brief
    );
    assert!(matches!(
        decode_record(id, &encoded.row, None),
        Err(StoreError::Corrupt(_))
    ));
}
