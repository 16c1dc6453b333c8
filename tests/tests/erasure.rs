//! Tenant erasure and rekey against the real binary over the embedded store (docs/api.md,
//! "Tenant erasure", "Rekey"): `oncekey erase-tenant` erases one tenant's records in every
//! namespace and state (an unsettled at-most-once operation, an intent guard entry) and prints
//! the receipt, leaving the other tenant's alone; the fencing sequence continues; the guards
//! (`confirm_tenant`, the `admin` scope, page tokens bound to their RPC) refuse; the metrics
//! count it. Rekey on a server without a key ring finds every record current.

use oncekey_api::v1;
use oncekey_tests::*;
use sha2::Digest;
use tonic::Code;
use tonic_types::StatusExt;

const ADMIN: &str = "tok-acme-admin-41c";
const LEDGER: &str = "tok-acme-ledger-7e2";
const THEIRS: &str = "tok-globex-ledger-0b9";

fn hash(token: &str) -> String {
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// A server whose tokens file has acme's admin (label `ops`) and ledger tokens, and globex's.
fn server() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    let text = format!(
        "acme:ops:{}:admin\nacme:{}\nglobex:{}\n",
        hash(ADMIN),
        hash(LEDGER),
        hash(THEIRS)
    );
    std::fs::write(&tokens, text).unwrap();
    (
        Server::start(&["--tokens-file", tokens.to_str().unwrap()]),
        dir,
    )
}

/// The keys `populate` leaves live, by namespace.
const KEYS: [(&str, &str); 5] = [
    ("payments.charge", "p-1"),
    ("emails.send", "e-1"),
    ("refunds.issue", "r-1"),
    ("refunds.issue", "r-2"),
    ("emails.send", "e-2"),
];

