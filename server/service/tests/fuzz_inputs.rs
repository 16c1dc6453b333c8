//! Bad input, fuzzed with proptest (cargo-fuzz needs a nightly toolchain; this runs on stable in the
//! ordinary test command): request decoding and validation, and the RFC 8785 fingerprint.
//!
//! - Arbitrary bytes decoded as every request message: `Ok` or `Err`, never a panic.
//! - Arbitrary field values through `api::convert` (`claim_args`, `op_result`, `op_error`,
//!   `disposition`) and `api::privacy` (`record_id`, with and without key privacy): `Ok` only for
//!   values inside the documented limits, otherwise an error naming the field; never a panic.
//! - Arbitrary, nested, mutated and malformed JSON text through `canonicalize_json`: `Ok` or `Err`,
//!   never a panic; canonicalizing a canonical output is the identity; the canonical text means the
//!   same JSON value; a JSON value generated here always canonicalizes.
//!
//! `PROPTEST_CASES=100000 cargo test -p oncekey-server --test fuzz_inputs --release` for a long run.

use oncekey_api::fingerprint::{
    canonicalize_json, canonicalize_value, fingerprint_json, FingerprintError,
};
use oncekey_api::v1;
use oncekey_server::api::convert;
use oncekey_server::api::error::ApiError;
use oncekey_server::api::limits::{Limits, MAX_LEASE, MAX_WAIT, MIN_LEASE, MIN_RETENTION};
use oncekey_server::api::privacy::{KeyPrivacy, PrivacyRules};
use oncekey_server::ledger::Semantics;
use proptest::prelude::*;
use prost::Message;

fn cases(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// Key privacy for every namespace, with a made-up `hmac` key.
fn hashing() -> KeyPrivacy {
    let ring = "names ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8= hmac\n";
    let sealer = oncekey_sealing::Sealer::new(oncekey_sealing::KeyRing::parse(ring).unwrap());
    KeyPrivacy::new(PrivacyRules::from_flags(&["hmac".into()]).unwrap(), sealer)
}

/// The field an error names (every validation error names one).
fn field(e: &ApiError) -> &str {
    match e {
        ApiError::InvalidField { field, .. } | ApiError::TooLarge { field, .. } => field,
        other => panic!("validation answered a non-field error: {other:?}"),
    }
}

/// Strings that stress validation: empty, long, control characters, non-ASCII, near the limits.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[a-z0-9][a-z0-9._-]{0,130}",
        "[ -~]{0,300}",
        "\\PC{0,80}",
        (0usize..300).prop_map(|n| "k".repeat(n)),
        Just(String::new()),
        Just("a\u{0}b".to_string()),
        Just("é".repeat(129)),
    ]
}

fn duration() -> impl Strategy<Value = Option<prost_types::Duration>> {
    let seconds = prop_oneof![any::<i64>(), -2i64..4000, Just(i64::MAX), Just(i64::MIN)];
    let nanos = prop_oneof![
        any::<i32>(),
        0i32..1_000_000_000,
        Just(-1),
        Just(1_000_000_000)
    ];
    proptest::option::of(
        (seconds, nanos).prop_map(|(seconds, nanos)| prost_types::Duration { seconds, nanos }),
    )
}

fn arguments() -> impl Strategy<Value = Option<v1::claim_request::Arguments>> {
    use v1::claim_request::Arguments;
    proptest::option::of(prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Arguments::Fingerprint),
        json_text().prop_map(Arguments::PayloadJson),
        any::<String>().prop_map(Arguments::PayloadJson),
    ])
}

/// The agent-safety fields of a Claim: their own strategy (nested, so that the Claim's strategy
/// stays small enough for a test thread's stack).
type SafetyFields = (
    i32,
    Option<prost_types::Duration>,
    bool,
    Option<v1::RunBudget>,
);

prop_compose! {
    fn safety_fields()(
        intent_guard in prop_oneof![any::<i32>(), -1i32..5],
        intent_window in duration(),
        repeat_intent in any::<bool>(),
        budget in proptest::option::of((
            prop_oneof![any::<u32>(), 0u32..1002],
            proptest::collection::hash_map(text(), prop_oneof![any::<u32>(), 0u32..3], 0..4),
        )),
    ) -> SafetyFields {
        let budget = budget.map(|(max_children, max_per_namespace)| v1::RunBudget {
            max_children,
            max_per_namespace,
        });
        (intent_guard, intent_window, repeat_intent, budget)
    }
}

