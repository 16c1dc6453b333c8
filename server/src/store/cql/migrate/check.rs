//! What `serve` checks before it uses a keyspace: the ledger tables exist and every migration
//! the binary embeds was applied (else it says which one is missing).

use super::{rows, MigrateError, MIGRATIONS};
use crate::store::cql::ConnectError;
use scylla::client::session::Session;
use scylla::value::CqlValue;

/// For `serve`: fails unless the ledger tables exist and every embedded migration was applied.
pub async fn check_applied(session: &Session, keyspace: &str) -> Result<(), ConnectError> {
    let other = |e: MigrateError| ConnectError::Other(e.to_string());
    let tables = rows(
        session,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?",
        vec![CqlValue::Text(keyspace.into())],
    )
    .await
    .map_err(other)?;
    let has = |name: &str| {
        tables
            .iter()
            .any(|r| matches!(r.columns.first(), Some(Some(CqlValue::Text(t))) if t == name))
    };
    if !has(crate::store::cql::statements::RECORDS) || !has("schema_migrations") {
        return Err(ConnectError::NoTables(keyspace.into()));
    }
    let applied = rows(
        session,
        &format!("SELECT version, applied_at FROM {keyspace}.schema_migrations"),
        vec![],
    )
    .await
    .map_err(other)?;
    for m in MIGRATIONS {
        let done = applied.iter().any(|r| {
            matches!(r.columns.first(), Some(Some(CqlValue::Int(v))) if *v == m.version)
                && matches!(r.columns.get(1), Some(Some(_)))
        });
        if !done {
            return Err(ConnectError::Outdated {
                keyspace: keyspace.into(),
                missing: m.name.into(),
            });
        }
    }
    Ok(())
}
