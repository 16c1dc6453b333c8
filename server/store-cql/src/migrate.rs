//! `oncekey migrate`: creates the keyspace and applies the numbered `migrations/*.cql` files,
//! which are embedded in the binary (a deployed binary needs no files).
//!
//! Applied versions are recorded in the keyspace's own `schema_migrations` table. Each version is
//! claimed with a lightweight transaction (`INSERT … IF NOT EXISTS`) before it runs, so two
//! migrators started at once never run DDL concurrently: the loser waits for the winner, and takes
//! over a claim whose holder stopped (every migration file is idempotent, so re-running is safe).
//! Running migrate again is a no-op. The keyspace itself is created from `--cql-replication`
//! (`SimpleStrategy:1` is for a local single node only); on ScyllaDB it is created with tablets
//! disabled, as lightweight transactions on tablet keyspaces need ScyllaDB 2025.x or newer.
//!
//! This module must not touch the records table's data.

use super::connect::{self, ConnectError};
use super::errors::{classify, Failure};
pub use super::replication::{parse_replication, Replication};
use super::CqlConfig;
use scylla::client::session::Session;
use scylla::statement::unprepared::Statement;
use scylla::statement::Consistency;
use scylla::value::{CqlTimestamp, CqlValue, Row};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One numbered migration.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number, from the file name.
    pub version: i32,
    /// The file name without `.cql`.
    pub name: &'static str,
    /// The CQL text.
    pub text: &'static str,
}

/// Every migration, in order. A unit test checks this list against the `migrations/` folder.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_ledger",
        text: include_str!("../../../migrations/0001_ledger.cql"),
    },
    Migration {
        version: 2,
        name: "0002_operations",
        text: include_str!("../../../migrations/0002_operations.cql"),
    },
    Migration {
        version: 3,
        name: "0003_listing",
        text: include_str!("../../../migrations/0003_listing.cql"),
    },
    Migration {
        version: 4,
        name: "0004_hit_writes",
        text: include_str!("../../../migrations/0004_hit_writes.cql"),
    },
    Migration {
        version: 5,
        name: "0005_budget",
        text: include_str!("../../../migrations/0005_budget.cql"),
    },
];

/// The bookkeeping table (created before any migration, so it is not one of them).
const BOOKKEEPING: &str = "CREATE TABLE IF NOT EXISTS schema_migrations (
    version int PRIMARY KEY,
    name text,
    checksum text,
    owner text,
    started_at timestamp,
    applied_at timestamp
) WITH comment = 'oncekey: applied migrations; written only with lightweight transactions'";

/// A claim older than this whose migration has not finished is taken over.
const STALE_CLAIM: Duration = Duration::from_secs(120);
/// How often a waiting migrator looks whether the claim holder finished.
const POLL: Duration = Duration::from_millis(250);
/// How long a keyspace created by a concurrent migrator may take to become usable.
const KEYSPACE_VISIBLE: Duration = Duration::from_secs(30);
/// Schema changes can be slow on a loaded cluster.
const DDL_TIMEOUT: Duration = Duration::from_secs(120);
/// Tries of one bookkeeping statement whose outcome stays unknown (a timed-out Paxos round on a
/// busy cluster) before migrate gives up.
const ATTEMPTS: u32 = 8;

/// Why migrate failed.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// Could not connect, or a flag is wrong.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The keyspace does not exist and no replication was given.
    #[error("keyspace {0} does not exist: pass --cql-replication, e.g. NetworkTopologyStrategy:dc1=3 (or SimpleStrategy:1 for a local single node only)")]
    NoReplication(String),
    /// An applied migration differs from the embedded one.
    #[error("migration {name} was applied with different content (checksum {stored}, this binary has {embedded}); migrations must never be edited once released")]
    Changed {
        /// The migration.
        name: String,
        /// The recorded checksum.
        stored: String,
        /// The embedded file's checksum.
        embedded: String,
    },
    /// A CQL statement failed.
    #[error("{0}")]
    Cql(String),
}

impl MigrateError {
    /// Whether the operator must fix a flag or the setup (exit code 64).
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            MigrateError::NoReplication(_)
                | MigrateError::Connect(
                    ConnectError::Flag(_)
                        | ConnectError::Unreachable { .. }
                        | ConnectError::Refused { .. }
                )
        )
    }
}

fn cql(context: &str) -> impl Fn(scylla::errors::ExecutionError) -> MigrateError + '_ {
    move |e| MigrateError::Cql(format!("{context}: {e}"))
}

/// What one migration run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The migration.
    pub name: &'static str,
    /// `true` if this run applied it, `false` if it was applied already (or by a concurrent run).
    pub applied_now: bool,
}

/// What `oncekey migrate` runs with.
#[derive(Debug, Clone)]
pub struct MigrateConfig {
    /// The cluster and the keyspace to migrate.
    pub cql: CqlConfig,
    /// Replication of the keyspace when migrate creates it (`--cql-replication`; ignored once
    /// it exists).
    pub replication: Option<Replication>,
}

/// Creates the keyspace if needed and applies the pending migrations.
pub async fn run(config: &MigrateConfig) -> Result<Vec<Outcome>, MigrateError> {
    let keyspace = config.cql.keyspace.as_str();
    let session = connect::session(&config.cql).await?;
    create_keyspace(&session, keyspace, config.replication.as_ref()).await?;
    use_keyspace(&session, keyspace).await?;
    ddl(&session, BOOKKEEPING).await?;
    let owner = format!("{:016x}", rand::random::<u64>());
    let mut outcomes = Vec::new();
    for migration in MIGRATIONS {
        let applied_now = apply_one(&session, keyspace, migration, &owner).await?;
        if applied_now {
            tracing::info!(migration = migration.name, keyspace, "migration applied");
        }
        outcomes.push(Outcome {
            name: migration.name,
            applied_now,
        });
    }
    Ok(outcomes)
}