prop_compose! {
    fn claim_request()(
        namespace in text(),
        key in text(),
        arguments in arguments(),
        lease_ttl in duration(),
        retention in duration(),
        semantics in prop_oneof![any::<i32>(), -1i32..4],
        owner in text(),
        parent in proptest::option::of((text(), text())),
        reconcile in any::<bool>(),
        wait in duration(),
        require_approval in any::<bool>(),
        dry_run in any::<bool>(),
        max_attempts in any::<u32>(),
        safety in safety_fields(),
    ) -> v1::ClaimRequest {
        let (intent_guard, intent_window, repeat_intent, budget) = safety;
        v1::ClaimRequest {
            namespace,
            key,
            arguments,
            lease_ttl,
            retention,
            semantics,
            owner,
            parent: parent.map(|(namespace, key)| v1::OperationRef { namespace, key }),
            reconcile,
            wait,
            require_approval,
            dry_run,
            max_attempts,
            intent_guard,
            intent_window,
            repeat_intent,
            budget,
        }
    }
}

fn in_ms(d: &prost_types::Duration) -> Option<i64> {
    (d.seconds >= 0 && (0..1_000_000_000).contains(&d.nanos)).then(|| {
        d.seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(d.nanos / 1_000_000))
    })
}

proptest! {
    #![proptest_config(cases(1_000))]

    #[test]
    fn arbitrary_bytes_decode_or_fail_cleanly(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let limits = Limits::default();
        if let Ok(req) = v1::ClaimRequest::decode(bytes.as_slice()) {
            let _ = KeyPrivacy::off().record_id("t", &req.namespace, &req.key);
            let _ = convert::claim_args(&req, &limits);
        }
        if let Ok(req) = v1::CompleteRequest::decode(bytes.as_slice()) {
            let _ = convert::lease_token(req.lease_token);
            let _ = convert::op_result(req.result, &limits);
        }
        if let Ok(req) = v1::FailRequest::decode(bytes.as_slice()) {
            let _ = convert::op_error(req.error, &limits);
            let _ = convert::disposition(req.disposition);
        }
        if let Ok(req) = v1::RenewRequest::decode(bytes.as_slice()) {
            let _ = convert::lease_ttl(req.lease_ttl.as_ref(), &limits);
        }
        let _ = v1::KeepAliveRequest::decode(bytes.as_slice());
        let _ = v1::LookupRequest::decode(bytes.as_slice());
        if let Ok(req) = v1::ApproveRequest::decode(bytes.as_slice()) {
            let _ = KeyPrivacy::off().record_id("t", &req.namespace, &req.key);
            let _ = oncekey_server::api::operations::pinned_fingerprint(&req.fingerprint);
            let _ = oncekey_server::api::operations::note(&req.note);
        }
        if let Ok(req) = v1::PurgeRequest::decode(bytes.as_slice()) {
            let _ = KeyPrivacy::off().record_id("t", &req.namespace, &req.key);
        }
    }

    #[test]
    fn claims_are_accepted_only_within_the_limits(req in claim_request()) {
        let limits = Limits::default();
        let clear = KeyPrivacy::off().record_id("acme", &req.namespace, &req.key);
        match &clear {
            Ok(id) => {
                prop_assert!(!id.key.is_empty() && id.key.len() <= 256);
                prop_assert!(!id.key.chars().any(char::is_control));
                prop_assert!(!id.namespace.is_empty() && id.namespace.len() <= 128);
            }
            Err(e) => prop_assert!(["namespace", "key"].contains(&field(e))),
        }
        // Key privacy validates the key as written, then stores its hashed form.
        match (hashing().record_id("acme", &req.namespace, &req.key), clear) {
            (Ok(id), Ok(_)) => prop_assert!(oncekey_sealing::is_hashed(&id.key)),
            (Err(e), Err(before)) => prop_assert_eq!(field(&e), field(&before)),
            (hashed, clear) => prop_assert!(false, "{hashed:?} but without privacy {clear:?}"),
        }
        match convert::claim_args(&req, &limits) {
            Ok((args, wait)) => {
                prop_assert!((MIN_LEASE..=MAX_LEASE).contains(&args.lease_ttl));
                prop_assert!((MIN_RETENTION..=limits.max_retention).contains(&args.retention));
                prop_assert!(wait.is_none_or(|w| (0..=MAX_WAIT).contains(&w)));
                prop_assert!(args.owner.len() <= limits.max_owner_bytes);
                prop_assert_eq!(args.reconcile, req.reconcile);
                let amo = req.semantics == v1::Semantics::AtMostOnce as i32;
                prop_assert_eq!(args.semantics == Semantics::AtMostOnce, amo);
                if let Some(d) = &req.lease_ttl {
                    prop_assert_eq!(Some(args.lease_ttl), in_ms(d));
                }
                match &req.arguments {
                    Some(v1::claim_request::Arguments::Fingerprint(fp)) => {
                        prop_assert_eq!(fp.as_slice(), args.fingerprint.as_slice())
                    }
                    Some(v1::claim_request::Arguments::PayloadJson(json)) => {
                        prop_assert_eq!(fingerprint_json(json).unwrap(), args.fingerprint)
                    }
                    None => prop_assert!(false, "accepted without arguments"),
                }
                // A budget is kept only when it limits something, within its caps.
                if let Some(b) = &args.budget {
                    prop_assert!(b.max_children <= 1000 && b.max_per_namespace.len() <= 64);
                    prop_assert!(b.max_per_namespace.values().all(|m| (1..=1000).contains(m)));
                    prop_assert!(b.max_children > 0 || !b.max_per_namespace.is_empty());
                }
            }
            Err(e) if field(&e).starts_with("payload_json.$") => {
                prop_assert!(format!("{e:?}").contains("send it as a string"), "{e:?}")
            }
            Err(e) => prop_assert!([
                "fingerprint", "payload_json", "lease_ttl", "retention", "semantics", "owner",
                "parent.namespace", "parent.key", "wait", "budget.max_children",
                "budget.max_per_namespace",
            ].contains(&field(&e)), "{e:?}"),
        }
    }

    #[test]
    fn intent_fields_are_accepted_only_within_their_bounds(safety in safety_fields()) {
        let (intent_guard, intent_window, repeat_intent, budget) = safety;
        let req = v1::ClaimRequest {
            intent_guard,
            intent_window,
            repeat_intent,
            budget,
            ..Default::default()
        };
        match oncekey_server::api::safety::intent(&req) {
            Ok((mode, window)) => {
                prop_assert!((0..=3).contains(&intent_guard));
                prop_assert_eq!(mode.is_none(), intent_guard == 0);
                if let Some(w) = window {
                    prop_assert!((1_000..=86_400_000).contains(&w));
                }
            }
            Err(e) => prop_assert!(["intent_guard", "intent_window"].contains(&field(&e)), "{e:?}"),
        }
    }

    #[test]
    fn results_errors_and_dispositions_are_bounded(
        code in any::<i32>(),
        body_len in prop_oneof![0usize..64, Just(1024 * 1024), Just(1024 * 1024 + 1)],
        content_type in text(),
        metadata in proptest::collection::hash_map(text(), text(), 0..40),
        message in prop_oneof![text(), Just("m".repeat(16 * 1024)), Just("m".repeat(16 * 1024 + 1))],
        details_len in prop_oneof![0usize..64, Just(64 * 1024), Just(64 * 1024 + 1)],
        disposition in prop_oneof![any::<i32>(), -1i32..5],
        token in any::<u64>(),
    ) {
        let limits = Limits::default();
        let result = v1::OperationResult {
            code,
            body: vec![0xff; body_len],
            content_type,
            metadata: metadata.clone(),
        };
        match convert::op_result(Some(result), &limits) {
            Ok(r) => {
                prop_assert!(r.body.len() <= limits.max_result_bytes);
                prop_assert!(r.metadata.len() <= limits.max_metadata_entries);
                prop_assert!(r.metadata.iter().all(|(k, v)| k.len() + v.len() <= limits.max_metadata_entry_bytes));
                prop_assert_eq!(r.code, code);
                prop_assert!(r.content_type.len() <= 256 && !r.content_type.chars().any(char::is_control));
            }
            Err(e) => prop_assert!(["result.body", "result.metadata", "result.content_type"].contains(&field(&e))),
        }
        let error = v1::OperationError { code, message, details: vec![0; details_len] };
        match convert::op_error(Some(error), &limits) {
            Ok(e) => prop_assert!(e.details.len() <= limits.max_error_details_bytes && e.message.len() <= 16 * 1024),
            Err(e) => prop_assert!(["error.details", "error.message"].contains(&field(&e))),
        }
        match convert::disposition(disposition) {
            Ok(_) => prop_assert!((1..=3).contains(&disposition)),
            Err(e) => prop_assert_eq!(field(&e), "disposition"),
        }
        match convert::lease_token(token) {
            Ok(t) => prop_assert!(t == token && t > 0),
            Err(e) => prop_assert_eq!(field(&e), "lease_token"),
        }
    }
}

