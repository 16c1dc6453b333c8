//! Tests of sealing records and keys without a store: round trips under both algorithms, every
//! way a ciphertext can be moved or altered, and key privacy's hash.

use crate::envelope::{self, Aad};
use crate::fields::*;
use crate::KeyRing;
use oncekey_ledger::{OpError, OpResult, Record, RecordId, Semantics};
use oncekey_store::{StoreError, Unreadable};
use std::collections::BTreeMap;

pub(crate) const K1: &str = "q3Jq3lI8m2o6m0k8rY0f3cOe6b0pJm2vXxkqfI0Kc1A=";
pub(crate) const K2: &str = "b0JlbGxhIGNpYW8gbWFtbWEgcGVyY2hlIGxhIGxhbmQ=";
pub(crate) const HMAC: &str = "3rC2mCq1yWmOQ1cGfXy6Z2y0yq2r1c6dXo8rLx1hFqA=";

pub(crate) fn ring(text: &str) -> KeyRing {
    KeyRing::parse(text).unwrap()
}

/// A ring whose primary is `k1` (with `flags`), with `k2` beside it.
pub(crate) fn k1_primary(flags: &str) -> KeyRing {
    ring(&format!(
        "k1 {K1} primary {flags}\nk2 {K2}\nnames {HMAC} hmac\n"
    ))
}

/// A record of `id` holding a result and an error, every sealable field set.
pub(crate) fn full_record(id: &RecordId) -> Record {
    let args = oncekey_ledger::ClaimArgs::for_test(
        [1; 32],
        Semantics::AtLeastOnce,
        30_000,
        3_600_000,
        "t",
    );
    let mut record = oncekey_ledger::claim(id, None, &args, 1_000)
        .unwrap()
        .record()
        .clone();
    record.result = Some(OpResult {
        code: 201,
        body: b"{\"paid\": \"MARKER-body\"}".to_vec(),
        content_type: "application/json".into(),
        metadata: BTreeMap::from([
            ("location".to_owned(), "/payments/MARKER-meta".to_owned()),
            ("x-empty".to_owned(), String::new()),
        ]),
    });
    record.error = Some(OpError {
        code: 7,
        message: "card MARKER-message declined".into(),
        details: vec![0, 1, 2, 255],
    });
    record
}

fn unreadable(e: StoreError) -> (String, Unreadable) {
    match e {
        StoreError::Unreadable { key_id, cause } => (key_id, cause),
        other => panic!("not unreadable: {other:?}"),
    }
}

fn id() -> RecordId {
    RecordId::new("tenant-a", "payments", "order-1")
}

#[test]
fn records_round_trip_under_both_algorithms() {
    for flags in ["", "chacha20-poly1305", "aes-256-gcm"] {
        let ring = k1_primary(flags);
        let clear = full_record(&id());
        let mut sealed = clear.clone();
        seal_record(&ring, &mut sealed);
        let result = sealed.result.as_ref().unwrap();
        let error = sealed.error.as_ref().unwrap();
        assert!(result.body.starts_with(envelope::MAGIC));
        assert_eq!(result.metadata.len(), 1);
        assert!(result.metadata[SEALED_METADATA].starts_with("~sealed:"));
        assert!(error.message.starts_with("~sealed:"));
        assert!(error.details.starts_with(envelope::MAGIC));
        // Untouched: codes, content type, everything outside the four fields.
        assert_eq!(result.code, 201);
        assert_eq!(result.content_type, "application/json");
        assert_eq!(error.code, 7);
        assert_eq!(sealed.id, clear.id);
        assert_eq!(sealed.history, clear.history);
        let text = format!("{sealed:?}");
        assert!(!text.contains("MARKER"), "{flags}: {text}");
        assert_eq!(sealed_with(&sealed), vec![Some("k1".to_owned()); 4]);
        // Fresh nonces: sealing twice gives other bytes.
        let mut again = clear.clone();
        seal_record(&ring, &mut again);
        assert_ne!(again.result, sealed.result);

        open_record(&ring, &mut sealed).unwrap();
        assert_eq!(sealed, clear, "{flags}");
    }
}

