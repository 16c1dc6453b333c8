//! The `oncekey` command line itself, run as a process: `--help` names every subcommand,
//! `--version` answers, an unknown subcommand is bad configuration (exit 64), and `token new`
//! prints a token and the tokens-file line holding only its hash.
//!
//! Being an integration test of this crate also makes `cargo test --workspace` build the
//! `oncekey` binary before any test runs, which the end-to-end tests in `tests/` start.

use std::process::Command;

fn oncekey(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_oncekey"))
        .args(args)
        .output()
        .expect("run oncekey");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_names_every_subcommand() {
    let (code, stdout, _) = oncekey(&["--help"]);
    assert_eq!(code, 0);
    for command in [
        "serve", "migrate", "token", "claim", "complete", "fail", "lookup", "health", "bench",
    ] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(command)),
            "{command} missing from --help:\n{stdout}"
        );
    }
    let (code, stdout, _) = oncekey(&["--version"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("oncekey "), "{stdout}");
}

#[test]
fn an_unknown_subcommand_is_bad_configuration() {
    let (code, _, stderr) = oncekey(&["serv"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("serv"), "{stderr}");
}

#[test]
fn token_new_prints_the_token_and_a_line_with_its_hash() {
    let (code, stdout, stderr) = oncekey(&["token", "new", "--tenant", "acme"]);
    assert_eq!(code, 0, "{stderr}");
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name:?} in {stdout}"))
            .to_owned()
    };
    let token = field("token: ");
    let line = field("tokens-file line: ");
    let (tenant, hash) = line.split_once(':').expect("tenant:hash");
    assert_eq!(tenant, "acme");
    assert_eq!(hash.len(), 64, "{line}");
    assert!(
        !line.contains(&token),
        "the line holds the hash, not the token"
    );
    let (code, _, stderr) = oncekey(&["token", "new", "--tenant", "not a tenant"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("--tenant"), "{stderr}");
}
