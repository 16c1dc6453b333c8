//! The intent guard's decisions on its index entry.

use super::*;
use crate::Change;

const FP: [u8; 32] = [7; 32];

fn id(key: &str) -> RecordId {
    RecordId::new("t", "payments.charge", key)
}

fn rule(mode: GuardMode) -> IntentRule {
    IntentRule {
        mode,
        window: 60_000,
        repeat: false,
    }
}

fn live(pairs: &[(&str, Status)]) -> HashMap<String, Option<Status>> {
    pairs
        .iter()
        .map(|(k, s)| ((*k).to_owned(), Some(*s)))
        .collect()
}

fn written(t: Transition) -> Record {
    t.record.unwrap()
}

#[test]
fn the_first_key_is_clear_and_indexed() {
    let (t, v) = admit(
        &id("a"),
        &FP,
        None,
        &rule(GuardMode::Refuse),
        &HashMap::new(),
        1_000,
    );
    assert_eq!(v, Verdict::Clear);
    assert_eq!(t.change, Change::Insert);
    let entry = written(t);
    assert!(is_internal(&entry));
    assert_eq!(entry_of(&entry), Some(("payments.charge", FP)));
    assert_eq!(entry.expires_at, Some(61_000));
    assert_eq!(keys(&entry)[0].key, "a");
}

#[test]
fn another_key_is_refused_then_warned_when_deliberate() {
    let (t, _) = admit(
        &id("a"),
        &FP,
        None,
        &rule(GuardMode::Refuse),
        &HashMap::new(),
        1_000,
    );
    let entry = written(t);
    let statuses = live(&[("a", Status::Succeeded)]);
    let (t, v) = admit(
        &id("b"),
        &FP,
        Some(&entry),
        &rule(GuardMode::Refuse),
        &statuses,
        2_000,
    );
    let Verdict::Refused(m) = v else {
        panic!("{v:?}")
    };
    assert_eq!(
        (m[0].key.as_str(), m[0].status),
        ("a", Some(Status::Succeeded))
    );
    let after = written(t);
    assert!(keys(&after).iter().any(|k| k.key == "b" && k.refused));
    let mut deliberate = rule(GuardMode::Refuse);
    deliberate.repeat = true;
    let (t, v) = admit(&id("b"), &FP, Some(&after), &deliberate, &statuses, 3_000);
    assert!(matches!(v, Verdict::Warned(ref m) if m.len() == 1), "{v:?}");
    // The refused line of b is replaced by a live one.
    let ks = keys(&written(t));
    assert_eq!(ks.iter().filter(|k| k.key == "b").count(), 1);
    assert!(ks.iter().all(|k| !k.refused));
}

#[test]
fn the_same_key_a_dead_key_and_an_old_key_are_not_matches() {
    let (t, _) = admit(
        &id("a"),
        &FP,
        None,
        &rule(GuardMode::Warn),
        &HashMap::new(),
        1_000,
    );
    let entry = written(t);
    // Its own key again: no match.
    let (_, v) = admit(
        &id("a"),
        &FP,
        Some(&entry),
        &rule(GuardMode::Refuse),
        &HashMap::new(),
        2_000,
    );
    assert_eq!(v, Verdict::Clear);
    // Absent within the grace: still being written → PROCESSING.
    let absent: HashMap<_, _> = [("a".to_owned(), None)].into();
    let (_, v) = admit(
        &id("b"),
        &FP,
        Some(&entry),
        &rule(GuardMode::Refuse),
        &absent,
        2_000,
    );
    assert!(matches!(v, Verdict::Refused(ref m) if m[0].status == Some(Status::Processing)));
    // Absent past the grace (abandoned, or its Claim died): gone.
    let (_, v) = admit(
        &id("b"),
        &FP,
        Some(&entry),
        &rule(GuardMode::Refuse),
        &absent,
        1_000 + PENDING_GRACE,
    );
    assert_eq!(v, Verdict::Clear);
    // Outside the window.
    let statuses = live(&[("a", Status::Succeeded)]);
    let (_, v) = admit(
        &id("b"),
        &FP,
        Some(&entry),
        &rule(GuardMode::Refuse),
        &statuses,
        61_000,
    );
    assert_eq!(v, Verdict::Clear);
}

#[test]
fn an_entry_keeps_at_most_sixteen_keys() {
    let mut entry = None;
    for i in 0..(MAX_INTENT_KEYS as i64 + 4) {
        let key = format!("k{i}");
        let (t, _) = admit(
            &id(&key),
            &FP,
            entry.as_ref(),
            &rule(GuardMode::Warn),
            &HashMap::new(),
            1_000 + i,
        );
        entry = Some(written(t));
    }
    let ks = keys(entry.as_ref().unwrap());
    assert_eq!(ks.len(), MAX_INTENT_KEYS);
    // Full: the keys after the sixteenth were answered from it, not written.
    assert_eq!(ks.last().unwrap().key, format!("k{}", MAX_INTENT_KEYS - 1));
    let statuses = HashMap::new();
    let m = others(
        entry.as_ref(),
        "new",
        &rule(GuardMode::Warn),
        &statuses,
        2_000,
    );
    assert_eq!(m.len(), MAX_MATCHES);
    assert_eq!(
        m[0].key,
        format!("k{}", MAX_INTENT_KEYS - 1),
        "most recent first"
    );
}

#[test]
fn keys_with_spaces_survive_the_entry() {
    let (t, _) = admit(
        &id("a key with spaces"),
        &FP,
        None,
        &rule(GuardMode::Warn),
        &HashMap::new(),
        1_000,
    );
    assert_eq!(keys(&written(t))[0].key, "a key with spaces");
}

#[test]
fn a_claim_reads_the_newest_keys_and_names_no_older_unread_one() {
    let mut entry = None;
    for i in 0..12 {
        let key = format!("k{i}");
        let (t, _) = admit(
            &id(&key),
            &FP,
            entry.as_ref(),
            &rule(GuardMode::Warn),
            &HashMap::new(),
            1_000 + i,
        );
        entry = Some(written(t));
    }
    let entry = entry.unwrap();
    let now = 1_000 + PENDING_GRACE + 100;
    let read = to_read(&entry, "new", &rule(GuardMode::Warn), now);
    assert_eq!(read.len(), MAX_MATCHES);
    assert_eq!(read[0], "k11", "newest first");
    // The newest eight were read and are gone: the four older, unread ones are not named.
    let gone: HashMap<_, _> = read.iter().map(|k| (k.clone(), None)).collect();
    assert!(others(Some(&entry), "new", &rule(GuardMode::Warn), &gone, now).is_empty());
}

#[test]
fn a_full_entry_answers_further_duplicates_without_a_write() {
    let mut entry = None;
    for i in 0..MAX_INTENT_KEYS as i64 {
        let key = format!("k{i}");
        let (t, _) = admit(
            &id(&key),
            &FP,
            entry.as_ref(),
            &rule(GuardMode::Warn),
            &HashMap::new(),
            1_000 + i,
        );
        entry = Some(written(t));
    }
    let (t, v) = admit(
        &id("one-more"),
        &FP,
        entry.as_ref(),
        &rule(GuardMode::Warn),
        &HashMap::new(),
        2_000,
    );
    assert!(
        matches!(v, Verdict::Warned(ref m) if m.len() == MAX_MATCHES),
        "{v:?}"
    );
    assert_eq!(t.change, Change::Keep);
}
