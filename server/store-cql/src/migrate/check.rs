//! What `serve` checks before it uses a keyspace: the ledger tables exist and every migration
//! the binary embeds was applied (else it says which one is missing).

use super::{all_rows, MIGRATIONS};
use crate::ConnectError;
use scylla::client::session::Session;
use scylla::value::{CqlValue, Row};

/// The rows of a schema read; a read the cluster could not serve now is `Unavailable`.
async fn rows(
    session: &Session,
    text: &str,
    values: Vec<CqlValue>,
) -> Result<Vec<Row>, ConnectError> {
    let result = session
        .query_unpaged(text, values)
        .await
        .map_err(|e| ConnectError::of_request("reading the schema", &e))?;
    all_rows(result).map_err(|e| ConnectError::Other(e.to_string()))
}

/// For `serve`: fails unless the ledger tables exist and every embedded migration was applied.
pub async fn check_applied(session: &Session, keyspace: &str) -> Result<(), ConnectError> {
    let tables = rows(
        session,
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?",
        vec![CqlValue::Text(keyspace.into())],
    )
    .await?;
    let has = |name: &str| {
        tables
            .iter()
            .any(|r| matches!(r.columns.first(), Some(Some(CqlValue::Text(t))) if t == name))
    };
    if !has(crate::statements::RECORDS) || !has("schema_migrations") {
        return Err(ConnectError::NoTables(keyspace.into()));
    }
    let applied = rows(
        session,
        &format!("SELECT version, applied_at FROM {keyspace}.schema_migrations"),
        vec![],
    )
    .await?;
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
