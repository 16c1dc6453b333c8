//! `oncekey token new`: a random bearer token and the tokens-file line that admits it.

use oncekey_server::api::auth::{token_hash, valid_tenant};
use oncekey_server::settings::ConfigError;
use rand::RngCore;

/// Prints a new token for `tenant` and its tokens-file line.
pub fn new(tenant: &str) -> anyhow::Result<()> {
    let (token, line) = new_token(tenant)?;
    println!("token: {token}");
    println!("tokens-file line: {line}");
    Ok(())
}

/// Returns (token, tokens-file line) for `tenant`.
pub fn new_token(tenant: &str) -> Result<(String, String), ConfigError> {
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
        let (token, line) = new_token("acme").unwrap();
        let (other, _) = new_token("acme").unwrap();
        assert_ne!(token, other);
        assert!(!line.contains(&token[4..]));
        assert_eq!(line, format!("acme:{}", hex::encode(token_hash(&token))));
        assert!(new_token("bad tenant").is_err());
    }
}
