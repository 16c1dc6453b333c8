//! Key privacy: the rules, the ids requests get, and the keys answers show, through the API layer
//! over an engine on the (sealed) embedded store.

use super::*;
use crate::engine::{Clock, Engine};
use crate::store::embedded::EmbeddedStore;
use oncekey_sealing::Sealed;

/// A key ring with a primary and an hmac key (secrets made up for the test).
const RING: &str = "\
k1    AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=   primary
names ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=   hmac
";

fn ring() -> KeyRing {
    KeyRing::parse(RING).unwrap()
}

fn privacy(rules: &[&str]) -> KeyPrivacy {
    let rules: Vec<String> = rules.iter().map(|r| (*r).to_owned()).collect();
    KeyPrivacy::new(
        PrivacyRules::from_flags(&rules).unwrap(),
        Sealer::new(ring()),
    )
}

fn field_of(e: ApiError) -> String {
    match e {
        ApiError::InvalidField { field, .. } | ApiError::TooLarge { field, .. } => field,
        other => panic!("{other:?}"),
    }
}

#[test]
fn hmac_alone_covers_every_namespace_and_the_longest_pattern_wins() {
    let all = PrivacyRules::from_flags(&["hmac".into()]).unwrap();
    assert!(all.hashes("payments.charge") && all.hashes("x") && all.any());
    let rules =
        PrivacyRules::from_flags(&["payments.*=hmac,payments.refund=off".into(), "*=off".into()])
            .unwrap();
    assert!(rules.hashes("payments.charge"));
    assert!(!rules.hashes("payments.refund"));
    assert!(!rules.hashes("email.send"));
    assert!(rules.any());
    let off = PrivacyRules::from_flags(&["*=off".into()]).unwrap();
    assert!(!off.any() && !off.hashes("x"));
    assert!(!PrivacyRules::default().any());
}

#[test]
fn bad_rules_say_what_is_wrong() {
    for (text, says) in [
        ("off", "expected hmac, PATTERN=hmac or PATTERN=off"),
        ("payments=on", "expected hmac"),
        ("Pay=hmac", "pattern"),
        ("a*b=hmac", "pattern"),
        ("=hmac", "pattern"),
    ] {
        let err = PrivacyRules::from_flags(&[text.into()]).unwrap_err();
        assert!(err.contains(says), "{text}: {err}");
        assert!(err.contains("key privacy rule"), "{text}: {err}");
    }
}

#[test]
fn a_private_namespaces_keys_are_stored_as_their_hmac() {
    let p = privacy(&["payments.*=hmac"]);
    let id = p.record_id("acme", "payments.charge", "order-1").unwrap();
    assert!(is_hashed(&id.key), "{}", id.key);
    assert_eq!(id.key.len(), 46);
    assert!(id.key.starts_with("~h:"));
    // Deterministic, and bound to the tenant and the namespace.
    assert_eq!(
        p.record_id("acme", "payments.charge", "order-1").unwrap(),
        id
    );
    let other_tenant = p
        .record_id("umbrella", "payments.charge", "order-1")
        .unwrap();
    let other_ns = p.record_id("acme", "payments.refund", "order-1").unwrap();
    assert_ne!(other_tenant.key, id.key);
    assert_ne!(other_ns.key, id.key);
    // Other namespaces keep their keys.
    let clear = p.record_id("acme", "email.send", "order-1").unwrap();
    assert_eq!(clear.key, "order-1");
    // Without any rule, nothing is hashed.
    let off = KeyPrivacy::off().record_id("acme", "payments.charge", "order-1");
    assert_eq!(off.unwrap().key, "order-1");
}

#[test]
fn a_key_already_hashed_is_taken_as_is() {
    let p = privacy(&["hmac"]);
    let hashed = p
        .record_id("acme", "payments.charge", "order-1")
        .unwrap()
        .key;
    let again = p.record_id("acme", "payments.charge", &hashed).unwrap();
    assert_eq!(again.key, hashed);
    // Almost the form (42 characters after the prefix) is a key like any other.
    let almost = &hashed[..45];
    assert_ne!(
        p.record_id("acme", "payments.charge", almost).unwrap().key,
        almost
    );
}

#[test]
fn keys_are_validated_as_the_client_wrote_them() {
    let p = privacy(&["hmac"]);
    assert_eq!(field_of(p.record_id("acme", "ns", "").unwrap_err()), "key");
    assert_eq!(
        field_of(p.record_id("acme", "ns", "a\u{1b}b").unwrap_err()),
        "key"
    );
    let long = "k".repeat(257);
    let err = p.record_id("acme", "ns", &long).unwrap_err();
    assert!(matches!(err, ApiError::TooLarge { .. }));
    assert!(p.record_id("acme", "ns", &"k".repeat(256)).is_ok());
    assert_eq!(
        field_of(p.record_id("acme", "Bad NS", "k").unwrap_err()),
        "namespace"
    );
}

#[test]
fn a_private_namespace_without_an_hmac_key_is_refused_not_stored_in_clear() {
    let p = KeyPrivacy::new(
        PrivacyRules::from_flags(&["hmac".into()]).unwrap(),
        Sealer::new(KeyRing::empty()),
    );
    let err = p.record_id("acme", "ns", "k").unwrap_err();
    assert!(matches!(err, ApiError::Engine(_)), "{err:?}");
}

