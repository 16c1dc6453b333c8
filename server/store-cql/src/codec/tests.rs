//! Unit tests of `codec` (the parent module).

use super::*;

fn rec(expires_at: Millis) -> Record {
    let id = RecordId::new("t", "ns", "k");
    let args =
        oncekey_ledger::ClaimArgs::for_test([1; 32], Semantics::AtLeastOnce, 1_000, 60_000, "o");
    let mut r = oncekey_ledger::claim(&id, None, &args, 0)
        .unwrap()
        .record()
        .clone();
    r.expires_at = Some(expires_at);
    r
}

#[test]
fn ttl_rounds_up_to_whole_seconds() {
    assert_eq!(ttl_secs(&rec(60_000), 0), 60);
    assert_eq!(ttl_secs(&rec(60_001), 0), 61);
    assert_eq!(ttl_secs(&rec(60_999), 0), 61);
    assert_eq!(ttl_secs(&rec(1), 0), 1);
    assert_eq!(ttl_secs(&rec(1_500), 1_000), 1);
}

#[test]
fn ttl_is_recomputed_from_now() {
    let r = rec(3_600_000);
    assert_eq!(ttl_secs(&r, 0), 3_600);
    assert_eq!(ttl_secs(&r, 3_000_000), 600);
    assert_eq!(ttl_secs(&r, 3_599_001), 1);
}

#[test]
fn ttl_never_zero_or_negative() {
    // 0 would mean "no TTL": an already-expired record still gets the shortest TTL.
    assert_eq!(ttl_secs(&rec(1_000), 1_000), 1);
    assert_eq!(ttl_secs(&rec(1_000), 50_000), 1);
    assert_eq!(ttl_secs(&rec(i64::MIN), i64::MAX), 1);
}

#[test]
fn ttl_is_capped() {
    assert_eq!(ttl_secs(&rec(i64::MAX), 0), MAX_TTL_SECS);
    let twenty_one_years = 21 * 365 * 86_400_000;
    assert_eq!(ttl_secs(&rec(twenty_one_years), 0), MAX_TTL_SECS);
    assert_eq!(ttl_secs(&rec(630_720_000_000), 0), MAX_TTL_SECS);
    assert_eq!(ttl_secs(&rec(630_719_999_001), 0), MAX_TTL_SECS);
    assert_eq!(ttl_secs(&rec(630_719_000_000), 0), MAX_TTL_SECS - 1_000);
}

#[test]
fn a_record_kept_until_it_settles_has_no_ttl() {
    let mut r = rec(0);
    r.expires_at = None;
    assert_eq!(ttl_secs(&r, 0), 0, "0 is CQL's \"no TTL\"");
    assert_eq!(ttl_secs(&r, i64::MAX), 0);
    let values = column_values(&r, [0; 16]);
    let at = COLUMNS.iter().position(|c| *c == "expires_at").unwrap();
    assert_eq!(values[at], Some(timestamp(NEVER)));
}

#[test]
fn values_cover_every_column() {
    assert_eq!(column_values(&rec(1), [0; 16]).len(), COLUMNS.len());
}

/// A write's nonce is kept ten minutes at most, and never longer than the row's cells as that
/// write sets them; its slot follows the version the write is conditioned on (one below its own).
#[test]
fn a_writes_nonce_outlives_neither_ten_minutes_nor_its_row() {
    let ttl_and_slot = |version: u64, row_ttl: i32| {
        let mut r = rec(10_000);
        r.version = version;
        let values = mark_values(&r, [7; 16], row_ttl);
        assert_eq!(values[2], Some(CqlValue::Blob(vec![7; 16])));
        assert_eq!(values.len(), 3 + KEY_COLUMNS.len());
        match (&values[0], &values[1]) {
            (Some(CqlValue::Int(ttl)), Some(CqlValue::Int(slot))) => (*ttl, *slot),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(ttl_and_slot(4, 0), (600, 3), "a row without TTL");
    assert_eq!(ttl_and_slot(18, 5), (5, 17), "a row expiring sooner");
    assert_eq!(ttl_and_slot(66, 5).1, 1, "slots wrap after 64 versions");
    assert_eq!(ttl_and_slot(65, 86_400), (600, 0), "a row kept a day");
    assert_eq!(ttl_and_slot(1, 60).1, 0, "a new record's insert");
}
