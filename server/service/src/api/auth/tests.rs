//! The tokens file, its labels and scopes, and dev mode.

use super::*;
use tonic::metadata::MetadataValue;

fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn with(headers: &[(&'static str, &str)]) -> MetadataMap {
    let mut m = MetadataMap::new();
    for (k, v) in headers {
        m.insert(*k, MetadataValue::try_from(*v).unwrap());
    }
    m
}

#[test]
fn tokens_map_to_tenants() {
    let text = format!(
        "# comment\n\nacme:{}\nglobex:{}\n",
        hex::encode(token_hash("t-a")),
        hex::encode(token_hash("t-b"))
    );
    let (_dir, path) = file(&text);
    let auth = Auth::from_file(&path).unwrap();
    assert_eq!(
        auth.authenticate(&with(&[("authorization", "Bearer t-a")]))
            .unwrap()
            .0,
        "acme"
    );
    assert_eq!(
        auth.authenticate(&with(&[("authorization", "Bearer t-b")]))
            .unwrap()
            .0,
        "globex"
    );
    assert!(matches!(
        auth.authenticate(&with(&[("authorization", "Bearer nope")])),
        Err(ApiError::Unauthenticated(_))
    ));
    assert!(matches!(
        auth.authenticate(&with(&[])),
        Err(ApiError::Unauthenticated(_))
    ));
    let other = with(&[("authorization", "Bearer t-a"), (TENANT_HEADER, "globex")]);
    assert!(matches!(
        auth.authenticate(&other),
        Err(ApiError::PermissionDenied(_))
    ));
}

#[test]
fn bad_files_name_the_line_and_reload_keeps_the_old_table() {
    let (_dir, path) = file("acme:zz\n");
    let err = Auth::from_file(&path).err().unwrap().to_string();
    assert!(err.contains("line 1"), "{err}");
    std::fs::write(&path, format!("acme:{}\n", hex::encode(token_hash("x")))).unwrap();
    let auth = Auth::from_file(&path).unwrap();
    std::fs::write(&path, "garbage\n").unwrap();
    assert!(auth.reload().is_err());
    assert_eq!(
        auth.authenticate(&with(&[("authorization", "Bearer x")]))
            .unwrap()
            .0,
        "acme"
    );
}

#[test]
fn one_token_hash_on_two_lines_refuses_the_file_naming_both_lines() {
    let hash = hex::encode(token_hash("shared"));
    let text = format!(
        "# two tenants, one token\nacme:{hash}\nglobex:{}\n\nglobex:{hash}\n",
        hex::encode(token_hash("other"))
    );
    let (_dir, path) = file(&text);
    let err = Auth::from_file(&path).err().expect("refused").to_string();
    assert!(err.contains("lines 2 and 5"), "{err}");
    assert!(!err.contains(&hash), "the message shows the hash: {err}");
    assert!(!err.contains('\n'), "one line: {err}");
    // The same hash twice under one tenant is refused too: with per-line labels and scopes
    // the two lines could disagree.
    let (_dir, path) = file(&format!("acme:{hash}\nacme:{hash}\n"));
    assert!(matches!(
        Auth::from_file(&path),
        Err(TokensFileError::DuplicateHash {
            first: 1,
            second: 2,
            ..
        })
    ));
    // A reload that finds a duplicate keeps the previous tokens.
    let (_dir, path) = file(&format!("acme:{hash}\n"));
    let auth = Auth::from_file(&path).unwrap();
    std::fs::write(&path, format!("acme:{hash}\nglobex:{hash}\n")).unwrap();
    assert!(matches!(
        auth.reload(),
        Err(TokensFileError::DuplicateHash { .. })
    ));
    let tenant = auth.authenticate(&with(&[("authorization", "Bearer shared")]));
    assert_eq!(tenant.unwrap().0, "acme");
}

#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let (_dir, path) = file(&format!("acme:{}\n", hex::encode(token_hash("t-a"))));
    let auth = Auth::from_file(&path).unwrap();
    for value in [
        "Bearer t-a",
        "bearer t-a",
        "BEARER t-a",
        "bEaReR t-a",
        "Bearer   t-a ",
    ] {
        let tenant = auth.authenticate(&with(&[("authorization", value)]));
        assert_eq!(tenant.unwrap().0, "acme", "{value:?}");
    }
    for value in ["Basic t-a", "Bearert-a", "Bearer", "Bearer  ", "t-a"] {
        assert!(
            matches!(
                auth.authenticate(&with(&[("authorization", value)])),
                Err(ApiError::Unauthenticated(_))
            ),
            "{value:?}"
        );
    }
}

#[test]
fn dev_mode_reads_the_tenant_header() {
    let auth = Auth::dev();
    assert_eq!(auth.authenticate(&with(&[])).unwrap().0, "default");
    assert_eq!(
        auth.authenticate(&with(&[(TENANT_HEADER, "team-a")]))
            .unwrap()
            .0,
        "team-a"
    );
    assert!(auth
        .authenticate(&with(&[(TENANT_HEADER, "bad tenant")]))
        .is_err());
}

fn principal_of(auth: &Auth, token: &str) -> (String, Principal) {
    let bearer = format!("Bearer {token}");
    let (tenant, principal) = auth
        .authenticate_principal(&with(&[("authorization", bearer.as_str())]))
        .unwrap();
    (tenant.0, principal)
}

#[test]
fn lines_carry_an_optional_label_and_scopes() {
    let h = |t: &str| hex::encode(token_hash(t));
    let text = format!(
        "acme:{}\nacme:alice@example.com:{}:approve\nacme:{}:admin,ledger\nacme:ops-bot:{}:ledger, approve ,admin\n",
        h("plain"),
        h("alice"),
        h("admin"),
        h("bot")
    );
    let (_dir, path) = file(&text);
    let auth = Auth::from_file(&path).unwrap();
    let (tenant, plain) = principal_of(&auth, "plain");
    assert_eq!(tenant, "acme");
    assert_eq!(plain.label, "acme", "no label: the tenant decides");
    assert_eq!(plain.scopes, Scopes::LEDGER, "no scopes: ledger only");
    let (_, alice) = principal_of(&auth, "alice");
    assert_eq!(alice.label, "alice@example.com");
    assert!(alice.scopes.contains(Scope::Approve));
    assert!(!alice.scopes.contains(Scope::Ledger) && !alice.scopes.contains(Scope::Admin));
    let (_, admin) = principal_of(&auth, "admin");
    assert_eq!(admin.label, "acme");
    assert!(admin.scopes.contains(Scope::Admin) && admin.scopes.contains(Scope::Ledger));
    assert!(!admin.scopes.contains(Scope::Approve));
    let (_, bot) = principal_of(&auth, "bot");
    assert_eq!((bot.label.as_str(), bot.scopes), ("ops-bot", Scopes::all()));
}

#[test]
fn bad_labels_and_scopes_name_the_line() {
    let h = hex::encode(token_hash("x"));
    for (line, problem) in [
        (format!("acme:{h}:owner"), "scopes"),
        (format!("acme:{h}:"), "scopes"),
        (format!("acme:{h}:ledger,"), "scopes"),
        (format!("acme:bad label:{h}"), "label"),
        (format!("acme:a:b:{h}"), "hash"),
        (format!("acme:lbl:{h}:ledger:admin"), "expected"),
        ("acme:lbl:nothex".to_owned(), "hash"),
        ("acme".to_owned(), "expected"),
    ] {
        let (_dir, path) = file(&format!("# ok\n{line}\n"));
        let err = Auth::from_file(&path).err().expect(&line).to_string();
        assert!(
            err.contains("line 2") && err.contains(problem),
            "{line}: {err}"
        );
        assert!(!err.contains(&h), "the message shows the hash: {err}");
    }
}

#[test]
fn a_reload_changes_scopes_and_labels() {
    let h = hex::encode(token_hash("t"));
    let (_dir, path) = file(&format!("acme:{h}\n"));
    let auth = Auth::from_file(&path).unwrap();
    assert_eq!(principal_of(&auth, "t").1.scopes, Scopes::LEDGER);
    std::fs::write(&path, format!("acme:carol:{h}:approve\n")).unwrap();
    assert_eq!(auth.reload().unwrap(), 1);
    let (_, now) = principal_of(&auth, "t");
    assert_eq!(now.label, "carol");
    assert!(now.scopes.contains(Scope::Approve) && !now.scopes.contains(Scope::Ledger));
}

#[test]
fn dev_mode_has_every_scope_on_loopback_and_only_ledger_when_open() {
    let (tenant, local) = Auth::dev().authenticate_principal(&with(&[])).unwrap();
    assert_eq!(tenant.0, "default");
    assert_eq!(
        (local.label.as_str(), local.scopes),
        (DEV_LABEL, Scopes::all())
    );
    let (_, open) = Auth::dev_open().authenticate_principal(&with(&[])).unwrap();
    assert_eq!(
        (open.label.as_str(), open.scopes),
        (DEV_LABEL, Scopes::LEDGER)
    );
}
