//! Tests of the key ring file format: what parses, what does not, and that no text ever carries
//! a secret.

use super::*;
use crate::Algorithm;

const S1: &str = "q3Jq3lI8m2o6m0k8rY0f3cOe6b0pJm2vXxkqfI0Kc1A=";
const S2: &str = "b0JlbGxhIGNpYW8gbWFtbWEgcGVyY2hlIGxhIGxhbmQ=";
const S3: &str = "3rC2mCq1yWmOQ1cGfXy6Z2y0yq2r1c6dXo8rLx1hFqA=";

fn error_of(text: &str) -> RingError {
    KeyRing::parse(text).expect_err(text)
}

/// The error's message, checked to name `line` and no secret of the test.
fn message(text: &str, line: usize) -> String {
    let e = error_of(text);
    assert_eq!(e.line(), Some(line), "{e}");
    let message = e.to_string();
    assert!(message.starts_with(&format!("line {line}: ")), "{message}");
    for secret in [S1, S2, S3, &S1[..43], &S1[..20]] {
        assert!(!message.contains(secret), "a secret in {message:?}");
    }
    message
}

#[test]
fn the_example_of_the_docs_parses() {
    let ring = KeyRing::parse(&format!(
        "# ID        SECRET (base64 of 32 random bytes)             FLAGS\n\
         k-2026-12   {S1}   primary\n\
         k-2026-06   {S2}\n\
         \n\
         names       {S3}   hmac\n"
    ))
    .unwrap();
    assert_eq!(ring.ids(), ["k-2026-12", "k-2026-06", "names"]);
    assert_eq!(ring.primary_id(), Some("k-2026-12"));
    assert_eq!(ring.hmac_id(), Some("names"));
    assert!(ring.contains("k-2026-06"));
    assert!(!ring.contains("k-2026"));
    assert_eq!(
        ring.key("k-2026-06").unwrap().algorithm,
        Algorithm::Aes256Gcm
    );
}

#[test]
fn flags_comments_and_algorithms() {
    let ring = KeyRing::parse(&format!(
        "a {S1} chacha20-poly1305 primary # the new one\n\t b.c_d-e {S2} aes-256-gcm\r\n  # only a comment\n"
    ))
    .unwrap();
    assert_eq!(ring.primary_id(), Some("a"));
    assert_eq!(ring.hmac_id(), None);
    assert_eq!(
        ring.key("a").unwrap().algorithm,
        Algorithm::ChaCha20Poly1305
    );
    assert_eq!(ring.key("b.c_d-e").unwrap().algorithm, Algorithm::Aes256Gcm);
    let empty = KeyRing::parse("\n# nothing\n   \n").unwrap();
    assert!(empty.ids().is_empty());
    assert_eq!(empty.primary_id(), None);
}

#[test]
fn every_mistake_names_its_line_and_never_a_secret() {
    let m = message(&format!("ok {S1}\n{S2}\n"), 2);
    assert!(m.contains("key id"), "{m}");
    let m = message(&format!("# c\n\nk1 {S1}\nk1 {S2}\n"), 4);
    assert!(m.contains("\"k1\" appears twice (first on line 3)"), "{m}");
    let m = message("k1\n", 1);
    assert!(m.contains("no secret"), "{m}");
    // Not base64, not 32 bytes, unpadded, URL-safe: all refused, none echoed.
    for secret in [
        "not-base64!!",
        &S1[..20],
        &S1[..43],
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "q3Jq3lI8m2o6m0k8rY0f3cOe6b0pJm2vXxkqfI0Kc1A_",
    ] {
        let m = message(&format!("k1 {secret}\n"), 1);
        assert!(m.contains("not standard base64 of 32 bytes"), "{m}");
        assert!(!m.contains(secret), "{m}");
    }
    let m = message(&format!("k1 {S1} primary\nk2 {S2} primary\n"), 2);
    assert!(m.contains("second primary key (line 1 has one)"), "{m}");
    let m = message(&format!("k1 {S1} hmac\nk2 {S2} hmac\n"), 2);
    assert!(m.contains("second hmac key"), "{m}");
    let m = message(&format!("k1 {S1} primary hmac\n"), 1);
    assert!(m.contains("both primary and hmac"), "{m}");
    let m = message(&format!("k1 {S1} aes-256-gcm chacha20-poly1305\n"), 1);
    assert!(m.contains("more than one algorithm"), "{m}");
    let m = message(&format!("k1 {S1} primary primary\n"), 1);
    assert!(m.contains("primary given twice"), "{m}");
    let m = message(&format!("k1 {S1} primray\n"), 1);
    assert!(m.contains("unknown flag \"primray\""), "{m}");
    // A secret where a flag goes is not shown.
    let m = message(&format!("k1 {S1} {S2}\n"), 1);
    assert!(m.contains("unknown flag (not shown)"), "{m}");
    let m = message(&format!("{} {S1}\n", "x".repeat(65)), 1);
    assert!(m.contains("1 to 64"), "{m}");
    assert!(KeyRing::parse(&format!("{} {S1}\n", "x".repeat(64))).is_ok());
}

