//! Unit tests of the metrics: the (tenant, namespace) series cap and its `_other` overflow, the
//! attention gauges and the admission refusals.

use super::*;

#[test]
fn known_pairs_count_through_their_own_series() {
    let m = Metrics::new(200);
    m.claim("t", "a", ClaimOutcome::Acquired);
    m.claim("t", "a", ClaimOutcome::Acquired);
    m.claim("t", "a", ClaimOutcome::InProgress);
    let text = m.encode();
    assert!(
        text.contains(r#"oncekey_claims_total{tenant="t",namespace="a",outcome="ACQUIRED"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"oncekey_claims_total{tenant="t",namespace="a",outcome="IN_PROGRESS"} 1"#),
        "{text}"
    );
    assert!(!text.contains(OTHER), "{text}");
}

#[test]
fn one_tenants_namespaces_overflow_into_its_own_other_not_everyones() {
    // 16 series: each tenant's share is 2.
    let m = Metrics::new(16);
    for i in 0..100 {
        m.claim("noisy", &format!("ns{i}"), ClaimOutcome::Acquired);
    }
    m.claim("quiet", "payments.charge", ClaimOutcome::Completed);
    let text = m.encode();
    for own in [
        r#"{tenant="noisy",namespace="ns0",outcome="ACQUIRED"} 1"#,
        r#"{tenant="noisy",namespace="ns1",outcome="ACQUIRED"} 1"#,
        r#"{tenant="noisy",namespace="_other",outcome="ACQUIRED"} 98"#,
        r#"{tenant="quiet",namespace="payments.charge",outcome="COMPLETED"} 1"#,
    ] {
        assert!(text.contains(own), "{own} missing:\n{text}");
    }
    assert!(!text.contains(r#"namespace="ns2""#), "{text}");
    assert!(!text.contains(r#"tenant="_other""#), "{text}");
}

#[test]
fn once_the_cap_is_reached_new_tenants_share_other() {
    let m = Metrics::new(16);
    for t in 0..7 {
        for n in 0..2 {
            m.claim(&format!("t{t}"), &format!("n{n}"), ClaimOutcome::Acquired);
        }
    }
    m.claim("t7", "n0", ClaimOutcome::Acquired);
    m.claim("t8", "n0", ClaimOutcome::Acquired);
    m.claim("late", "n0", ClaimOutcome::Completed);
    m.claim("later", "n0", ClaimOutcome::Completed);
    // A known tenant's new namespace goes to its own `_other`, even below its share.
    m.claim("t7", "n9", ClaimOutcome::Failed);
    let text = m.encode();
    assert!(
        text.contains(
            r#"oncekey_claims_total{tenant="_other",namespace="_other",outcome="COMPLETED"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"oncekey_claims_total{tenant="t7",namespace="_other",outcome="FAILED"} 1"#),
        "{text}"
    );
    assert!(!text.contains(r#"tenant="late""#), "{text}");
}

#[test]
fn needing_attention_has_every_status_from_the_start() {
    let m = Metrics::new(16);
    for status in ["UNKNOWN", "AWAITING_APPROVAL", "PROCESSING_LAPSED"] {
        let line = format!("oncekey_records_needing_attention{{status=\"{status}\"}} 0");
        assert!(m.encode().contains(&line), "{line}");
    }
    m.needing_attention(&oncekey_ledger::AttentionCounts {
        unknown: 3,
        awaiting_approval: 0,
        processing_lapsed: 2,
    });
    let text = m.encode();
    assert!(
        text.contains(r#"oncekey_records_needing_attention{status="UNKNOWN"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"oncekey_records_needing_attention{status="PROCESSING_LAPSED"} 2"#),
        "{text}"
    );
}

#[test]
fn admission_refusals_are_counted_by_limit_only() {
    let m = Metrics::new(16);
    let text = m.encode();
    // Both series exist from the start, so a rate() over them works before the first refusal.
    assert!(
        text.contains(r#"oncekey_admission_refused_total{limit="rate"} 0"#),
        "{text}"
    );
    m.admission_refused("rate");
    m.admission_refused("rate");
    m.admission_refused("inflight");
    let text = m.encode();
    assert!(
        text.contains(r#"oncekey_admission_refused_total{limit="rate"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"oncekey_admission_refused_total{limit="inflight"} 1"#),
        "{text}"
    );
}