#[test]
fn empty_fields_stay_empty_and_clear_fields_pass_through() {
    let ring = k1_primary("");
    let mut record = full_record(&id());
    record.result = Some(OpResult::default());
    record.error = Some(OpError::default());
    let before = record.clone();
    seal_record(&ring, &mut record);
    assert_eq!(record, before);
    assert!(sealed_with(&record).is_empty());

    // A clear record (written before a primary key) is read as it is, by any ring.
    let clear = full_record(&id());
    for ring in [k1_primary(""), KeyRing::empty()] {
        let mut read = clear.clone();
        open_record(&ring, &mut read).unwrap();
        assert_eq!(read, clear);
    }
    assert_eq!(sealed_with(&clear), vec![None; 4]);

    // Without a primary key nothing is sealed.
    let no_primary = ring_without_primary();
    let mut record = clear.clone();
    seal_record(&no_primary, &mut record);
    assert_eq!(record, clear);
}

pub(crate) fn ring_without_primary() -> KeyRing {
    ring(&format!("k1 {K1}\nk2 {K2}\n"))
}

#[test]
fn a_ciphertext_moved_to_another_field_record_or_tenant_does_not_open() {
    let ring = k1_primary("");
    let mut sealed = full_record(&id());
    seal_record(&ring, &mut sealed);
    let tampered = |record: &mut Record| {
        let e = open_record(&ring, record).unwrap_err();
        assert_eq!(unreadable(e), ("k1".to_owned(), Unreadable::Tampered));
    };

    // Body into details (same record, other field).
    let mut moved = sealed.clone();
    moved.error.as_mut().unwrap().details = sealed.result.as_ref().unwrap().body.clone();
    tampered(&mut moved);
    // Message into the metadata's envelope.
    let mut moved = sealed.clone();
    let message = sealed.error.as_ref().unwrap().message.clone();
    moved.result.as_mut().unwrap().metadata = BTreeMap::from([(SEALED_METADATA.into(), message)]);
    tampered(&mut moved);
    // The whole record under another key, namespace or tenant.
    for other in [
        RecordId::new("tenant-a", "payments", "order-2"),
        RecordId::new("tenant-a", "refunds", "order-1"),
        RecordId::new("tenant-b", "payments", "order-1"),
    ] {
        let mut moved = sealed.clone();
        moved.id = other;
        tampered(&mut moved);
    }
    // The separators are in the associated data: "a\0b" + "c" is not "a" + "b\0c".
    let mut moved = sealed.clone();
    moved.id = RecordId::new("tenant-apayments", "", "order-1");
    tampered(&mut moved);
}

#[test]
fn any_flipped_byte_does_not_open() {
    let ring = k1_primary("");
    let mut sealed = full_record(&id());
    seal_record(&ring, &mut sealed);
    let body = sealed.result.as_ref().unwrap().body.clone();
    // Past the magic, the algorithm, the id's length and the id: nonce, ciphertext and tag.
    for i in 12..body.len() {
        let mut record = sealed.clone();
        record.result.as_mut().unwrap().body[i] ^= 0x40;
        let (key_id, cause) = unreadable(open_record(&ring, &mut record).unwrap_err());
        assert_eq!(
            (key_id.as_str(), cause),
            ("k1", Unreadable::Tampered),
            "{i}"
        );
    }
    // The algorithm byte: another AEAD does not open it either.
    for algorithm in [2u8, 9] {
        let mut record = sealed.clone();
        record.result.as_mut().unwrap().body[8] = algorithm;
        let (_, cause) = unreadable(open_record(&ring, &mut record).unwrap_err());
        assert_eq!(cause, Unreadable::Tampered);
    }
    // Truncated envelopes, and text that is not base64: tampered, not a panic.
    for len in [8, 9, 10, 12, 20, 30, body.len() - 1] {
        let mut record = sealed.clone();
        record.result.as_mut().unwrap().body.truncate(len);
        let (_, cause) = unreadable(open_record(&ring, &mut record).unwrap_err());
        assert_eq!(cause, Unreadable::Tampered, "{len}");
    }
    let mut record = sealed.clone();
    record.error.as_mut().unwrap().message = "~sealed:***".into();
    let (key_id, cause) = unreadable(open_record(&ring, &mut record).unwrap_err());
    assert_eq!((key_id.as_str(), cause), ("", Unreadable::Tampered));
}

