//! The raw-LWT target (`--cql-raw`): the two lightweight transactions the CQL store issues for a
//! `cycle`, sent straight through the driver with nothing of the service around them — the
//! conditional insert a Claim of a fresh key makes (`INSERT … IF NOT EXISTS USING TTL ?`) and the
//! conditional replace its Complete makes (`UPDATE … USING TTL ? SET … IF version = ? AND
//! expires_at > ?`).
//!
//! Everything that decides what reaches the cluster is the store's own: the session comes from
//! `store::cql::connect` (token-aware load balancing, QUORUM/SERIAL or LOCAL_* levels, timeouts),
//! the prepared statements from `store::cql::statements`, the bound values from
//! `store::cql::codec`, and the records from the real ledger decisions (`ledger::claim` of an
//! absent key, then `ledger::complete`), with the bench's fingerprint, owner and result body and
//! the server's default lease and retention. So the raw loop writes the bytes a served cycle
//! writes; the gap between the two is what the service adds (gRPC, validation, the engine, and
//! the QUORUM read its Complete makes before the conditional write).

use super::grpc::{Claimed, ARGUMENTS};
use crate::config::CqlArgs;
use crate::ledger::{self, Change, ClaimArgs, Millis, OpResult, Record, RecordId, Semantics};
use crate::store::cql::codec::{self, RowView};
use crate::store::cql::statements::Statements;
use crate::store::cql::{connect, migrate};
use anyhow::Context as _;
use scylla::client::session::Session;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{CqlValue, Row};
use std::sync::Arc;

/// `oncekey serve`'s default lease (`--default-lease`), which a bench Claim gets.
const LEASE_MS: Millis = 30_000;
/// `oncekey serve`'s default retention (`--default-retention`), which sets the row TTL.
const RETENTION_MS: Millis = 24 * 3_600_000;

/// What every raw cycle shares: the record identity parts, the Claim and the result.
struct Template {
    tenant: String,
    namespace: String,
    claim: ClaimArgs,
    result: OpResult,
}

/// A session and the store's prepared statements on one keyspace.
pub struct RawCql {
    session: Arc<Session>,
    statements: Arc<Statements>,
    template: Arc<Template>,
}

impl RawCql {
    /// Connects as `oncekey serve --store cql` with `cql` would, and prepares the statements.
    pub async fn connect(
        cql: &CqlArgs,
        tenant: &str,
        namespace: &str,
        body_bytes: usize,
    ) -> anyhow::Result<Self> {
        let session = connect::session(cql).await?;
        migrate::check_applied(&session, &cql.cql_keyspace).await?;
        let levels = connect::levels(cql);
        let statements = Statements::prepare(&session, &cql.cql_keyspace, levels)
            .await
            .context("--cql-raw: preparing the CQL store's statements")?;
        let template = Template {
            tenant: tenant.to_owned(),
            namespace: namespace.to_owned(),
            claim: ClaimArgs {
                fingerprint: oncekey_api::fingerprint::fingerprint_json(ARGUMENTS)
                    .expect("valid JSON"),
                lease_ttl: LEASE_MS,
                retention: RETENTION_MS,
                semantics: Semantics::AtLeastOnce,
                owner: "bench".into(),
                parent: None,
                reconcile: false,
                require_approval: false,
                max_attempts: 0,
            },
            // What the gRPC worker's Complete sends.
            result: OpResult {
                code: 200,
                body: vec![b'x'; body_bytes],
                content_type: "application/json".into(),
                metadata: Default::default(),
            },
        };
        Ok(Self {
            session: Arc::new(session),
            statements: Arc::new(statements),
            template: Arc::new(template),
        })
    }

    /// One worker's handle; every worker shares the one session, as the server's requests do.
    pub fn worker(&self) -> CqlConn {
        CqlConn {
            session: self.session.clone(),
            statements: self.statements.clone(),
            template: self.template.clone(),
            held: None,
        }
    }
}

/// One worker: the record its last insert created, for the replace that follows.
pub struct CqlConn {
    session: Arc<Session>,
    statements: Arc<Statements>,
    template: Arc<Template>,
    held: Option<Record>,
}

impl CqlConn {
    /// The Claim of a fresh key: `INSERT … IF NOT EXISTS` of the record `ledger::claim` creates.
    pub async fn claim(&mut self, key: String) -> Result<Claimed, String> {
        let t = &self.template;
        let now = now_ms();
        let id = RecordId::new(t.tenant.as_str(), t.namespace.as_str(), key);
        let record = ledger::claim(&id, None, &t.claim, now)
            .map_err(|e| format!("cql-raw: ledger: {e}"))?
            .record()
            .clone();
        // Bound as `CqlStore::insert_if_absent` binds them.
        let mut values = codec::key_values(&record.id).to_vec();
        values.extend(codec::column_values(&record, rand::random()));
        values.push(Some(CqlValue::Int(codec::ttl_secs(&record, now))));
        self.lwt(&self.statements.insert, values, "INSERT … IF NOT EXISTS")
            .await?;
        let token = record.fencing_token;
        self.held = Some(record);
        Ok(Claimed { outcome: 1, token })
    }

    /// The Complete: `UPDATE … IF version = ? AND expires_at > ?` of the record
    /// `ledger::complete` makes of the one just inserted (no read first: the raw loop knows it).
    pub async fn complete(&mut self, key: String, token: u64) -> Result<(), String> {
        let current = self
            .held
            .take()
            .filter(|r| r.id.key == key)
            .ok_or("cql-raw: Complete of a key this worker did not just insert")?;
        let now = now_ms();
        let transition = ledger::complete(Some(&current), token, &self.template.result, now)
            .map_err(|e| format!("cql-raw: ledger: {e}"))?;
        let (
            Change::Replace {
                expected_version, ..
            },
            Some(record),
        ) = (transition.change, transition.record)
        else {
            return Err("cql-raw: the ledger did not replace the record".into());
        };
        // Bound as `CqlStore::replace_if_version` binds them.
        let mut values = vec![Some(CqlValue::Int(codec::ttl_secs(&record, now)))];
        values.extend(codec::column_values(&record, rand::random()));
        values.extend(codec::key_values(&record.id));
        values.push(codec::big(expected_version));
        values.push(Some(codec::timestamp(now)));
        self.lwt(&self.statements.replace, values, "UPDATE … IF version")
            .await
    }

    /// Executes one conditional statement; fails unless it applied.
    async fn lwt(
        &self,
        statement: &PreparedStatement,
        values: Vec<codec::Value>,
        what: &str,
    ) -> Result<(), String> {
        let result = self
            .session
            .execute_unpaged(statement, &values)
            .await
            .map_err(|e| format!("cql-raw: {what}: {e}"))?;
        if applied(result).map_err(|e| format!("cql-raw: {what}: {e}"))? {
            Ok(())
        } else {
            Err(format!("cql-raw: {what} did not apply"))
        }
    }
}

/// `[applied]` of a conditional statement's answer, decoded as the store decodes it.
fn applied(result: QueryResult) -> Result<bool, String> {
    let rows = result.into_rows_result().map_err(|e| e.to_string())?;
    let row = rows
        .rows::<Row>()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("an LWT without a result row")?
        .map_err(|e| e.to_string())?;
    RowView::new(rows.column_specs(), &row)
        .applied()
        .map_err(|e| e.to_string())
}

/// Wall-clock milliseconds, as the server's clock reads them.
fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
        })
}