async fn create_keyspace(
    session: &Session,
    keyspace: &str,
    replication: Option<&Replication>,
) -> Result<(), MigrateError> {
    // With a replication, always run CREATE … IF NOT EXISTS: the node serializes schema changes,
    // so it returns only once a concurrent migrator's creation is usable, whereas the schema
    // tables may list a keyspace a little before that.
    let Some(replication) = replication else {
        let exists = !rows(
            session,
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?",
            vec![CqlValue::Text(keyspace.into())],
        )
        .await?
        .is_empty();
        return if exists {
            Ok(())
        } else {
            Err(MigrateError::NoReplication(keyspace.into()))
        };
    };
    let mut text = format!(
        "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {} AND durable_writes = true",
        replication.cql()
    );
    if scylla_with_tablets(session).await? {
        text.push_str(" AND tablets = {'enabled': false}");
    }
    ddl(session, &text).await
}

/// `USE keyspace`, retried while a keyspace that a concurrent migrator just created is listed in
/// the schema tables but not yet usable on this coordinator.
async fn use_keyspace(session: &Session, keyspace: &str) -> Result<(), MigrateError> {
    let deadline = tokio::time::Instant::now() + KEYSPACE_VISIBLE;
    loop {
        let _ = session.await_schema_agreement().await;
        match session.use_keyspace(keyspace, false).await {
            Ok(()) => return Ok(()),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(error = %e, keyspace, "keyspace not usable yet; retrying");
                tokio::time::sleep(POLL).await;
            }
            Err(e) => return Err(MigrateError::Cql(format!("USE {keyspace}: {e}"))),
        }
    }
}

/// Whether the cluster is ScyllaDB with tablet support (the `tablets` keyspace option exists).
async fn scylla_with_tablets(session: &Session) -> Result<bool, MigrateError> {
    let found = rows(
        session,
        "SELECT column_name FROM system_schema.columns \
         WHERE keyspace_name = 'system_schema' AND table_name = 'scylla_keyspaces'",
        vec![],
    )
    .await?;
    Ok(found.iter().any(
        |r| matches!(r.columns.first(), Some(Some(CqlValue::Text(c))) if c == "initial_tablets"),
    ))
}

/// `apply_one` for tests: migration `m` of keyspace `ks` by the migrator named `owner`.
#[cfg(test)]
pub(super) async fn apply_claimed_by(
    session: &Session,
    ks: &str,
    m: &Migration,
    owner: &str,
) -> Result<bool, MigrateError> {
    use_keyspace(session, ks).await?;
    apply_one(session, ks, m, owner).await
}

/// Runs every statement of a migration file. An `ALTER TABLE t ADD column type` whose column
/// exists already is skipped: CQL has no `ADD IF NOT EXISTS` that every supported server accepts,
/// and a file must be safe to run again after a migrator stopped half-way.
async fn run_file(session: &Session, ks: &str, m: &Migration) -> Result<(), MigrateError> {
    for statement in split_statements(m.text) {
        if let Some((table, column)) = added_column(&statement) {
            if column_exists(session, ks, &table, &column).await? {
                tracing::debug!(migration = m.name, table, column, "column exists; skipped");
                continue;
            }
        }
        ddl(session, &statement).await?;
    }
    Ok(())
}

async fn column_exists(
    session: &Session,
    ks: &str,
    table: &str,
    column: &str,
) -> Result<bool, MigrateError> {
    let found = rows(
        session,
        "SELECT column_name FROM system_schema.columns \
         WHERE keyspace_name = ? AND table_name = ? AND column_name = ?",
        vec![
            CqlValue::Text(ks.into()),
            CqlValue::Text(table.into()),
            CqlValue::Text(column.into()),
        ],
    )
    .await?;
    Ok(!found.is_empty())
}

async fn ddl(session: &Session, text: &str) -> Result<(), MigrateError> {
    let mut statement = Statement::new(text);
    statement.set_request_timeout(Some(DDL_TIMEOUT));
    session
        .query_unpaged(statement, ())
        .await
        .map_err(|e| MigrateError::Cql(format!("{}: {e}", first_line(text))))?;
    // The driver waits for schema agreement after a schema change; make sure of it.
    session
        .await_schema_agreement()
        .await
        .map_err(|e| MigrateError::Cql(format!("schema agreement: {e}")))?;
    Ok(())
}

async fn rows(
    session: &Session,
    text: &str,
    values: Vec<CqlValue>,
) -> Result<Vec<Row>, MigrateError> {
    let result = session
        .query_unpaged(text, values)
        .await
        .map_err(cql("reading the schema"))?;
    all_rows(result)
}

fn all_rows(result: scylla::response::query_result::QueryResult) -> Result<Vec<Row>, MigrateError> {
    let rows = result
        .into_rows_result()
        .map_err(|e| MigrateError::Cql(e.to_string()))?;
    let collected = rows
        .rows::<Row>()
        .map_err(|e| MigrateError::Cql(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| MigrateError::Cql(e.to_string()));
    collected
}

mod check;
mod claims;
#[cfg(test)]
mod tests;
mod text;

pub use check::check_applied;
use claims::apply_one;
use text::first_line;
pub use text::{added_column, checksum, split_statements};
