//! Agent safety against the real binary over gRPC (docs/api.md, "Agent safety"): the intent
//! guard from the flag, the tenant's limits line and the Claim's own fields (DUPLICATE_INTENT,
//! intent_matches, dry runs, ListDuplicateIntents), run budgets (BUDGET_EXHAUSTED with its
//! metadata, the parent's BudgetUsage), the errors naming the bad field, and both surviving a
//! kill -9 and restart of the embedded store.

use oncekey_api::v1;
use oncekey_api::v1::{ClaimOutcome, RecordStatus};
use oncekey_tests::*;
use std::collections::HashMap;
use tonic::Code;
use tonic_types::StatusExt;

const CHARGE: &str = r#"{"order":"o-7","cents":4200}"#;

fn child(ns: &str, key: &str, parent: &str) -> v1::ClaimRequest {
    v1::ClaimRequest {
        parent: Some(v1::OperationRef {
            namespace: "agent.run".into(),
            key: parent.into(),
        }),
        ..claim(ns, key, &format!(r#"{{"child":"{key}"}}"#))
    }
}

fn budgeted(key: &str, max_children: u32, per: &[(&str, u32)]) -> v1::ClaimRequest {
    v1::ClaimRequest {
        budget: Some(v1::RunBudget {
            max_children,
            max_per_namespace: per.iter().map(|(n, m)| ((*n).to_owned(), *m)).collect(),
        }),
        semantics: v1::Semantics::AtMostOnce as i32,
        ..claim("agent.run", key, r#"{"goal":"book a trip"}"#)
    }
}

fn matches(r: &v1::ClaimResponse) -> Vec<(String, RecordStatus)> {
    r.intent_matches
        .iter()
        .map(|m| (m.key.clone(), RecordStatus::try_from(m.status).unwrap()))
        .collect()
}

async fn scrape(server: &Server) -> String {
    let (code, body) = http_get(&server.admin, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    body
}

fn metadata(status: &tonic::Status) -> HashMap<String, String> {
    status.get_details_error_info().unwrap().metadata
}

#[tokio::test]
async fn a_made_up_key_is_refused_named_and_let_through_when_deliberate() {
    let server = Server::start(&[
        "--intent-guard",
        "payments.*=refuse/10m",
        "--intent-guard",
        "*=warn",
    ]);
    let mut c = server.client("acme").await;
    let first = c
        .claim(claim("payments.charge", "order-7", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&first), ClaimOutcome::Acquired);
    assert!(first.intent_matches.is_empty());

    // The agent retries with a key it made up: refused, naming the real one; nothing written.
    let made_up = claim("payments.charge", "call_8f2a", CHARGE);
    let refused = c.claim(made_up.clone()).await.unwrap().into_inner();
    assert_eq!(outcome(&refused), ClaimOutcome::DuplicateIntent);
    assert!(refused.record.is_none() && refused.lease.is_none());
    assert_eq!(
        matches(&refused),
        [("order-7".to_owned(), RecordStatus::Processing)]
    );
    let gone = c
        .lookup(lookup("payments.charge", "call_8f2a"))
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound);
    // A dry run says the same and writes nothing.
    let dry = c
        .claim(v1::ClaimRequest {
            dry_run: true,
            ..made_up.clone()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&dry), ClaimOutcome::DuplicateIntent);
    // A Claim cannot loosen the namespace's guard.
    let off = v1::ClaimRequest {
        intent_guard: v1::IntentGuard::Off as i32,
        ..made_up.clone()
    };
    assert_eq!(
        outcome(&c.claim(off).await.unwrap().into_inner()),
        ClaimOutcome::DuplicateIntent
    );
    // The retry of the real key is answered from its record as always.
    let retry = c
        .claim(claim("payments.charge", "order-7", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&retry), ClaimOutcome::InProgress);
    // Deliberate: acquired, still naming the other key.
    let deliberate = v1::ClaimRequest {
        repeat_intent: true,
        ..made_up
    };
    let through = c.claim(deliberate).await.unwrap().into_inner();
    assert_eq!(outcome(&through), ClaimOutcome::Acquired);
    assert_eq!(matches(&through)[0].0, "order-7");

    // `*=warn` elsewhere: acquired with the other key named.
    c.claim(claim("email.send", "m-1", r#"{"to":"a@b.c"}"#))
        .await
        .unwrap();
    let warned = c
        .claim(claim("email.send", "m-2", r#"{"to":"a@b.c"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&warned), ClaimOutcome::Acquired);
    assert_eq!(matches(&warned)[0].0, "m-1");

    // Other tenants never see each other's keys.
    let mut other = server.client("globex").await;
    let theirs = other
        .claim(claim("payments.charge", "x-1", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&theirs), ClaimOutcome::Acquired);
    assert!(theirs.intent_matches.is_empty());

    // Listed as suspected duplicates, refused keys included; never as records.
    let list = |ns: &str| v1::ListDuplicateIntentsRequest {
        namespace: ns.into(),
        ..Default::default()
    };
    let all = c
        .list_duplicate_intents(list(""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.intents.len(), 2, "{all:?}");
    let pay = c
        .list_duplicate_intents(list("payments.charge"))
        .await
        .unwrap()
        .into_inner();
    let claims: Vec<_> = pay.intents[0]
        .claims
        .iter()
        .map(|m| (m.key.as_str(), m.refused))
        .collect();
    assert_eq!(claims, [("order-7", false), ("call_8f2a", false)]);
    let records = c
        .list_records(v1::ListRecordsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(records
        .records
        .iter()
        .all(|r| !r.namespace.starts_with('~')));
    assert!(c
        .list_duplicate_intents(list("globex-sees-nothing"))
        .await
        .unwrap()
        .into_inner()
        .intents
        .is_empty());
    let scraped = scrape(&server).await;
    assert!(
        scraped.contains("oncekey_intent_duplicates_total{action=\"refused\"} 2"),
        "{scraped}"
    );
}

#[tokio::test]
async fn the_claim_field_and_the_tenants_limits_line_turn_the_guard_on() {
    let dir = tempfile::tempdir().unwrap();
    let limits = dir.path().join("limits");
    std::fs::write(&limits, "acme intent-guard=orders.*=refuse/1h\n").unwrap();
    let server = Server::start(&[
        "--limits-file",
        limits.to_str().unwrap(),
        "--intent-guard",
        "email.*=refuse",
    ]);
    let mut acme = server.client("acme").await;
    acme.claim(claim("orders.place", "a", CHARGE))
        .await
        .unwrap();
    let second = acme
        .claim(claim("orders.place", "b", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&second), ClaimOutcome::DuplicateIntent);
    // Another tenant has no rule: nothing checked, unless its Claim asks.
    let mut globex = server.client("globex").await;
    globex
        .claim(claim("orders.place", "a", CHARGE))
        .await
        .unwrap();
    let unguarded = globex
        .claim(claim("orders.place", "b", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&unguarded), ClaimOutcome::Acquired);
    // A Claim that asks for the guard is checked against the keys claimed under it (keys
    // claimed while it was off are not in the index).
    let warn = v1::ClaimRequest {
        intent_guard: v1::IntentGuard::Warn as i32,
        ..claim("orders.place", "c", CHARGE)
    };
    let warned = globex.claim(warn).await.unwrap().into_inner();
    assert_eq!(outcome(&warned), ClaimOutcome::Acquired);
    assert!(warned.intent_matches.is_empty());
    let asks = v1::ClaimRequest {
        intent_guard: v1::IntentGuard::Refuse as i32,
        intent_window: Some(ms(60_000)),
        ..claim("orders.place", "d", CHARGE)
    };
    let refused = globex.claim(asks).await.unwrap().into_inner();
    assert_eq!(outcome(&refused), ClaimOutcome::DuplicateIntent);
    assert_eq!(
        matches(&refused),
        [("c".to_owned(), RecordStatus::Processing)]
    );
    // A reload (SIGHUP) keeps the tenant's rule and the flag's.
    std::fs::write(
        &limits,
        "acme intent-guard=orders.*=refuse/1h\nglobex rate=0\n",
    )
    .unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !server.stderr().contains("limits file reloaded") {
        assert!(std::time::Instant::now() < deadline, "{}", server.stderr());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let after = acme
        .claim(claim("orders.place", "e", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&after), ClaimOutcome::DuplicateIntent);
    globex
        .claim(claim("email.send", "m1", CHARGE))
        .await
        .unwrap();
    let flag_rule = globex
        .claim(claim("email.send", "m2", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&flag_rule), ClaimOutcome::DuplicateIntent);
}

#[tokio::test]
async fn a_run_budget_caps_new_children_and_shows_on_the_parent() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    c.claim(budgeted("run-1", 3, &[("email.send", 1)]))
        .await
        .unwrap();
    c.claim(child("email.send", "mail-1", "run-1"))
        .await
        .unwrap();
    // The second email is over the namespace's cap.
    let err = c
        .claim(child("email.send", "mail-2", "run-1"))
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), reason(&err).as_str()),
        (Code::FailedPrecondition, "BUDGET_EXHAUSTED")
    );
    let meta = metadata(&err);
    assert_eq!(meta["parent_namespace"], "agent.run");
    assert_eq!(meta["parent_key"], "run-1");
    assert_eq!(
        (
            meta["limit"].as_str(),
            meta["spent"].as_str(),
            meta["max"].as_str()
        ),
        ("email.send", "1", "1")
    );
    assert_eq!(
        c.lookup(lookup("email.send", "mail-2"))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    // A retry of the child it has is answered, not counted.
    let again = c
        .claim(child("email.send", "mail-1", "run-1"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&again), ClaimOutcome::InProgress);
    c.claim(child("tasks.create", "t-1", "run-1"))
        .await
        .unwrap();
    c.claim(child("tasks.create", "t-2", "run-1"))
        .await
        .unwrap();
    let over = c
        .claim(child("tasks.create", "t-3", "run-1"))
        .await
        .unwrap_err();
    assert_eq!(metadata(&over)["limit"], "max_children");
    let parent = c
        .lookup(lookup("agent.run", "run-1"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap();
    let usage = parent.budget.unwrap();
    assert_eq!((usage.children, usage.refused), (3, 2));
    assert_eq!(usage.children_per_namespace["email.send"], 1);
    assert_eq!(usage.budget.unwrap().max_per_namespace["email.send"], 1);
    // Only the first Claim of the parent sets the budget.
    let later = c
        .claim(budgeted("run-1", 100, &[]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        later
            .record
            .unwrap()
            .budget
            .unwrap()
            .budget
            .unwrap()
            .max_children,
        3
    );
    // A child naming a parent without a budget (or without a record) is not limited.
    for i in 0..5 {
        c.claim(child("tasks.create", &format!("free-{i}"), "no-such-run"))
            .await
            .unwrap();
    }
    assert!(scrape(&server)
        .await
        .contains("oncekey_budget_refused_total 2"));
}

#[tokio::test]
async fn bad_budgets_windows_and_rules_name_what_is_wrong() {
    let server = Server::start(&[]);
    let mut c = server.client("acme").await;
    for (req, field) in [
        (budgeted("b1", 1001, &[]), "budget.max_children"),
        (
            budgeted("b2", 0, &[("email.send", 0)]),
            "budget.max_per_namespace",
        ),
        (
            budgeted("b3", 0, &[("Not A Namespace", 1)]),
            "budget.max_per_namespace",
        ),
        (
            v1::ClaimRequest {
                intent_window: Some(ms(500)),
                ..claim("x.y", "k", "{}")
            },
            "intent_window",
        ),
        (
            v1::ClaimRequest {
                intent_window: Some(ms(86_400_001)),
                ..claim("x.y", "k", "{}")
            },
            "intent_window",
        ),
        (
            v1::ClaimRequest {
                intent_guard: 9,
                ..claim("x.y", "k", "{}")
            },
            "intent_guard",
        ),
    ] {
        let err = c.claim(req).await.unwrap_err();
        assert_eq!(
            (err.code(), bad_field(&err)),
            (Code::InvalidArgument, field.to_owned())
        );
    }
    // Nothing was written.
    let page = c
        .list_records(v1::ListRecordsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(page.records.is_empty());
    let bad = |flag: &str| {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("d");
        run_cli(&[
            "serve",
            "--data-dir",
            data.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--intent-guard",
            flag,
        ])
    };
    for (flag, says) in [
        ("payments", "PATTERN=MODE"),
        ("x=stop", "mode"),
        ("x=warn/2d", "window"),
    ] {
        let (code, _, stderr) = bad(flag);
        assert_eq!(code, 64, "{flag}: {stderr}");
        assert!(
            stderr.contains("--intent-guard") && stderr.contains(says),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn budgets_and_the_intent_index_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let flags = ["--intent-guard", "payments.*=refuse"];
    let mut server = Server::start_on(&data, &flags);
    {
        let mut c = server.client("acme").await;
        c.claim(claim("payments.charge", "order-1", CHARGE))
            .await
            .unwrap();
        c.claim(budgeted("run-9", 1, &[])).await.unwrap();
        c.claim(child("tasks.create", "t-1", "run-9"))
            .await
            .unwrap();
    }
    server.kill9();
    let server = Server::start_on(&data, &flags);
    let mut c = server.client("acme").await;
    let refused = c
        .claim(claim("payments.charge", "order-1-retry", CHARGE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&refused), ClaimOutcome::DuplicateIntent);
    let err = c
        .claim(child("tasks.create", "t-2", "run-9"))
        .await
        .unwrap_err();
    assert_eq!(reason(&err), "BUDGET_EXHAUSTED");
}