#[test]
fn an_envelope_of_a_key_not_in_the_ring_names_it() {
    let mut sealed = full_record(&id());
    seal_record(&ring(&format!("k-2026-06 {K1} primary\n")), &mut sealed);
    for other in [ring(&format!("k-2026-12 {K1} primary\n")), KeyRing::empty()] {
        let mut record = sealed.clone();
        let (key_id, cause) = unreadable(open_record(&other, &mut record).unwrap_err());
        assert_eq!(
            (key_id.as_str(), cause),
            ("k-2026-06", Unreadable::MissingKey)
        );
        let message = StoreError::Unreadable { key_id, cause }.to_string();
        assert!(message.contains("k-2026-06"), "{message}");
    }
    // The same id with another secret: tampered, under that id.
    let other = ring(&format!("k-2026-06 {K2}\n"));
    let (key_id, cause) = unreadable(open_record(&other, &mut sealed).unwrap_err());
    assert_eq!(
        (key_id.as_str(), cause),
        ("k-2026-06", Unreadable::Tampered)
    );
}

#[test]
fn a_key_whose_algorithm_flag_changed_still_opens_what_it_sealed() {
    let mut sealed = full_record(&id());
    seal_record(&ring(&format!("k1 {K1} primary\n")), &mut sealed);
    let now_chacha = ring(&format!("k1 {K1} chacha20-poly1305\n"));
    open_record(&now_chacha, &mut sealed).unwrap();
    assert_eq!(sealed, full_record(&id()));
}

#[test]
fn a_listing_empties_only_the_fields_that_do_not_open() {
    let ring = k1_primary("");
    let mut record = full_record(&id());
    seal_record(&ring, &mut record);
    record.error.as_mut().unwrap().details[20] ^= 1;
    let e = open_record_lenient(&ring, &mut record).unwrap();
    assert_eq!(unreadable(e).1, Unreadable::Tampered);
    let clear = full_record(&id());
    assert_eq!(record.result, clear.result);
    assert_eq!(
        record.error.as_ref().unwrap().message,
        "card MARKER-message declined"
    );
    assert!(record.error.as_ref().unwrap().details.is_empty());
}

#[test]
fn metadata_encoding_is_one_to_one() {
    let maps = [
        BTreeMap::new(),
        BTreeMap::from([("a".to_owned(), "b".to_owned())]),
        BTreeMap::from([
            ("a\0".to_owned(), String::new()),
            (String::new(), "ünïcode".to_owned()),
        ]),
    ];
    for map in &maps {
        let bytes = encode_metadata(map);
        assert_eq!(decode_metadata(&bytes).as_ref(), Some(map));
        assert_eq!(decode_metadata(&[&bytes[..], b"x"].concat()), None);
        if !bytes.is_empty() {
            assert_eq!(decode_metadata(&bytes[..bytes.len() - 1]), None);
        }
    }
    assert_ne!(encode_metadata(&maps[1]), encode_metadata(&maps[2]));
}

#[test]
fn a_map_that_only_looks_sealed_is_sealed_again_and_comes_back_whole() {
    let ring = k1_primary("");
    let mut record = full_record(&id());
    let looks_sealed = BTreeMap::from([(SEALED_METADATA.to_owned(), "plain value".to_owned())]);
    record.result.as_mut().unwrap().metadata = looks_sealed.clone();
    record.result.as_mut().unwrap().body = b"\0okseal\x01 not really".to_vec();
    let clear = record.clone();
    seal_record(&ring, &mut record);
    open_record(&ring, &mut record).unwrap();
    assert_eq!(record, clear);
    // In clear, a map whose one entry is not an envelope is just a map.
    let mut read = clear.clone();
    read.result.as_mut().unwrap().body.clear();
    open_record(&ring, &mut read).unwrap();
    assert_eq!(read.result.unwrap().metadata, looks_sealed);
}

