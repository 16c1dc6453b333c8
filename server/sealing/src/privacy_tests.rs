//! Tests of key privacy's hash: deterministic, scoped to tenant and namespace, stable.

use crate::envelope_tests::{k1_primary, ring, ring_without_primary, HMAC, K1};
use crate::privacy::{hash_key, is_hashed};
use crate::KeyRing;

#[test]
fn hashed_keys_are_deterministic_and_scoped() {
    let keys = k1_primary("");
    let h = |t: &str, ns: &str, k: &str| hash_key(&keys, t, ns, k).unwrap();
    let a = h("t", "ns", "order-1");
    assert_eq!(a.len(), 46);
    assert!(a.starts_with("~h:"));
    assert!(is_hashed(&a), "{a}");
    assert_eq!(a, h("t", "ns", "order-1"));
    assert_eq!(
        a,
        crate::Sealer::new(k1_primary("chacha20-poly1305"))
            .hash_key("t", "ns", "order-1")
            .unwrap(),
        "only the hmac key matters"
    );
    for other in [
        h("t2", "ns", "order-1"),
        h("t", "ns2", "order-1"),
        h("t", "ns", "order-2"),
        h("tn", "s", "order-1"),
        h("t", "nso", "rder-1"),
    ] {
        assert_ne!(a, other);
    }
    assert_eq!(hash_key(&ring_without_primary(), "t", "ns", "k"), None);
    assert_eq!(hash_key(&KeyRing::empty(), "t", "ns", "k"), None);
    // Another hmac secret, another hash.
    let other = ring(&format!("names {K1} hmac\n"));
    assert_ne!(hash_key(&other, "t", "ns", "order-1").unwrap(), a);

    assert!(!is_hashed("order-1"));
    assert!(!is_hashed(&a[..45]));
    assert!(!is_hashed(&format!("{a}A")));
    assert!(!is_hashed(&a.replacen("~h:", "~x:", 1)));
    assert!(!is_hashed(&format!("~h:{}+", &a[3..45])));
    assert!(is_hashed(&format!(
        "~h:{}",
        "-_aZ9".repeat(9).get(..43).unwrap()
    )));
}

/// A known-answer value (computed apart, with Python's hmac), so the hash cannot change
/// unnoticed: a change would orphan every hashed key.
#[test]
fn the_hash_of_a_key_is_stable() {
    let ring = ring(&format!("names {HMAC} hmac\n"));
    assert_eq!(
        hash_key(&ring, "tenant-a", "payments", "order-1").unwrap(),
        "~h:JlO2Y2FfutZsStJ1g9cc5sI79LoQ47cKTWcXx2i38GM"
    );
}
