//! Who is calling: bearer tokens mapped to tenants (CONTRACT §1, §8), or, with no tokens file
//! (local/dev mode), the `x-oncekey-tenant` header, default `default`.
//!
//! The tokens file holds `tenant:sha256-hex-of-token` lines, never tokens. A presented token is
//! hashed and compared with every entry in constant time. Reloaded on SIGHUP and when the file
//! changes (`crate::reload`); a bad file keeps the previous table. Never logs a token or its hash.

use super::error::ApiError;
use oncekey_api::TENANT_HEADER;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use subtle::ConstantTimeEq;
use tonic::metadata::MetadataMap;

/// The tenant of an authenticated request (a request extension set by the interceptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant(pub String);

/// Why a tokens file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TokensFileError {
    /// The file could not be read.
    #[error("cannot read tokens file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line is not `tenant:sha256-hex`.
    #[error("tokens file {path} line {line}: {problem}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// Two lines hold the same token hash: which tenant (or, per line, which label and scopes) the
    /// token stands for would depend on the order of the lines.
    #[error("tokens file {path} lines {first} and {second} hold the same token hash (tenants {first_tenant} and {second_tenant}); a token must appear on one line only")]
    DuplicateHash {
        /// The file.
        path: PathBuf,
        /// 1-based number of the first line with the hash.
        first: usize,
        /// 1-based number of the later line with the same hash.
        second: usize,
        /// The tenant on the first line.
        first_tenant: String,
        /// The tenant on the later line.
        second_tenant: String,
    },
}

/// Valid tenant names: like namespaces, but upper case is allowed.
pub fn valid_tenant(t: &str) -> bool {
    let b = t.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// The SHA-256 of a token, as stored in the tokens file.
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// One line of a tokens file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The tenant the token authenticates as.
    tenant: String,
    /// The SHA-256 of the token.
    hash: [u8; 32],
}

/// Parses one non-empty, non-comment line: `tenant:sha256-hex`.
fn parse_line(line: &str) -> Result<Entry, &'static str> {
    let (tenant, hash) = line.split_once(':').ok_or("expected tenant:sha256-hex")?;
    let (tenant, hash) = (tenant.trim(), hash.trim());
    if !valid_tenant(tenant) {
        return Err("tenant must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$");
    }
    let mut digest = [0u8; 32];
    hex::decode_to_slice(hash, &mut digest).map_err(|_| "hash must be 64 hex digits")?;
    Ok(Entry {
        tenant: tenant.to_owned(),
        hash: digest,
    })
}

/// Parses a tokens file's text: every line valid, and no token hash on two lines.
fn parse(path: &Path, text: &str) -> Result<TokenTable, TokensFileError> {
    let mut entries = Vec::new();
    // Line number of each hash seen so far.
    let mut lines: HashMap<[u8; 32], (usize, usize)> = HashMap::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let entry = parse_line(line).map_err(|problem| TokensFileError::Line {
            path: path.to_owned(),
            line: n + 1,
            problem,
        })?;
        if let Some(&(first, index)) = lines.get(&entry.hash) {
            let first_entry: &Entry = &entries[index];
            return Err(TokensFileError::DuplicateHash {
                path: path.to_owned(),
                first,
                second: n + 1,
                first_tenant: first_entry.tenant.clone(),
                second_tenant: entry.tenant,
            });
        }
        lines.insert(entry.hash, (n + 1, entries.len()));
        entries.push(entry);
    }
    Ok(entries)
}

/// The entries of a tokens file.
type TokenTable = Vec<Entry>;

enum Mode {
    Dev,
    Tokens {
        path: PathBuf,
        table: RwLock<Arc<TokenTable>>,
    },
}

/// The authenticator shared by every request.
pub struct Auth {
    mode: Mode,
}

impl Auth {
    /// Local/dev mode: the tenant comes from the `x-oncekey-tenant` header.
    pub fn dev() -> Self {
        Self { mode: Mode::Dev }
    }

    /// Token mode, reading `path` now.
    pub fn from_file(path: &Path) -> Result<Self, TokensFileError> {
        let table = RwLock::new(Arc::new(Self::read(path)?));
        Ok(Self {
            mode: Mode::Tokens {
                path: path.to_owned(),
                table,
            },
        })
    }

    fn read(path: &Path) -> Result<TokenTable, TokensFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokensFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        parse(path, &text)
    }

    /// Whether requests are authenticated by tokens.
    pub fn has_tokens(&self) -> bool {
        matches!(self.mode, Mode::Tokens { .. })
    }

    /// Re-reads the tokens file; on error the previous table stays. Returns the number of entries.
    pub fn reload(&self) -> Result<usize, TokensFileError> {
        match &self.mode {
            Mode::Dev => Ok(0),
            Mode::Tokens { path, table } => {
                let entries = Self::read(path)?;
                let n = entries.len();
                *table.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(entries);
                Ok(n)
            }
        }
    }

    /// The tenant of a request with these headers.
    pub fn authenticate(&self, metadata: &MetadataMap) -> Result<Tenant, ApiError> {
        let header = metadata
            .get(TENANT_HEADER)
            .map(|v| v.to_str().unwrap_or("\u{0}"));
        match &self.mode {
            Mode::Dev => {
                let tenant = header.unwrap_or("default");
                if !valid_tenant(tenant) {
                    return Err(ApiError::invalid(
                        TENANT_HEADER,
                        "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
                    ));
                }
                Ok(Tenant(tenant.to_owned()))
            }
            Mode::Tokens { table, .. } => {
                let token = metadata
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(bearer_token)
                    .ok_or(ApiError::Unauthenticated("missing bearer token"))?;
                let table = table.read().unwrap_or_else(|e| e.into_inner()).clone();
                let tenant = lookup(&table, &token_hash(token))
                    .ok_or(ApiError::Unauthenticated("unknown bearer token"))?;
                if header.is_some_and(|h| h != tenant) {
                    return Err(ApiError::PermissionDenied(
                        "the token does not belong to the tenant in x-oncekey-tenant",
                    ));
                }
                Ok(Tenant(tenant.to_owned()))
            }
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is case-insensitive (RFC 9110
/// §11.1); spaces around the token are ignored.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The tenant whose hash equals `hash`: every entry is compared, in constant time, whatever
/// matches (a file never holds a hash twice).
fn lookup<'t>(table: &'t [Entry], hash: &[u8; 32]) -> Option<&'t str> {
    let mut found = None;
    for entry in table {
        if bool::from(entry.hash.ct_eq(hash)) {
            found = Some(entry.tenant.as_str());
        }
    }
    found
}

#[cfg(test)]
mod tests {
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
}