#[test]
fn debug_never_shows_a_secret() {
    let ring = KeyRing::parse(&format!("k1 {S1} primary\nk2 {S2}\nn {S3} hmac\n")).unwrap();
    let text = format!("{ring:?}");
    let text = format!("{text} {:?}", crate::Sealer::new(ring));
    for secret in [S1, S2, S3] {
        assert!(!text.contains(secret), "{text}");
        assert!(!text.contains(&secret[..10]), "{text}");
    }
    assert!(text.contains("k1 aes-256-gcm primary"), "{text}");
    assert!(text.contains("n aes-256-gcm hmac"), "{text}");
}

#[test]
fn load_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys");
    std::fs::write(&path, format!("k1 {S1} primary\nk2 nope\n")).unwrap();
    let e = KeyRing::load(&path).unwrap_err();
    assert_eq!(e.line(), Some(2));
    let text = e.to_string();
    assert!(
        text.starts_with(&format!("{}: line 2: ", path.display())),
        "{text}"
    );
    assert!(!text.contains(S1), "{text}");
    let missing = dir.path().join("missing");
    let e = KeyRing::load(&missing).unwrap_err();
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );
    assert_eq!(e.line(), None);
    std::fs::write(&path, format!("k1 {S1} primary\n")).unwrap();
    assert_eq!(KeyRing::load(&path).unwrap().primary_id(), Some("k1"));
}

#[test]
fn new_key_lines_parse_back_with_fresh_secrets() {
    let a = KeyRing::new_key_line("k-new", true, false, Some("chacha20-poly1305")).unwrap();
    let b = KeyRing::new_key_line("names", false, true, None).unwrap();
    let c = KeyRing::new_key_line("old", false, false, Some("aes-256-gcm")).unwrap();
    assert!(
        a.starts_with("k-new ") && a.ends_with(" primary chacha20-poly1305"),
        "{a}"
    );
    assert!(b.ends_with(" hmac"), "{b}");
    let ring = KeyRing::parse(&format!("{a}\n{b}\n{c}\n")).unwrap();
    assert_eq!(ring.primary_id(), Some("k-new"));
    assert_eq!(ring.hmac_id(), Some("names"));
    assert_eq!(
        ring.key("k-new").unwrap().algorithm,
        Algorithm::ChaCha20Poly1305
    );
    let secret = |line: &str| line.split(' ').nth(1).unwrap().to_owned();
    assert_ne!(secret(&a), secret(&b));
    assert_ne!(
        secret(&a),
        secret(&KeyRing::new_key_line("k-new", true, false, None).unwrap())
    );
    assert!(KeyRing::new_key_line("bad id", false, false, None).is_err());
    assert!(KeyRing::new_key_line("k", true, true, None).is_err());
    let e = KeyRing::new_key_line("k", false, false, Some("rot13")).unwrap_err();
    assert!(e.to_string().contains("rot13"), "{e}");
}

#[test]
fn same_hmac_compares_id_and_secret() {
    let ring = |text: String| KeyRing::parse(&text).unwrap();
    let base = ring(format!("k1 {S1} primary\nn {S3} hmac\n"));
    assert!(base.same_hmac(&ring(format!("k2 {S2} primary\nn {S3} hmac\n"))));
    assert!(
        !base.same_hmac(&ring(format!("n {S2} hmac\n"))),
        "another secret"
    );
    assert!(
        !base.same_hmac(&ring(format!("m {S3} hmac\n"))),
        "another id"
    );
    assert!(!base.same_hmac(&ring(format!("n {S3}\n"))), "no hmac key");
    assert!(!base.same_hmac(&KeyRing::empty()));
    assert!(KeyRing::empty().same_hmac(&ring(format!("k1 {S1} primary\n"))));
}