/// Arbitrary JSON values (deep, wide, unicode, extreme numbers).
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        prop_oneof![
            Just(-0.0),
            Just(1e21),
            Just(1e-7),
            Just(5e-324),
            Just(f64::MAX)
        ]
        .prop_map(Value::from),
        any::<String>().prop_map(Value::String),
        "\\PC{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(8, 128, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(any::<String>(), inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON text: valid documents in various layouts, plus near-JSON and garbage.
fn json_text() -> impl Strategy<Value = String> {
    prop_oneof![
        json_value().prop_map(|v| v.to_string()),
        json_value().prop_map(|v| serde_json::to_string_pretty(&v).unwrap()),
        "-?[0-9]{1,30}(\\.[0-9]{1,30})?([eE][+-]?[0-9]{1,4})?",
        "[\\[\\]{}:,\"\\\\0-9a-z. \\-+eE]{0,64}",
        "\"(\\\\u[0-9a-fA-F]{4}|[a-z])*\"",
        any::<String>(),
    ]
}

/// Text with random byte-level edits (kept UTF-8): truncations, insertions, deletions.
fn mutated_json() -> impl Strategy<Value = String> {
    (
        json_value().prop_map(|v| v.to_string()),
        proptest::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<char>()), 1..6),
    )
        .prop_map(|(text, edits)| {
            let mut chars: Vec<char> = text.chars().collect();
            for (at, kind, c) in edits {
                if chars.is_empty() {
                    chars.push(c);
                    continue;
                }
                let i = at.index(chars.len());
                match kind {
                    0 => chars.truncate(i),
                    1 => chars.insert(i, c),
                    _ => {
                        chars.remove(i);
                    }
                }
            }
            chars.into_iter().collect()
        })
}

