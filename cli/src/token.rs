//! `oncekey token new`: a random bearer token and the tokens-file line that admits it.

use oncekey_server::api::auth::{token_hash, valid_label, valid_tenant, Scope};
use oncekey_server::settings::ConfigError;
use rand::RngCore;

/// Prints a new token for `tenant` and its tokens-file line (with the label and scopes given).
pub fn new(tenant: &str, label: Option<&str>, scopes: &[String]) -> anyhow::Result<()> {
    let (token, line) = new_token_line(tenant, label, scopes)?;
    println!("token: {token}");
    println!("tokens-file line: {line}");
    Ok(())
}

/// Returns (token, tokens-file line) for `tenant`, with a label and scopes on the line when
/// given (`tenant:[label:]hash[:scope,scope]`).
pub fn new_token_line(
    tenant: &str,
    label: Option<&str>,
    scopes: &[String],
) -> Result<(String, String), ConfigError> {
    if let Some(label) = label {
        if !valid_label(label) {
            return Err(ConfigError(
                "--label must match ^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$".into(),
            ));
        }
    }
    for scope in scopes {
        if Scope::parse(scope).is_none() {
            return Err(ConfigError(format!(
                "--scope {scope:?}: expected ledger, approve or admin"
            )));
        }
    }
    let (token, plain) = bare_token(tenant)?;
    let hash = plain.split_once(':').map_or("", |(_, h)| h);
    let mut line = match label {
        Some(label) => format!("{tenant}:{label}:{hash}"),
        None => format!("{tenant}:{hash}"),
    };
    if !scopes.is_empty() {
        line.push(':');
        line.push_str(&scopes.join(","));
    }
    Ok((token, line))
}

/// A new token and its plain `tenant:hash` line.
fn bare_token(tenant: &str) -> Result<(String, String), ConfigError> {
    if !valid_tenant(tenant) {
        return Err(ConfigError(
            "--tenant must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$".into(),
        ));
    }
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let token = format!("okt_{}", hex::encode(bytes));
    let line = format!("{tenant}:{}", hex::encode(token_hash(&token)));
    Ok((token, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_holds_the_hash_not_the_token() {
        let (token, line) = new_token_line("acme", None, &[]).unwrap();
        let (other, _) = new_token_line("acme", None, &[]).unwrap();
        assert_ne!(token, other);
        assert!(!line.contains(&token[4..]));
        assert_eq!(line, format!("acme:{}", hex::encode(token_hash(&token))));
        assert!(new_token_line("bad tenant", None, &[]).is_err());
    }

    #[test]
    fn a_line_may_carry_a_label_and_scopes() {
        let scopes = ["approve".to_owned(), "ledger".to_owned()];
        let (token, line) = new_token_line("acme", Some("alice@example.com"), &scopes).unwrap();
        let hash = hex::encode(token_hash(&token));
        assert_eq!(
            line,
            format!("acme:alice@example.com:{hash}:approve,ledger")
        );
        let (token, line) = new_token_line("acme", None, &["admin".to_owned()]).unwrap();
        assert_eq!(
            line,
            format!("acme:{}:admin", hex::encode(token_hash(&token)))
        );
        assert!(new_token_line("acme", Some("bad label"), &[]).is_err());
        assert!(new_token_line("acme", None, &["root".to_owned()]).is_err());
    }
}
