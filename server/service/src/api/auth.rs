//! Who is calling: bearer tokens mapped to tenants (docs/api.md#identity-and-scope,
//! #tokens-file), or, with no tokens file (local/dev mode), the `x-oncekey-tenant` header,
//! default `default`; and what the caller may do (its `Principal`: scopes, and the label a
//! decision is recorded under).
//!
//! The tokens file holds `tenant:[label:]sha256-hex-of-token[:scope,scope]` lines, never tokens:
//! the 64-hex field is the hash, a field before it the label, after it the scopes (`ledger`,
//! `approve`, `admin`; none means `ledger`). A presented token is hashed and compared with every
//! entry in constant time. Reloaded on SIGHUP and when the file changes (`crate::reload`); a bad
//! file keeps the previous table. Dev mode has every scope on a loopback address, and only
//! `ledger` when `--allow-unauthenticated` opens it to others. Never logs a token or its hash.

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

/// What a token may do: each RPC needs one of the scopes `super::scopes` lists for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Claim, Complete, Fail, Renew, KeepAlive, Lookup, ListRecords.
    Ledger,
    /// Approve, Reject, plus Lookup and ListRecords.
    Approve,
    /// Purge, plus Lookup and ListRecords.
    Admin,
}

impl Scope {
    /// Every scope.
    pub const ALL: [Scope; 3] = [Scope::Ledger, Scope::Approve, Scope::Admin];

    /// The scope as the tokens file spells it.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Ledger => "ledger",
            Scope::Approve => "approve",
            Scope::Admin => "admin",
        }
    }

    /// The scope the tokens file spells `name`.
    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.name() == name)
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Scopes(u8);

impl Scopes {
    /// `ledger` only: a tokens-file line without scopes, or dev mode open to other hosts.
    pub const LEDGER: Scopes = Scopes(1);

    /// Every scope: dev mode on a loopback address.
    pub fn all() -> Self {
        Scope::ALL.into_iter().collect()
    }

    /// Whether `scope` is in the set.
    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }
}

impl FromIterator<Scope> for Scopes {
    fn from_iter<I: IntoIterator<Item = Scope>>(iter: I) -> Self {
        Scopes(iter.into_iter().fold(0, |bits, s| bits | s.bit()))
    }
}

/// Who an authenticated request comes from, beyond its tenant (a request extension set by the
/// interceptor, next to `Tenant`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Recorded as `decided_by` of an approval: the token line's label (its tenant when the line
    /// has none), `dev` in dev mode.
    pub label: String,
    /// What the caller may do.
    pub scopes: Scopes,
}

/// The `decided_by` of a dev-mode caller.
pub const DEV_LABEL: &str = "dev";

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
    /// A line is not `tenant:[label:]sha256-hex[:scope,scope]`.
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
    /// The label and scopes of the token.
    principal: Principal,
}

/// Valid labels: like tenants, plus `@` (an e-mail address names a person well).
pub fn valid_label(label: &str) -> bool {
    let b = label.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b'@'))
}

/// The hash of a 64-hex field.
fn hash_field(field: &str) -> Option<[u8; 32]> {
    let mut digest = [0u8; 32];
    (field.len() == 64 && hex::decode_to_slice(field, &mut digest).is_ok()).then_some(digest)
}

/// Parses one non-empty, non-comment line: `tenant:[label:]sha256-hex[:scope,scope]`.
fn parse_line(line: &str) -> Result<Entry, &'static str> {
    const SHAPE: &str = "expected tenant:[label:]sha256-hex[:scope,scope]";
    let fields: Vec<&str> = line.split(':').map(str::trim).collect();
    let tenant = fields[0];
    if fields.len() < 2 {
        return Err(SHAPE);
    }
    if !valid_tenant(tenant) {
        return Err("tenant must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$");
    }
    // The hash is the second field, or the third after a label.
    let (label, hash, rest) = match hash_field(fields[1]) {
        Some(hash) => (None, hash, &fields[2..]),
        None if fields.len() >= 3 => {
            let hash = hash_field(fields[2]).ok_or("hash must be 64 hex digits")?;
            (Some(fields[1]), hash, &fields[3..])
        }
        None => return Err("hash must be 64 hex digits"),
    };
    if let Some(label) = label {
        if !valid_label(label) {
            return Err("label must match ^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$");
        }
    }
    let scopes = match rest {
        [] => Scopes::LEDGER,
        [list] => {
            let mut scopes = Vec::new();
            for name in list.split(',').map(str::trim) {
                scopes
                    .push(Scope::parse(name).ok_or(
                        "scopes must be a comma-separated list of ledger, approve, admin",
                    )?);
            }
            scopes.into_iter().collect()
        }
        _ => return Err(SHAPE),
    };
    Ok(Entry {
        tenant: tenant.to_owned(),
        hash,
        principal: Principal {
            label: label.unwrap_or(tenant).to_owned(),
            scopes,
        },
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
    /// No tokens: every caller has these scopes.
    Dev(Scopes),
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
    /// Local/dev mode on a loopback address: the tenant comes from the `x-oncekey-tenant`
    /// header, and every caller has every scope.
    pub fn dev() -> Self {
        Self {
            mode: Mode::Dev(Scopes::all()),
        }
    }

    /// Dev mode opened to other hosts (`--allow-unauthenticated` on a non-loopback address):
    /// anyone may use the ledger, nobody may approve or purge.
    pub fn dev_open() -> Self {
        Self {
            mode: Mode::Dev(Scopes::LEDGER),
        }
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
            Mode::Dev(_) => Ok(0),
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
        self.authenticate_principal(metadata)
            .map(|(tenant, _)| tenant)
    }

    /// The tenant and the principal of a request with these headers.
    pub fn authenticate_principal(
        &self,
        metadata: &MetadataMap,
    ) -> Result<(Tenant, Principal), ApiError> {
        let header = metadata
            .get(TENANT_HEADER)
            .map(|v| v.to_str().unwrap_or("\u{0}"));
        match &self.mode {
            Mode::Dev(scopes) => {
                let tenant = header.unwrap_or("default");
                if !valid_tenant(tenant) {
                    return Err(ApiError::invalid(
                        TENANT_HEADER,
                        "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$",
                    ));
                }
                let principal = Principal {
                    label: DEV_LABEL.to_owned(),
                    scopes: *scopes,
                };
                Ok((Tenant(tenant.to_owned()), principal))
            }
            Mode::Tokens { table, .. } => {
                let token = metadata
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .and_then(bearer_token)
                    .ok_or(ApiError::Unauthenticated("missing bearer token"))?;
                let table = table.read().unwrap_or_else(|e| e.into_inner()).clone();
                let entry = lookup(&table, &token_hash(token))
                    .ok_or(ApiError::Unauthenticated("unknown bearer token"))?;
                if header.is_some_and(|h| h != entry.tenant) {
                    return Err(ApiError::PermissionDenied(
                        "the token does not belong to the tenant in x-oncekey-tenant",
                    ));
                }
                Ok((Tenant(entry.tenant.clone()), entry.principal.clone()))
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

/// The entry whose hash equals `hash`: every entry is compared, in constant time, whatever
/// matches (a file never holds a hash twice).
fn lookup<'t>(table: &'t [Entry], hash: &[u8; 32]) -> Option<&'t Entry> {
    let mut found = None;
    for entry in table {
        if bool::from(entry.hash.ct_eq(hash)) {
            found = Some(entry);
        }
    }
    found
}

#[cfg(test)]
mod tests;
