//! The raw-LWT target (`--cql-raw`): the two lightweight transactions the CQL store issues for a
//! `cycle`, sent through the store alone with nothing of the service around them — the
//! conditional insert a Claim of a fresh key makes (`Store::insert_if_absent`: `INSERT … IF NOT
//! EXISTS`) and the conditional replace its Complete makes (`Store::replace_if_version`: `UPDATE
//! … IF version = ? AND expires_at > ?`), each in a one-partition batch with its nonce's mark.
//!
//! Everything that decides what reaches the cluster is the store's own, through its public API:
//! `CqlStore::connect` opens the session (token-aware load balancing, QUORUM/SERIAL or LOCAL_*
//! levels, timeouts) and prepares the statements with the settings `serve --store cql` would use,
//! and the records come from the real ledger decisions (`ledger::claim` of an absent key, then
//! `ledger::complete`), with the bench's fingerprint, owner and result body and the server's
//! default lease and retention. So the raw loop writes the bytes a served cycle writes; the gap
//! between the two is what the service adds (gRPC, validation, the engine, and the QUORUM read
//! its Complete makes before the conditional write).

use super::claimed::Claimed;
use super::grpc::ARGUMENTS;
use oncekey_server::ledger::{
    self, Change, ClaimArgs, Millis, OpResult, Record, RecordId, Semantics,
};
use oncekey_server::store::cql::{CqlConfig, CqlStore};
use oncekey_server::store::{Cas, Store, StoreError};
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

/// The CQL store on one keyspace, as `serve --store cql` opens it.
pub struct RawCql {
    store: CqlStore,
    template: Arc<Template>,
}

impl RawCql {
    /// Opens the store as `oncekey serve --store cql` with `cql` would (which checks that the
    /// keyspace is migrated and prepares the statements).
    pub async fn connect(
        cql: &CqlConfig,
        tenant: &str,
        namespace: &str,
        body_bytes: usize,
    ) -> anyhow::Result<Self> {
        let store = CqlStore::connect(cql)
            .await
            .map_err(|e| anyhow::anyhow!("--cql-raw: {e}"))?;
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
                budget: None,
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
            store,
            template: Arc::new(template),
        })
    }

    /// One worker's handle; every worker shares the one session, as the server's requests do.
    pub fn worker(&self) -> CqlConn {
        CqlConn {
            store: self.store.clone(),
            template: self.template.clone(),
            held: None,
        }
    }
}

/// One worker: the record its last insert created, for the replace that follows.
pub struct CqlConn {
    store: CqlStore,
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
        applied(
            self.store.insert_if_absent(&record, now).await,
            "INSERT … IF NOT EXISTS",
        )?;
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
                expected_version,
                durable,
            },
            Some(record),
        ) = (transition.change, transition.record)
        else {
            return Err("cql-raw: the ledger did not replace the record".into());
        };
        applied(
            self.store
                .replace_if_version(&record, expected_version, durable, now)
                .await,
            "UPDATE … IF version",
        )
    }
}

/// `Ok` when the conditional write applied.
fn applied(written: Result<Cas, StoreError>, what: &str) -> Result<(), String> {
    match written {
        Ok(Cas::Applied) => Ok(()),
        Ok(Cas::Conflict(_)) => Err(format!("cql-raw: {what} did not apply")),
        Err(e) => Err(format!("cql-raw: {what}: {e}")),
    }
}

/// Wall-clock milliseconds, as the server's clock reads them.
fn now_ms() -> Millis {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX)
        })
}