#[test]
fn text_key_ids_are_read_from_the_header_alone() {
    let ring = ring(&format!("{} {K1} primary\n", "i".repeat(64)));
    let key = ring.primary().unwrap();
    let aad = Aad::of(&id()).field(ERROR_MESSAGE);
    for len in [0, 1, 100, 10_000] {
        let text = envelope::seal_text(key, &aad, &vec![b'x'; len]);
        assert_eq!(envelope::text_key_id(&text), Some("i".repeat(64)));
    }
    assert_eq!(envelope::text_key_id("clear"), None);
    assert_eq!(envelope::text_key_id("~sealed:AAAA"), Some(String::new()));
}

/// The stored form is the documented one: opened here by hand, with ring and the documented
/// associated data, not through this crate.
#[test]
fn the_envelope_is_the_documented_format() {
    use base64::Engine as _;
    use ring::aead;
    for (flags, code, algorithm) in [
        ("", 1u8, &aead::AES_256_GCM),
        ("chacha20-poly1305", 2, &aead::CHACHA20_POLY1305),
    ] {
        let mut sealed = full_record(&id());
        seal_record(&k1_primary(flags), &mut sealed);
        let secret = base64::engine::general_purpose::STANDARD
            .decode(K1)
            .unwrap();
        let key = aead::LessSafeKey::new(aead::UnboundKey::new(algorithm, &secret).unwrap());
        let open = |envelope: &[u8], field: &str| -> Vec<u8> {
            assert_eq!(&envelope[..8], b"\0okseal\x01");
            assert_eq!(envelope[8], code);
            assert_eq!(&envelope[9..12], b"\x02k1");
            let nonce = aead::Nonce::try_assume_unique_for_key(&envelope[12..24]).unwrap();
            let aad = format!("oncekey/v1\0tenant-a\0payments\0order-1\0{field}");
            let mut sealed = envelope[24..].to_vec();
            let aad = aead::Aad::from(aad.as_bytes());
            key.open_in_place(nonce, aad, &mut sealed).unwrap().to_vec()
        };
        let text = |value: &str| {
            let encoded = value.strip_prefix("~sealed:").unwrap();
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(encoded)
                .unwrap()
        };
        let clear = full_record(&id());
        let (result, error) = (sealed.result.unwrap(), sealed.error.unwrap());
        let clear_result = clear.result.unwrap();
        assert_eq!(open(&result.body, "result.body"), clear_result.body);
        let metadata = text(&result.metadata["~sealed"]);
        let metadata = open(&metadata, "result.metadata");
        assert_eq!(metadata, encode_metadata(&clear_result.metadata));
        // Count, then length-prefixed names and values, in order.
        assert_eq!(&metadata[..8], b"\0\0\0\x02\0\0\0\x08");
        assert_eq!(&metadata[8..16], b"location");
        let message = open(&text(&error.message), "error.message");
        assert_eq!(message, clear.error.as_ref().unwrap().message.as_bytes());
        assert_eq!(open(&error.details, "error.details"), [0, 1, 2, 255]);
    }
}

#[test]
fn clear_values_that_look_like_envelopes_read_back_as_written_with_or_without_a_primary() {
    let id = id();
    let mut record = full_record(&id);
    let sealed_elsewhere = {
        let mut other = full_record(&id);
        seal_record(&k1_primary(""), &mut other);
        other
    };
    // A caller's values that start like envelopes: a real one copied, and bare magic.
    let result = record.result.as_mut().unwrap();
    result.body = sealed_elsewhere.result.as_ref().unwrap().body.clone();
    result.metadata = sealed_elsewhere.result.as_ref().unwrap().metadata.clone();
    let error = record.error.as_mut().unwrap();
    error.message = format!("{}x", envelope::TEXT_PREFIX);
    error.details = envelope::MAGIC.to_vec();
    for ring in [
        KeyRing::empty(),
        ring(&format!("k2 {K2}\n")),
        k1_primary(""),
    ] {
        let mut stored = record.clone();
        seal_record(&ring, &mut stored);
        assert_ne!(stored, record, "stored as it is: it would not read back");
        let mut read = stored.clone();
        open_record(&ring, &mut read).unwrap();
        assert_eq!(read, record, "{ring:?}");
        // A wrapped value counts as clear: rekey seals it.
        if ring.primary_id().is_none() {
            assert!(sealed_with(&stored).iter().all(Option::is_none), "{ring:?}");
        }
    }
}
