//! Unit tests of `convert` (the parent module).

use super::*;

#[test]
fn every_outcome_has_its_wire_name() {
    for o in ClaimOutcome::ALL {
        let wire = outcome(o).as_str_name();
        assert_eq!(wire, format!("CLAIM_OUTCOME_{}", o.name()), "{o:?}");
    }
}

#[test]
fn namespaces() {
    for ok in ["payments.charge", "a", "0-x_y.z", &"a".repeat(128)] {
        assert!(valid_namespace(ok), "{ok}");
    }
    for bad in ["", "Payments", ".x", "-x", "a b", "é", &"a".repeat(129)] {
        assert!(!valid_namespace(bad), "{bad}");
    }
}

#[test]
fn keys() {
    assert!(key("key", "order-1/β").is_ok());
    assert!(matches!(key("key", ""), Err(ApiError::InvalidField { .. })));
    assert!(matches!(
        key("key", "a\nb"),
        Err(ApiError::InvalidField { .. })
    ));
    assert!(key("key", &"k".repeat(256)).is_ok());
    assert!(matches!(
        key("key", &"k".repeat(257)),
        Err(ApiError::TooLarge { .. })
    ));
}

#[test]
fn durations_are_bounded() {
    let limits = Limits::default();
    let secs = |s| {
        Some(Duration {
            seconds: s,
            nanos: 0,
        })
    };
    assert_eq!(lease_ttl(None, &limits).unwrap(), 30_000);
    assert_eq!(lease_ttl(secs(1).as_ref(), &limits).unwrap(), 1_000);
    assert_eq!(lease_ttl(secs(3600).as_ref(), &limits).unwrap(), 3_600_000);
    for bad in [0, 3601, -1] {
        let err = lease_ttl(secs(bad).as_ref(), &limits).unwrap_err();
        assert!(
            matches!(err, ApiError::InvalidField { ref field, .. } if field == "lease_ttl"),
            "{bad}"
        );
    }
}

#[test]
fn duration_bounds_are_exact_to_the_nanosecond() {
    let limits = Limits::default();
    let d = |seconds, nanos| Duration { seconds, nanos };
    let field_of = |r: Result<Millis, ApiError>| match r {
        Err(ApiError::InvalidField { field, .. }) => field,
        other => panic!("accepted: {other:?}"),
    };
    // lease_ttl: 1 s ..= 1 h.
    assert_eq!(lease_ttl(Some(&d(3600, 0)), &limits).unwrap(), MAX_LEASE);
    assert_eq!(field_of(lease_ttl(Some(&d(3600, 1)), &limits)), "lease_ttl");
    assert_eq!(
        field_of(lease_ttl(Some(&d(3600, 999_999)), &limits)),
        "lease_ttl"
    );
    assert_eq!(
        lease_ttl(Some(&d(3599, 999_999_999)), &limits).unwrap(),
        MAX_LEASE - 1
    );
    assert_eq!(
        field_of(lease_ttl(Some(&d(0, 999_999_999)), &limits)),
        "lease_ttl"
    );
    assert_eq!(lease_ttl(Some(&d(1, 1)), &limits).unwrap(), MIN_LEASE);
    // wait: at most 60 s.
    let claim = |wait| v1::ClaimRequest {
        namespace: "ns".into(),
        key: "k".into(),
        arguments: Some(v1::claim_request::Arguments::PayloadJson("{}".into())),
        wait: Some(wait),
        ..Default::default()
    };
    assert_eq!(
        claim_args(&claim(d(60, 0)), &limits).unwrap().1,
        Some(MAX_WAIT)
    );
    assert_eq!(
        field_of(claim_args(&claim(d(60, 1)), &limits).map(|_| 0)),
        "wait"
    );
    // retention: at most --max-retention.
    let over = v1::ClaimRequest {
        retention: Some(d(30 * 86_400, 1)),
        ..claim(d(0, 0))
    };
    assert_eq!(field_of(claim_args(&over, &limits).map(|_| 0)), "retention");
}