/// A `serde_json::Value` of a text the fingerprint accepted (it may nest deeper than serde_json's
/// default limit allows).
fn value_of(text: &str) -> serde_json::Value {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let mut values = deserializer.into_iter::<serde_json::Value>();
    values.next().expect("a value").unwrap()
}

/// Asserts the fingerprint's contract on one text: no panic; a canonical output is a fixed point and
/// denotes the same value as the input.
fn check_canonical(text: &str) -> Result<(), TestCaseError> {
    if let Ok(canonical) = canonicalize_json(text) {
        prop_assert_eq!(
            canonicalize_json(&canonical).unwrap(),
            canonical.clone(),
            "not idempotent"
        );
        let original = value_of(text);
        let reparsed = value_of(&canonical);
        // Every number of an accepted text is exact, so its value is accepted too.
        let from_value = canonicalize_value(&original).ok();
        prop_assert_eq!(&from_value, &canonicalize_value(&reparsed).ok());
        prop_assert_eq!(from_value, Some(canonical));
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(1_500))]

    #[test]
    fn generated_json_always_canonicalizes(value in json_value()) {
        let text = value.to_string();
        let canonical = canonicalize_json(&text);
        // A value's text is refused exactly when one of its numbers is beyond ±(2^53−1): serde
        // prints every double in its shortest form, which the canonical form keeps.
        match (&canonical, canonicalize_value(&value)) {
            (Ok(_), Ok(_)) => {}
            (Err(FingerprintError::InexactNumber { path: a, .. }), Err(FingerprintError::InexactNumber { path: b, .. })) => {
                prop_assert!(a.starts_with('$') && b.starts_with('$'), "{a} {b}");
            }
            (text_verdict, value_verdict) => {
                prop_assert!(false, "{text}: {text_verdict:?} but {value_verdict:?}");
            }
        }
        check_canonical(&text)?;
        check_canonical(&serde_json::to_string_pretty(&value).unwrap())?;
    }

    #[test]
    fn any_text_gives_ok_or_err(text in json_text()) {
        check_canonical(&text)?;
    }

    #[test]
    fn mutated_json_gives_ok_or_err(text in mutated_json()) {
        check_canonical(&text)?;
    }

    #[test]
    fn deep_nesting_is_refused_or_handled(depth in 0usize..20_000, object in any::<bool>(), closed in any::<bool>()) {
        let (open, close) = if object { ("{\"a\":", "}") } else { ("[", "]") };
        let mut text = open.repeat(depth);
        text.push('1');
        if closed {
            text.push_str(&close.repeat(depth));
        }
        // Nesting up to 128 deep canonicalizes, deeper is refused. At depth 0 there is nothing to
        // close: the text is just `1`.
        let complete = closed || depth == 0;
        match canonicalize_json(&text) {
            Ok(_) => prop_assert!(complete && depth <= 128),
            Err(_) => prop_assert!(!complete || depth > 128),
        }
        check_canonical(&text)?;
    }
}

#[test]
fn huge_nesting_does_not_overflow_the_stack() {
    for depth in [129, 10_000, 1_000_000] {
        let text = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
        assert!(canonicalize_json(&text).is_err(), "depth {depth}");
    }
}
