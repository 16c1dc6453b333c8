//! The console's agent-safety views over plain HTTP against a real server: suspected duplicate
//! intents on *Needs attention*, a parent's run budget and its use on its page.

mod console_support;
use console_support::*;

#[tokio::test]
async fn needs_attention_lists_suspected_duplicate_intents() {
    let server = Server::start(&["--intent-guard", "dup.*=warn"]);
    let console = Console::start(&server.grpc, &[]);
    let mut ledger = server.client("acme").await;
    let args = r#"{"to":"acct-9","cents":700}"#;
    // The same arguments under two keys (the second made up, with markup): warned, both acquired.
    for key in ["pay-1", "call_<b>2"] {
        let answer = ledger.claim(claim("dup.pay", key, args)).await.unwrap();
        assert_eq!(outcome(&answer.into_inner()), v1::ClaimOutcome::Acquired);
    }
    // A third, refused by the Claim's own stricter guard: no record, but listed as refused.
    let refuse = v1::ClaimRequest {
        intent_guard: v1::IntentGuard::Refuse as i32,
        ..claim("dup.pay", "call_3", args)
    };
    let answer = ledger.claim(refuse).await.unwrap().into_inner();
    assert_eq!(outcome(&answer), v1::ClaimOutcome::DuplicateIntent);
    // Unguarded namespaces keep no index: the same repeat there is not listed.
    for key in ["plain-1", "plain-2"] {
        ledger.claim(claim("other.pay", key, args)).await.unwrap();
    }
    let fingerprint = ledger
        .lookup(lookup("dup.pay", "pay-1"))
        .await
        .unwrap()
        .into_inner()
        .record
        .unwrap()
        .fingerprint;

    let mut ann = Browser::signed_in(&console.base, "Ann", ("tenant", "acme")).await;
    let home = ann.get("/").await;
    assert_eq!(home.status, StatusCode::OK);
    let section = between(&home.body, "<section id=\"duplicates\"", "</section>");
    assert!(
        section.contains("Suspected duplicate intents <span class=\"count\">(1)</span>"),
        "{section}"
    );
    let short = &hex::encode(&fingerprint)[..12];
    assert!(
        section.contains(&format!(
            "title=\"{}\">{short}</code>",
            hex::encode(&fingerprint)
        )),
        "{section}"
    );
    // Oldest first: each acquired key linked to its record with its status, escaped; the
    // refused one marked, without a link (it has no record).
    let first = section.find("/record?namespace=dup.pay&amp;key=pay-1\">pay-1</a>");
    let second =
        section.find("/record?namespace=dup.pay&amp;key=call_%3Cb%3E2\">call_&lt;b&gt;2</a>");
    let third = section
        .find("<span class=\"key\">call_3</span> <span class=\"status s-REFUSED\">refused</span>");
    assert!(
        matches!((first, second, third), (Some(a), Some(b), Some(c)) if a < b && b < c),
        "{section}"
    );
    assert_eq!(
        section.matches(">PROCESSING</span>").count(),
        2,
        "{section}"
    );
    assert!(
        !section.contains("key=call_3") && !section.contains("<b>"),
        "{section}"
    );
    assert!(!section.contains("other.pay"), "{section}");
    assert!(
        !section.contains("id=\"duplicates-more\""),
        "one page held them all"
    );
    // Counted in the summary: dup.pay has one, in the last column.
    let counts = between(&home.body, "<table class=\"counts\">", "</table>");
    assert!(
        counts.contains("<th scope=\"col\">Duplicate intents</th>"),
        "{counts}"
    );
    assert!(
        counts.contains("<th scope=\"row\">dup.pay</th><td>0</td><td>0</td><td>0</td><td>1</td>"),
        "{counts}"
    );
    // The live refresh carries the same section, and the same markup while nothing changes.
    let fragment = ann.get("/attention").await;
    assert_eq!(fragment.status, StatusCode::OK);
    assert!(fragment.body.contains(section), "{}", fragment.body);
    assert_eq!(ann.get("/attention").await.body, fragment.body);
    // The link leads to the record.
    let page = ann.get("/record?namespace=dup.pay&key=call_%3Cb%3E2").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page
        .body
        .contains("<span id=\"key\">call_&lt;b&gt;2</span>"));

    // Another tenant sees none of them.
    let mut globex = Browser::signed_in(&console.base, "Gil", ("tenant", "globex")).await;
    let theirs = globex.get("/").await;
    let section = between(&theirs.body, "<section id=\"duplicates\"", "</section>");
    assert!(
        section.contains("(0)") && !section.contains("dup.pay"),
        "{section}"
    );
    assert!(theirs.body.contains("Nothing needs attention."));
}

#[tokio::test]
async fn a_parents_page_shows_its_run_budget_and_its_use() {
    let server = Server::start(&[]);
    let console = Console::start(&server.grpc, &[]);
    let mut ledger = server.client("acme").await;
    let parent = v1::ClaimRequest {
        budget: Some(v1::RunBudget {
            max_children: 3,
            max_per_namespace: [("mail.send".to_owned(), 1)].into(),
        }),
        ..claim("agent.run", "run-1", r#"{"goal":"invoice"}"#)
    };
    ledger.claim(parent).await.unwrap();
    let child = |key: &str| v1::ClaimRequest {
        parent: Some(v1::OperationRef {
            namespace: "agent.run".into(),
            key: "run-1".into(),
        }),
        ..claim("mail.send", key, &format!(r#"{{"mail":"{key}"}}"#))
    };
    ledger.claim(child("m-1")).await.unwrap();
    let refused = ledger.claim(child("m-2")).await.unwrap_err();
    assert_eq!(reason(&refused), "BUDGET_EXHAUSTED", "{refused:?}");

    let mut ann = Browser::signed_in(&console.base, "Ann", ("tenant", "acme")).await;
    let page = ann.get("/record?namespace=agent.run&key=run-1").await;
    assert_eq!(page.status, StatusCode::OK);
    let block = between(&page.body, "<section id=\"budget\"", "</section>");
    assert!(
        block.contains("<h2 id=\"budget-title\">Run budget</h2>"),
        "{block}"
    );
    assert!(
        block.contains("<dd id=\"budget-children\">1 / 3</dd>"),
        "{block}"
    );
    assert!(
        block.contains("<dd id=\"budget-refused\">1 new child</dd>"),
        "{block}"
    );
    assert!(
        block.contains(
            "<th scope=\"row\">mail.send</th><td>1 / 1 <span class=\"status s-FAILED\">spent</span></td>"
        ),
        "{block}"
    );
    // The child (no budget of its own) has no block; the listing marks the parent.
    let page = ann.get("/record?namespace=mail.send&key=m-1").await;
    assert!(!page.body.contains("id=\"budget\""), "{}", page.body);
    let list = ann.get("/records?namespace=agent.run").await;
    assert!(
        list.body
            .contains("<span class=\"budget\" title=\"Run budget: 1 of at most 3 children; 1 refused\">budget 1/3</span>"),
        "{}",
        list.body
    );
    assert!(!ann
        .get("/records?namespace=mail.send")
        .await
        .body
        .contains("class=\"budget\""));
}