#[test]
fn claim_needs_exactly_one_fingerprint_source() {
    let limits = Limits::default();
    let mut req = v1::ClaimRequest {
        namespace: "ns".into(),
        key: "k".into(),
        ..Default::default()
    };
    assert!(
        matches!(claim_args(&req, &limits), Err(ApiError::InvalidField { ref field, .. }) if field == "fingerprint")
    );
    req.arguments = Some(v1::claim_request::Arguments::Fingerprint(vec![1; 31]));
    assert!(claim_args(&req, &limits).is_err());
    req.arguments = Some(v1::claim_request::Arguments::PayloadJson(
        "{\"b\":1,\"a\":2}".into(),
    ));
    let (args, wait) = claim_args(&req, &limits).unwrap();
    assert_eq!(
        args.fingerprint,
        fingerprint::fingerprint_json("{\"a\":2,\"b\":1}").unwrap()
    );
    assert_eq!(wait, None);
    req.arguments = Some(v1::claim_request::Arguments::PayloadJson(
        "{not json".into(),
    ));
    assert!(
        matches!(claim_args(&req, &limits), Err(ApiError::InvalidField { ref field, .. }) if field == "payload_json")
    );
}

#[test]
fn timestamps_round_trip_to_the_millisecond() {
    assert_eq!(
        timestamp(1_500),
        Timestamp {
            seconds: 1,
            nanos: 500_000_000
        }
    );
    assert_eq!(millis_of("x", &duration(61_001)).unwrap(), 61_001);
}

#[test]
fn an_owner_with_control_characters_is_refused_naming_owner() {
    let limits = Limits::default();
    let claim = |owner: &str| v1::ClaimRequest {
        namespace: "ns".into(),
        key: "k".into(),
        arguments: Some(v1::claim_request::Arguments::PayloadJson("{}".into())),
        owner: owner.into(),
        ..Default::default()
    };
    for bad in [
        "w\x1b[2K\rforged",
        "a\nb",
        "tab\there",
        "del\x7f",
        "c1\u{9b}31m",
    ] {
        let err = claim_args(&claim(bad), &limits).unwrap_err();
        assert!(
            matches!(err, ApiError::InvalidField { ref field, .. } if field == "owner"),
            "{bad:?}: {err:?}"
        );
    }
    for good in ["", "worker-7@host.example", "Ünïcødé ✓"] {
        assert_eq!(claim_args(&claim(good), &limits).unwrap().0.owner, good);
    }
}

#[test]
fn a_retention_ceiling_lowers_a_claims_retention_without_refusing_it() {
    const DAY: Millis = 86_400_000;
    let limits = Limits {
        retention_ceilings: retention_ceilings(&["payments.*=7d".into()], 30 * DAY).unwrap(),
        ..Limits::default()
    };
    let claim = |namespace: &str, days: Option<i64>| v1::ClaimRequest {
        namespace: namespace.into(),
        key: "k".into(),
        arguments: Some(v1::claim_request::Arguments::PayloadJson("{}".into())),
        retention: days.map(|d| Duration {
            seconds: d * 86_400,
            nanos: 0,
        }),
        ..Default::default()
    };
    let retention = |req| claim_args(&req, &limits).unwrap().0.retention;
    // Asked 30 d (the --max-retention) under a 7 d ceiling: 7 d, not refused.
    assert_eq!(retention(claim("payments.charge", Some(30))), 7 * DAY);
    assert_eq!(retention(claim("payments.charge", Some(2))), 2 * DAY);
    // The default (24 h) is under the ceiling; a ceiling below it lowers it too.
    assert_eq!(retention(claim("payments.charge", None)), DAY);
    let low = Limits {
        retention_ceilings: retention_ceilings(&["payments.*=1h".into()], 30 * DAY).unwrap(),
        ..Limits::default()
    };
    let req = claim("payments.charge", None);
    assert_eq!(claim_args(&req, &low).unwrap().0.retention, 3_600_000);
    // Other namespaces are untouched; above --max-retention is still refused.
    assert_eq!(retention(claim("email.send", Some(30))), 30 * DAY);
    let over = claim("payments.charge", Some(31));
    let err = claim_args(&over, &limits).unwrap_err();
    assert!(matches!(err, ApiError::InvalidField { ref field, .. } if field == "retention"));
}
