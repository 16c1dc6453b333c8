//! The PostgreSQL peer: the classic idempotency-key table design, driven with the same workers
//! and keys as the server, so the comparison is like for like.
//!
//! Claim is `INSERT … ON CONFLICT (idempotency_key) DO NOTHING RETURNING`; when nothing was
//! inserted, the stored row is read and its request_hash compared (a mismatch is a reused key);
//! Complete is `UPDATE … SET status='succeeded', response=… WHERE … AND status='processing'`.
//! Every statement commits on its own with synchronous_commit on: durable before it answers, as
//! the embedded store is.

use super::claimed::Claimed;
use anyhow::Context as _;
use std::sync::Arc;
use tokio_postgres::{Client, NoTls, Statement};

const TABLE: &str = "CREATE TABLE IF NOT EXISTS oncekey_bench_idempotency (
    idempotency_key text PRIMARY KEY,
    request_hash bytea NOT NULL,
    status text NOT NULL,
    response bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
)";
const INSERT: &str = "INSERT INTO oncekey_bench_idempotency (idempotency_key, request_hash, status)
    VALUES ($1, $2, 'processing')
    ON CONFLICT (idempotency_key) DO NOTHING
    RETURNING status";
const SELECT: &str = "SELECT request_hash, status, response FROM oncekey_bench_idempotency
    WHERE idempotency_key = $1";
const UPDATE: &str = "UPDATE oncekey_bench_idempotency
    SET status = 'succeeded', response = $2, updated_at = now()
    WHERE idempotency_key = $1 AND status = 'processing'";

/// One connection with its prepared statements.
struct Session {
    client: Client,
    insert: Statement,
    select: Statement,
    update: Statement,
}

/// A fixed pool of PostgreSQL connections.
pub struct Peer {
    sessions: Vec<Arc<Session>>,
    hash: Arc<Vec<u8>>,
    body: Arc<Vec<u8>>,
}

impl Peer {
    /// Opens `pool` connections to `url`, creates the table and prepares the statements.
    pub async fn connect(url: &str, pool: usize) -> anyhow::Result<Self> {
        let mut sessions = Vec::with_capacity(pool);
        for i in 0..pool {
            let (client, connection) = tokio_postgres::connect(url, NoTls)
                .await
                .with_context(|| format!("cannot connect to the PostgreSQL peer {url}"))?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    eprintln!("postgres connection ended: {e}");
                }
            });
            client
                .batch_execute("SET synchronous_commit = on")
                .await
                .context("SET synchronous_commit")?;
            if i == 0 {
                client
                    .batch_execute(TABLE)
                    .await
                    .context("creating the table")?;
            }
            sessions.push(Arc::new(Session {
                insert: client.prepare(INSERT).await?,
                select: client.prepare(SELECT).await?,
                update: client.prepare(UPDATE).await?,
                client,
            }));
        }
        let hash = oncekey_api::fingerprint::fingerprint_json(r#"{"bench":"postgres"}"#)
            .expect("valid JSON")
            .to_vec();
        Ok(Self {
            sessions,
            hash: Arc::new(hash),
            body: Arc::new(vec![b'x'; 64]),
        })
    }

    /// Worker `i`'s connection (shared round-robin when the pool is smaller than the workers).
    pub fn worker(&self, i: usize) -> PgConn {
        PgConn {
            session: self.sessions[i % self.sessions.len()].clone(),
            hash: self.hash.clone(),
            body: self.body.clone(),
        }
    }
}

/// One worker's view of the pool.
pub struct PgConn {
    session: Arc<Session>,
    hash: Arc<Vec<u8>>,
    body: Arc<Vec<u8>>,
}

fn pg(e: tokio_postgres::Error) -> String {
    match e.code() {
        Some(code) => format!("postgres {}", code.code()),
        None => format!("postgres {e}"),
    }
}

impl PgConn {
    /// The design's claim: insert, or read the existing row and compare its request_hash.
    pub async fn claim(&mut self, key: &str) -> Result<Claimed, String> {
        let s = &self.session;
        let inserted = s
            .client
            .query_opt(&s.insert, &[&key, &self.hash.as_slice()])
            .await
            .map_err(pg)?;
        if inserted.is_some() {
            return Ok(Claimed {
                outcome: 1,
                token: 1,
            });
        }
        let row = s
            .client
            .query_opt(&s.select, &[&key])
            .await
            .map_err(pg)?
            .ok_or("postgres: the conflicting row vanished")?;
        let hash: &[u8] = row.get(0);
        if hash != self.hash.as_slice() {
            return Err("postgres: request_hash differs (key reused)".into());
        }
        let status: &str = row.get(1);
        let _response: Option<&[u8]> = row.get(2);
        Ok(Claimed {
            outcome: if status == "succeeded" { 2 } else { 4 },
            token: 0,
        })
    }

    /// The design's complete: processing → succeeded with the response.
    pub async fn complete(&mut self, key: &str) -> Result<(), String> {
        let s = &self.session;
        let n = s
            .client
            .execute(&s.update, &[&key, &self.body.as_slice()])
            .await
            .map_err(pg)?;
        if n == 1 {
            Ok(())
        } else {
            Err("postgres: the key was not processing".into())
        }
    }
}
