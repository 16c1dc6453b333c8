//! `oncekey rekey`, `oncekey erase-tenant` and `oncekey new-key` (docs/api.md, "Data
//! protection"). The first two run their RPC page after page to the end, one progress line per
//! page on stderr and the totals (or the erasure's receipt) as one JSON document on stdout; both
//! act on the token's tenant (a rekey on a server without a tokens file, on every tenant) and
//! need the `admin` scope. `new-key` prints a key ring line with a
//! fresh random secret, without a server.
//!
//! Progress lines:
//!
//! ```text
//! rekey: page 3: 300 examined, 280 resealed, 20 current, 0 unreadable; resume with --resume TOKEN
//! erase-tenant: page 2: 100 erased (total 200); resume with --resume TOKEN
//! ```
//!
//! (the page that ends the run names no token). `rekey` exits 1 when some records could not be
//! opened, naming their key ids; an erasure ends on the call that finds nothing of the tenant
//! left, which answers the receipt.

use crate::client::{connect, ConnArgs};
use crate::render::{text, time};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use clap::{Args, ValueEnum};
use oncekey_api::v1;
use oncekey_server::settings::ConfigError;
use rand::RngCore;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// `oncekey rekey`
#[derive(Debug, Clone, Args)]
pub struct RekeyCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Records per page, 1..=1000 (0: the server's default, 100).
    #[arg(long, default_value_t = 0)]
    page_size: u32,
    /// Continue after an interruption: the token the last progress line named.
    #[arg(long, value_name = "TOKEN", default_value = "")]
    resume: String,
}

/// `oncekey erase-tenant`
#[derive(Debug, Clone, Args)]
pub struct EraseTenantCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// The tenant to erase: must be the tenant of the token (a guard against the wrong one).
    #[arg(long, value_name = "TENANT")]
    confirm: String,
    /// Records per page, 1..=1000 (0: the server's default, 100).
    #[arg(long, default_value_t = 0)]
    page_size: u32,
    /// Continue after an interruption (optional: erased records are not listed again, so
    /// running it again from the start continues too).
    #[arg(long, value_name = "TOKEN", default_value = "")]
    resume: String,
}

/// The AEAD of a key ring key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Algorithm {
    /// AES-256-GCM (the default; not written on the line).
    #[value(name = "aes-256-gcm")]
    Aes256Gcm,
    /// ChaCha20-Poly1305.
    #[value(name = "chacha20-poly1305")]
    Chacha20Poly1305,
}

/// `oncekey new-key`
#[derive(Debug, Clone, Args)]
pub struct NewKeyCmd {
    /// The key's id: 1..=64 of A-Z a-z 0-9 . _ -, unique in the key ring.
    #[arg(long)]
    id: String,
    /// The key new writes are sealed with (at most one key of the ring).
    #[arg(long, conflicts_with = "hmac")]
    primary: bool,
    /// The key key privacy hashes with (at most one; never also primary).
    #[arg(long)]
    hmac: bool,
    /// The AEAD the key seals with.
    #[arg(long, value_enum, default_value = "aes-256-gcm")]
    algorithm: Algorithm,
}

/// Runs `oncekey rekey`: prints the totals; fails (exit 1) when records could not be opened.
pub async fn rekey(cmd: RekeyCmd) -> anyhow::Result<()> {
    let mut rpc = connect(&cmd.conn).await?;
    let mut token = cmd.resume.clone();
    let (mut pages, mut examined, mut resealed, mut current, mut unreadable) = (0u64, 0, 0, 0, 0);
    let mut key_ids = BTreeSet::new();
    let primary = loop {
        let request = v1::RekeyRequest {
            page_token: token,
            page_size: cmd.page_size,
        };
        let page = rpc.rekey(request).await?.into_inner();
        pages += 1;
        examined += u64::from(page.examined);
        resealed += u64::from(page.resealed);
        current += u64::from(page.current);
        unreadable += u64::from(page.unreadable);
        key_ids.extend(page.unreadable_key_ids.iter().cloned());
        eprintln!(
            "rekey: page {pages}: {} examined, {} resealed, {} current, {} unreadable{}",
            page.examined,
            page.resealed,
            page.current,
            page.unreadable,
            resume_hint(&page.next_page_token)
        );
        if page.next_page_token.is_empty() {
            break page.primary_key_id;
        }
        token = page.next_page_token;
    };
    let totals = json!({
        "pages": pages,
        "examined": examined,
        "resealed": resealed,
        "current": current,
        "unreadable": unreadable,
        "unreadable_key_ids": key_ids,
        "primary_key_id": primary,
    });
    println!("{}", crate::render::json_text(&totals)?);
    if unreadable > 0 {
        let ids: Vec<String> = key_ids.iter().map(|id| text(id).into_owned()).collect();
        anyhow::bail!(
            "{unreadable} records could not be opened; their key ids: {} (put those keys back in \
             the key ring and run rekey again, or erase the records)",
            ids.join(", ")
        );
    }
    Ok(())
}