/// Records in several namespaces and states: SUCCEEDED, PROCESSING, unsettled AT_MOST_ONCE,
/// AWAITING_APPROVAL, RETRY, plus an intent guard entry (a Claim under `warn`). Returns the
/// PROCESSING holder's token.
async fn populate(rpc: &mut oncekey_client::LedgerRpc) -> u64 {
    let token = |r: v1::ClaimResponse| r.lease.unwrap().token;
    let done = rpc.claim(claim("payments.charge", "p-1", "{}")).await;
    let t = token(done.unwrap().into_inner());
    let res = complete("payments.charge", "p-1", t, result(200, b"charged"));
    rpc.complete(res).await.unwrap();
    let guarded = v1::ClaimRequest {
        intent_guard: v1::IntentGuard::Warn as i32,
        ..claim("emails.send", "e-1", r#"{"to":"a@example.com"}"#)
    };
    let held = token(rpc.claim(guarded).await.unwrap().into_inner());
    let amo = v1::ClaimRequest {
        semantics: v1::Semantics::AtMostOnce as i32,
        ..claim("refunds.issue", "r-1", "{}")
    };
    rpc.claim(amo).await.unwrap();
    let gated = v1::ClaimRequest {
        require_approval: true,
        ..claim("refunds.issue", "r-2", "{}")
    };
    let awaiting = rpc.claim(gated).await.unwrap().into_inner();
    assert_eq!(outcome(&awaiting), v1::ClaimOutcome::AwaitingApproval);
    let t = token(
        rpc.claim(claim("emails.send", "e-2", "{}"))
            .await
            .unwrap()
            .into_inner(),
    );
    let retry = fail("emails.send", "e-2", t, v1::Disposition::Retryable, "down");
    rpc.fail(retry).await.unwrap();
    held
}

async fn listed(rpc: &mut oncekey_client::LedgerRpc) -> Vec<v1::Record> {
    let req = v1::ListRecordsRequest::default();
    rpc.list_records(req).await.unwrap().into_inner().records
}

fn erase(confirm: &str, page_token: &str) -> v1::EraseTenantRequest {
    v1::EraseTenantRequest {
        confirm_tenant: confirm.into(),
        page_token: page_token.into(),
        page_size: 2,
    }
}

#[tokio::test]
async fn erase_tenant_erases_every_record_of_the_tenant_and_no_other() {
    let (server, _dir) = server();
    let mut ours = server.client_with_token(LEDGER).await;
    let mut admin = server.client_with_token(ADMIN).await;
    let mut theirs = server.client_with_token(THEIRS).await;
    let held = populate(&mut ours).await;
    populate(&mut theirs).await;
    let their_records = listed(&mut theirs).await;
    assert_eq!(listed(&mut ours).await.len(), KEYS.len());

    // The guards: the caller's own tenant, the admin scope, a token of this RPC.
    let e = admin.erase_tenant(erase("globex", "")).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Code::InvalidArgument, "INVALID_FIELD".into())
    );
    assert_eq!(bad_field(&e), "confirm_tenant");
    assert!(!e.message().contains("globex") && !e.message().contains("acme"));
    for e in [
        ours.erase_tenant(erase("acme", "")).await.unwrap_err(),
        ours.rekey(v1::RekeyRequest::default()).await.unwrap_err(),
    ] {
        assert_eq!(
            (e.code(), reason(&e)),
            (Code::PermissionDenied, "MISSING_SCOPE".into())
        );
        let info = e.get_details_error_info().unwrap();
        assert_eq!(
            info.metadata.get("scope").map(String::as_str),
            Some("admin")
        );
    }
    let rekey = v1::RekeyRequest {
        page_size: 2,
        ..Default::default()
    };
    let page = admin.rekey(rekey).await.unwrap().into_inner();
    assert!(!page.next_page_token.is_empty());
    let e = admin
        .erase_tenant(erase("acme", &page.next_page_token))
        .await;
    assert_eq!(bad_field(&e.unwrap_err()), "page_token");
    let too_big = v1::EraseTenantRequest {
        page_size: 1001,
        ..erase("acme", "")
    };
    let e = admin.erase_tenant(too_big).await.unwrap_err();
    assert_eq!(bad_field(&e), "page_size");
    assert_eq!(
        listed(&mut ours).await.len(),
        KEYS.len(),
        "nothing erased yet"
    );

    // The command line, two records a page: five records and the intent entry, then a call
    // that finds nothing left and answers the receipt.
    let (code, out, err) = run_cli(&[
        "erase-tenant",
        "--confirm",
        "acme",
        "--page-size",
        "2",
        "--token",
        ADMIN,
        "--server",
        &server.grpc,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 4, "{err}");
    assert!(
        lines[0].starts_with("erase-tenant: page 1: 2 erased (total 2); resume with --resume "),
        "{err}"
    );
    assert_eq!(
        lines[2], "erase-tenant: page 3: 2 erased (total 6)",
        "{err}"
    );
    assert_eq!(
        lines[3], "erase-tenant: page 4: 0 erased (total 6)",
        "{err}"
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["erased"], 6);
    assert_eq!(doc["receipt"]["tenant"], "acme");
    assert_eq!(doc["receipt"]["erased_by"], "ops");
    assert!(doc["receipt"]["completed_at"].is_string(), "{out}");
    assert!(
        server.stderr().contains("tenant erased"),
        "{}",
        server.stderr()
    );

    // Gone, every one; globex's records untouched.
    for (ns, key) in KEYS {
        let e = ours.lookup(lookup(ns, key)).await.unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{ns}/{key}");
    }
    assert!(listed(&mut admin).await.is_empty());
    assert_eq!(listed(&mut theirs).await, their_records);
    for (ns, key) in KEYS {
        theirs.lookup(lookup(ns, key)).await.unwrap();
    }

    // The holder still running is fenced off; a new Claim acquires with a higher token.
    let late = complete("emails.send", "e-1", held, result(200, b"sent"));
    let e = ours.complete(late).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Code::FailedPrecondition, "LEASE_LOST".into())
    );
    let again = ours
        .claim(claim("emails.send", "e-1", r#"{"to":"a@example.com"}"#))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outcome(&again), v1::ClaimOutcome::Acquired);
    assert!(again.lease.unwrap().token > held);

    // Erasing again erases the new record; the call after it answers a receipt.
    let first = admin
        .erase_tenant(erase("acme", ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((first.erased, first.receipt), (1, None));
    let last = admin
        .erase_tenant(erase("acme", ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!((last.erased, last.next_page_token.as_str()), (0, ""));
    assert_eq!(last.receipt.unwrap().erased_by, "ops");

    let (_, metrics) = http_get(&server.admin, "/metrics").await;
    assert_eq!(metric(&metrics, "oncekey_records_erased_total"), Some(7.0));
    assert_eq!(metric(&metrics, "oncekey_tenant_erasures_total"), Some(2.0));
    for token in [ADMIN, LEDGER, THEIRS] {
        assert!(!server.stderr().contains(token));
    }
}

#[tokio::test]
async fn rekey_without_a_key_ring_finds_every_record_current() {
    let (server, _dir) = server();
    let mut ours = server.client_with_token(LEDGER).await;
    let mut admin = server.client_with_token(ADMIN).await;
    populate(&mut ours).await;
    populate(&mut server.client_with_token(THEIRS).await).await;

    // Over gRPC: five records and the intent entry, every one current, nothing sealed.
    let mut token = String::new();
    let (mut examined, mut current) = (0, 0);
    loop {
        let request = v1::RekeyRequest {
            page_token: token,
            page_size: 4,
        };
        let page = admin.rekey(request).await.unwrap().into_inner();
        assert_eq!((page.resealed, page.unreadable), (0, 0));
        assert!(page.unreadable_key_ids.is_empty());
        assert_eq!(page.primary_key_id, "");
        examined += page.examined;
        current += page.current;
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!((examined, current), (6, 6));

    // The command line: a progress line a page, the totals as JSON, exit 0.
    let (code, out, err) = run_cli(&[
        "rekey",
        "--page-size",
        "4",
        "--token",
        ADMIN,
        "--server",
        &server.grpc,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with(
            "rekey: page 1: 4 examined, 0 resealed, 4 current, 0 unreadable; resume with --resume "
        ),
        "{err}"
    );
    assert_eq!(
        lines[1],
        "rekey: page 2: 2 examined, 0 resealed, 2 current, 0 unreadable"
    );
    let totals: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(totals["examined"], 6);
    assert_eq!(totals["current"], 6);
    assert_eq!(totals["resealed"], 0);
    assert_eq!(totals["unreadable"], 0);
    assert_eq!(totals["primary_key_id"], "");

    // Resuming from the first page's token covers the rest only.
    let resume = lines[0].rsplit(' ').next().unwrap();
    let args = [
        "rekey",
        "--resume",
        resume,
        "--page-size",
        "4",
        "--token",
        ADMIN,
    ];
    let (code, out, err) = run_cli(&[&args[..], &["--server", &server.grpc]].concat());
    assert_eq!(code, 0, "{err}");
    let totals: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (totals["pages"].clone(), totals["examined"].clone()),
        (1.into(), 2.into())
    );
    // A token of another tenant's run or of EraseTenant does not resume.
    let e = admin.rekey(v1::RekeyRequest {
        page_token: "bm90LWEtdG9rZW4".into(),
        page_size: 0,
    });
    assert_eq!(bad_field(&e.await.unwrap_err()), "page_token");
}

/// `oncekey new-key` with `args`: its one line.
fn new_key(args: &[&str]) -> String {
    let (code, out, err) = run_cli(&[&["new-key"][..], args].concat());
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    out
}

#[tokio::test]
async fn rekey_seals_clear_records_and_names_a_key_the_ring_lost_which_erasure_does_not_need() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let keys = dir.path().join("keys");
    let ns = "payments.charge";
    let mut server = Server::start_on(&data, &[]);
    let mut rpc = server.client("acme").await;
    for key in ["c-1", "c-2"] {
        let lease = rpc.claim(claim(ns, key, "{}")).await.unwrap().into_inner();
        let done = complete(ns, key, lease.lease.unwrap().token, result(200, b"secret"));
        rpc.complete(done).await.unwrap();
    }
    rpc.claim(claim(ns, "c-3", "{}")).await.unwrap();
    server.terminate(std::time::Duration::from_secs(10));

    // A primary key: the two clear results are sealed; the PROCESSING record has nothing to.
    let line = new_key(&["--id", "k-1", "--primary"]);
    assert!(
        line.starts_with("k-1 ") && line.trim_end().ends_with(" primary"),
        "{line}"
    );
    std::fs::write(&keys, &line).unwrap();
    let ring = ["--encryption-keys", keys.to_str().unwrap()];
    let mut server = Server::start_on(&data, &ring);
    let rekey = |server: &Server| run_cli(&["rekey", "--tenant", "acme", "--server", &server.grpc]);
    let (code, out, err) = rekey(&server);
    assert_eq!(code, 0, "{err}");
    let totals: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(totals["primary_key_id"], "k-1", "{out}");
    assert_eq!(
        (totals["examined"].clone(), totals["resealed"].clone()),
        (3.into(), 2.into())
    );
    let (code, out, err) = rekey(&server);
    assert_eq!(code, 0, "{err}");
    let totals: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (totals["current"].clone(), totals["resealed"].clone()),
        (3.into(), 0.into())
    );
    let mut rpc = server.client("acme").await;
    let seen = rpc.lookup(lookup(ns, "c-1")).await.unwrap().into_inner();
    assert_eq!(seen.record.unwrap().result.unwrap().body, b"secret");
    server.terminate(std::time::Duration::from_secs(10));

    // A ring that lost k-1: rekey names it and exits 1; erasure erases those records anyway.
    let other = new_key(&[
        "--id",
        "k-2",
        "--primary",
        "--algorithm",
        "chacha20-poly1305",
    ]);
    assert!(
        other.trim_end().ends_with(" primary chacha20-poly1305"),
        "{other}"
    );
    std::fs::write(&keys, &other).unwrap();
    let server = Server::start_on(&data, &ring);
    let (code, out, err) = rekey(&server);
    assert_eq!(code, 1, "{out}{err}");
    let totals: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(totals["unreadable"], 2, "{out}");
    assert_eq!(totals["unreadable_key_ids"], serde_json::json!(["k-1"]));
    assert!(
        err.lines()
            .last()
            .unwrap()
            .starts_with("error: 2 records could not be opened; their key ids: k-1"),
        "{err}"
    );
    let (code, out, err) = run_cli(&[
        "erase-tenant",
        "--confirm",
        "acme",
        "--tenant",
        "acme",
        "--server",
        &server.grpc,
    ]);
    assert_eq!(code, 0, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (doc["erased"].clone(), doc["receipt"]["erased_by"].clone()),
        (3.into(), "dev".into())
    );
    let mut rpc = server.client("acme").await;
    assert!(listed(&mut rpc).await.is_empty());
}
