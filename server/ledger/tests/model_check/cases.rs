//! The models checked (two clients, bounded claims, ticks and crashes; the operator features in
//! models of their own), the tests that check them, and the tests that show the check finds what
//! an older or broken rule breaks.

use super::*;

fn check(model: Ledger) {
    let checker = run(&model, stateright::HasDiscoveries::All);
    checker.assert_properties();
}

fn run(model: &Ledger, finish_when: stateright::HasDiscoveries) -> impl Checker<Ledger> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = std::time::Instant::now();
    let checker = model
        .clone()
        .checker()
        .threads(threads)
        .finish_when(finish_when)
        .spawn_bfs()
        .join();
    println!(
        "{model:?}: {} states explored ({} unique), max depth {}, in {:.1?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}

/// Runs `model` under the old expiry rule until `property` fails, and asserts that it does.
fn finds_with_old_rule(model: Ledger, property: &'static str) {
    let model = Ledger {
        rule: Rule::Old,
        ..model
    };
    let wanted = [property].into_iter().collect();
    let checker = run(&model, stateright::HasDiscoveries::AllOf(wanted));
    let path = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("the old expiry rule should break \"{property}\""));
    println!(
        "counterexample for \"{property}\": {:?}",
        path.into_actions()
    );
}

fn big() -> bool {
    std::env::var_os("ONCEKEY_MODEL_BIG").is_some()
}

fn model(semantics: Semantics, retention: Millis) -> Ledger {
    Ledger {
        clients: if big() { 3 } else { 2 },
        semantics,
        max_ticks: if retention == LONG { 3 } else { 4 },
        max_crashes: 1,
        claims: 3,
        renews: 1,
        retention,
        rule: Rule::Ledger,
        max_attempts: 0,
        purges: 0,
        require_approval: false,
    }
}

/// `model` with an attempt cap of 1 (one ordinary acquisition per life).
fn capped(semantics: Semantics) -> Ledger {
    Ledger {
        max_attempts: 1,
        ..model(semantics, LONG)
    }
}

/// `model` with every Claim asking for approval, and an operator who approves or rejects; with
/// a claim more (one is answered AWAITING_APPROVAL) and without crashes or renewals, which the
/// gate adds nothing to.
fn gated(semantics: Semantics) -> Ledger {
    Ledger {
        require_approval: true,
        claims: 4,
        max_crashes: 0,
        renews: 0,
        ..model(semantics, LONG)
    }
}

/// `model` with one purge by the operator, past the retention (so that Purge tombstones
/// expire); without crashes or renewals, which purge adds nothing to.
fn purging(semantics: Semantics) -> Ledger {
    Ledger {
        purges: 1,
        max_crashes: 0,
        renews: 0,
        ..model(semantics, SHORT)
    }
}

#[test]
fn at_most_once_protocol() {
    check(model(Semantics::AtMostOnce, LONG));
}

#[test]
fn at_least_once_protocol() {
    check(model(Semantics::AtLeastOnce, LONG));
}

#[test]
fn at_most_once_protocol_past_retention() {
    check(model(Semantics::AtMostOnce, SHORT));
}

#[test]
fn at_least_once_protocol_past_retention() {
    check(model(Semantics::AtLeastOnce, SHORT));
}

#[test]
fn old_expiry_rule_runs_an_at_most_once_effect_twice() {
    finds_with_old_rule(
        model(Semantics::AtMostOnce, SHORT),
        "AT_MOST_ONCE: the effect ran at most once",
    );
}

#[test]
fn old_expiry_rule_hands_out_a_held_token_again() {
    finds_with_old_rule(model(Semantics::AtLeastOnce, SHORT), FENCING);
}

#[test]
fn at_least_once_protocol_with_an_attempt_cap() {
    check(capped(Semantics::AtLeastOnce));
}

#[test]
fn at_most_once_protocol_with_an_attempt_cap() {
    check(capped(Semantics::AtMostOnce));
}

#[test]
fn at_least_once_protocol_with_a_purge() {
    check(purging(Semantics::AtLeastOnce));
}

#[test]
fn at_most_once_protocol_with_a_purge() {
    check(purging(Semantics::AtMostOnce));
}

#[test]
fn a_purge_tombstone_that_forgets_the_lease_hands_out_a_held_token_again() {
    let model = Ledger {
        rule: Rule::PurgeForgetsLease,
        ..purging(Semantics::AtLeastOnce)
    };
    let wanted = [FENCING].into_iter().collect();
    let checker = run(&model, stateright::HasDiscoveries::AllOf(wanted));
    let path = checker
        .discovery(FENCING)
        .expect("a tombstone kept only retention after the purge should break fencing");
    println!("counterexample: {:?}", path.into_actions());
}

#[test]
fn at_least_once_protocol_with_an_approval_gate() {
    check(gated(Semantics::AtLeastOnce));
}

#[test]
fn at_most_once_protocol_with_an_approval_gate() {
    check(gated(Semantics::AtMostOnce));
}

#[test]
fn at_least_once_protocol_with_an_approval_gate_past_retention() {
    check(Ledger {
        retention: SHORT,
        max_ticks: 4,
        ..gated(Semantics::AtLeastOnce)
    });
}

#[test]
fn at_most_once_protocol_with_an_approval_gate_past_retention() {
    check(Ledger {
        retention: SHORT,
        max_ticks: 4,
        ..gated(Semantics::AtMostOnce)
    });
}

#[test]
fn an_abandon_tombstone_that_forgets_the_gate_acquires_before_approval() {
    let model = Ledger {
        rule: Rule::AbandonForgetsGate,
        ..gated(Semantics::AtLeastOnce)
    };
    let wanted = [GATE].into_iter().collect();
    let checker = run(&model, stateright::HasDiscoveries::AllOf(wanted));
    let path = checker
        .discovery(GATE)
        .expect("an abandon that forgets require_approval should open the gate");
    println!("counterexample: {:?}", path.into_actions());
}