/// Runs `oncekey erase-tenant`: returns the receipt and the count.
pub async fn erase_tenant(cmd: EraseTenantCmd) -> anyhow::Result<Value> {
    let mut rpc = connect(&cmd.conn).await?;
    let mut token = cmd.resume.clone();
    let (mut pages, mut total) = (0u64, 0u64);
    let receipt = loop {
        let request = v1::EraseTenantRequest {
            confirm_tenant: cmd.confirm.clone(),
            page_token: token,
            page_size: cmd.page_size,
        };
        let page = rpc.erase_tenant(request).await?.into_inner();
        pages += 1;
        total += u64::from(page.erased);
        eprintln!(
            "erase-tenant: page {pages}: {} erased (total {total}){}",
            page.erased,
            resume_hint(&page.next_page_token)
        );
        if let Some(receipt) = page.receipt {
            break receipt;
        }
        // An empty token after the last page: the next call, from the start, confirms.
        token = page.next_page_token;
    };
    Ok(json!({
        "receipt": {
            "tenant": receipt.tenant,
            "completed_at": time(&receipt.completed_at),
            "erased_by": receipt.erased_by,
        },
        "erased": total,
        "pages": pages,
    }))
}

/// `; resume with --resume TOKEN`, or nothing on a page that names no next one.
fn resume_hint(next_page_token: &str) -> String {
    match next_page_token {
        "" => String::new(),
        token => format!("; resume with --resume {}", text(token)),
    }
}

/// Runs `oncekey new-key`: prints the key ring line.
pub fn new_key(cmd: &NewKeyCmd) -> anyhow::Result<()> {
    let mut secret = [0u8; 32];
    rand::rng().fill_bytes(&mut secret);
    println!("{}", key_line(cmd, &secret)?);
    Ok(())
}

/// The key ring line of `cmd` with `secret`: `ID SECRET [primary] [hmac] [chacha20-poly1305]`.
fn key_line(cmd: &NewKeyCmd, secret: &[u8; 32]) -> Result<String, ConfigError> {
    let id = &cmd.id;
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if id.is_empty() || id.len() > 64 || !id.chars().all(valid) {
        return Err(ConfigError(
            "--id must be 1 to 64 of A-Z a-z 0-9 . _ -".into(),
        ));
    }
    if cmd.primary && cmd.hmac {
        return Err(ConfigError(
            "--hmac: the hmac key is never also the primary key".into(),
        ));
    }
    let mut line = format!("{id} {}", STANDARD.encode(secret));
    if cmd.primary {
        line.push_str(" primary");
    }
    if cmd.hmac {
        line.push_str(" hmac");
    }
    if cmd.algorithm == Algorithm::Chacha20Poly1305 {
        line.push_str(" chacha20-poly1305");
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(id: &str, primary: bool, hmac: bool, algorithm: Algorithm) -> NewKeyCmd {
        NewKeyCmd {
            id: id.into(),
            primary,
            hmac,
            algorithm,
        }
    }

    #[test]
    fn a_key_line_has_the_id_the_secret_and_the_flags_asked_for() {
        let secret = [7u8; 32];
        let b64 = STANDARD.encode(secret);
        let line = |c: NewKeyCmd| key_line(&c, &secret).unwrap();
        assert_eq!(
            line(cmd("k-2026", false, false, Algorithm::Aes256Gcm)),
            format!("k-2026 {b64}")
        );
        assert_eq!(
            line(cmd("k.1_x", true, false, Algorithm::Chacha20Poly1305)),
            format!("k.1_x {b64} primary chacha20-poly1305")
        );
        assert_eq!(
            line(cmd("names", false, true, Algorithm::Aes256Gcm)),
            format!("names {b64} hmac")
        );
        assert_eq!(STANDARD.decode(&b64).unwrap().len(), 32);
    }

    #[test]
    fn a_bad_id_or_flags_name_the_flag() {
        let secret = [0u8; 32];
        let long = "k".repeat(65);
        for bad in ["", "k 1", "k/1", "ключ", long.as_str()] {
            let e = key_line(&cmd(bad, false, false, Algorithm::Aes256Gcm), &secret);
            assert!(e.unwrap_err().0.contains("--id"), "{bad:?}");
        }
        assert!(key_line(
            &cmd(&"k".repeat(64), false, false, Algorithm::Aes256Gcm),
            &secret
        )
        .is_ok());
        let both = key_line(&cmd("k", true, true, Algorithm::Aes256Gcm), &secret);
        assert!(both.unwrap_err().0.contains("--hmac"));
    }

    #[test]
    fn the_resume_hint_names_the_token_only_when_there_is_one() {
        assert_eq!(resume_hint(""), "");
        assert_eq!(resume_hint("abc_-"), "; resume with --resume abc_-");
    }
}