/// A service over the sealed embedded store, keys of `payments.*` private.
struct Fixture {
    service: LedgerService<Sealed<EmbeddedStore>>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let privacy = privacy(&["payments.*=hmac"]);
        let store = Sealed::new(
            EmbeddedStore::open(dir.path()).unwrap(),
            privacy.sealer().clone(),
        );
        let engine = Arc::new(Engine::new(store, Clock::System));
        let service = LedgerService::new(engine, Default::default()).with_privacy(privacy);
        Self { service, _dir: dir }
    }

    async fn claim(
        &self,
        namespace: &str,
        key: &str,
        parent: Option<(&str, &str)>,
    ) -> v1::ClaimResponse {
        let mut req = v1::ClaimRequest {
            namespace: namespace.into(),
            key: key.into(),
            arguments: Some(v1::claim_request::Arguments::PayloadJson("{}".into())),
            parent: parent.map(|(namespace, key)| v1::OperationRef {
                namespace: namespace.into(),
                key: key.into(),
            }),
            ..Default::default()
        };
        self.service.claim_rpc("acme", &mut req).await.unwrap()
    }

    async fn lookup(&self, namespace: &str, key: &str) -> v1::Record {
        let mut req = v1::LookupRequest {
            namespace: namespace.into(),
            key: key.into(),
            include_history: false,
        };
        let answer = self.service.lookup_rpc("acme", &mut req).await.unwrap();
        answer.record.unwrap()
    }

    async fn list(&self, namespace: &str) -> Vec<v1::Record> {
        let req = v1::ListRecordsRequest {
            namespace: namespace.into(),
            ..Default::default()
        };
        let page = self.service.list_records_rpc("acme", &req).await.unwrap();
        page.records
    }
}

#[tokio::test]
async fn answers_carry_the_key_as_asked_and_listings_the_stored_one() {
    let f = Fixture::new();
    let claimed = f.claim("payments.charge", "order-1", None).await;
    assert_eq!(claimed.record.unwrap().key, "order-1");

    let mut complete = v1::CompleteRequest {
        namespace: "payments.charge".into(),
        key: "order-1".into(),
        lease_token: claimed.lease.unwrap().token,
        result: Some(v1::OperationResult {
            code: 200,
            body: b"charged".to_vec(),
            ..Default::default()
        }),
    };
    let completed = f.service.complete_rpc("acme", &mut complete).await.unwrap();
    assert_eq!(completed.record.unwrap().key, "order-1");
    let looked = f.lookup("payments.charge", "order-1").await;
    assert_eq!(looked.key, "order-1");
    assert_eq!(looked.result.unwrap().body, b"charged");

    // The listing shows the stored form, and a Lookup of that form finds the same record.
    let listed = f.list("payments.charge").await;
    assert_eq!(listed.len(), 1);
    let stored = &listed[0].key;
    assert!(is_hashed(stored), "{stored}");
    let by_hash = f.lookup("payments.charge", stored).await;
    assert_eq!(&by_hash.key, stored);
    assert_eq!(by_hash.fencing_token, looked.fencing_token);
    // A namespace without privacy keeps its keys.
    f.claim("email.send", "mail-1", None).await;
    assert_eq!(f.list("email.send").await[0].key, "mail-1");
}

#[tokio::test]
async fn a_parent_in_a_private_namespace_is_named_by_its_hmac() {
    let f = Fixture::new();
    f.claim("payments.run", "run-1", None).await;
    let child = f
        .claim("email.send", "mail-1", Some(("payments.run", "run-1")))
        .await;
    let record = child.record.unwrap();
    assert_eq!(record.key, "mail-1");
    let parent = record.parent.unwrap();
    assert_eq!(parent.namespace, "payments.run");
    assert!(is_hashed(&parent.key), "the parent shown stays hashed");
    let run = &f.list("payments.run").await[0];
    assert_eq!(parent.key, run.key);
    // A child of a private namespace's record is found by the parent's key as written, or as
    // stored.
    for key in ["run-1", parent.key.as_str()] {
        let req = v1::ListRecordsRequest {
            parent: Some(v1::OperationRef {
                namespace: "payments.run".into(),
                key: key.into(),
            }),
            ..Default::default()
        };
        let page = f.service.list_records_rpc("acme", &req).await.unwrap();
        assert_eq!(page.records.len(), 1, "{key}");
        assert_eq!(page.records[0].key, "mail-1");
    }
}

#[test]
fn only_the_named_records_key_is_put_back() {
    let id = RecordId::new("acme", "payments.charge", "~h:stored");
    let wire = v1::Record {
        namespace: "payments.charge".into(),
        key: "~h:stored".into(),
        parent: Some(v1::OperationRef {
            namespace: "payments.charge".into(),
            key: "~h:stored".into(),
        }),
        ..Default::default()
    };
    let shown = as_asked(wire.clone(), &id, "order-1");
    assert_eq!(shown.key, "order-1");
    assert_eq!(shown.parent.unwrap().key, "~h:stored");
    let other = RecordId::new("acme", "payments.charge", "~h:other");
    assert_eq!(as_asked(wire, &other, "order-1").key, "~h:stored");
}

#[test]
fn logs_hash_a_private_key_as_stored_never_as_written() {
    let p = privacy(&["payments.*=hmac"]);
    let stored = p
        .record_id("acme", "payments.charge", "order-1")
        .unwrap()
        .key;
    let logged = logged_key_hash(Some(&p), "acme", "payments.charge", "order-1");
    assert_eq!(logged, key_hash(&stored));
    assert_ne!(logged, key_hash("order-1"));
    // Elsewhere, and without key privacy, the hash of the key as before.
    let clear = logged_key_hash(Some(&p), "acme", "email.send", "order-1");
    assert_eq!(clear, key_hash("order-1"));
    assert_eq!(
        logged_key_hash(None, "acme", "payments.charge", "k"),
        key_hash("k")
    );
}
