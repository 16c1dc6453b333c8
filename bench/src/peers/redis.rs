//! The "idempotency keys in Redis" design, done correctly: one hash per key holding the request's
//! fingerprint, the state, a fencing-token counter, the lease deadline and the stored result; the
//! Claim and the Complete are Lua scripts, loaded once (SCRIPT LOAD) and run with EVALSHA, so each
//! is one atomic step on the server. What makes it correct where the common sketches are not:
//! - the fingerprint is compared on every Claim, so a reused key with another request is refused;
//! - the lease is a deadline inside the hash, read against the server's clock (TIME), not the
//!   key's TTL: a key whose TTL ran out would be claimed afresh with token 1 again, and the old
//!   holder's token 1 would still be accepted. An expired lease is taken over with token + 1
//!   (HINCRBY), so the old holder's Complete is refused;
//! - the key's TTL (PEXPIRE) is the retention, set on each write;
//! - a Complete must present the current token; the same Complete again is accepted, another
//!   result is refused.
//!
//! Durability comes from the server's `appendonly yes` + `appendfsync always` (scripts/redis):
//! the script's writes reach the fsynced append-only file before the reply is sent.

use super::resp::{text, Resp, RespError};
use super::{authority, Claim, Design, Refusal};
use anyhow::Context as _;
use bytes::Bytes;
use redis_protocol::resp2::types::BytesFrame;
use std::sync::Arc;
use tokio::sync::Mutex;

/// Claim. KEYS[1]: the record; ARGV: fingerprint, lease in ms, retention in ms.
/// Replies {'ACQUIRED', token}, {'COMPLETED', code, body}, {'IN_PROGRESS'} or the error
/// KEY_REUSED.
pub const CLAIM: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease_end = string.format('%.0f', now + tonumber(ARGV[2]))
local r = redis.call('HMGET', KEYS[1], 'fp', 'state', 'token', 'lease', 'code', 'body')
if not r[1] then
  redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'state', 'processing', 'token', '1', 'lease', lease_end)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'ACQUIRED', 1}
end
if r[1] ~= ARGV[1] then
  return redis.error_reply('KEY_REUSED the key holds another request')
end
if r[2] == 'succeeded' then
  return {'COMPLETED', tonumber(r[5]), r[6]}
end
if tonumber(r[4]) > now then
  return {'IN_PROGRESS'}
end
local token = redis.call('HINCRBY', KEYS[1], 'token', 1)
redis.call('HSET', KEYS[1], 'lease', lease_end)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'ACQUIRED', token}
"#;

/// Complete. KEYS[1]: the record; ARGV: token, code, body, retention in ms.
/// Replies OK, or the errors LEASE_LOST and ALREADY_SETTLED.
pub const COMPLETE: &str = r#"
local r = redis.call('HMGET', KEYS[1], 'state', 'token', 'code', 'body')
if not r[1] or r[2] ~= ARGV[1] then
  return redis.error_reply('LEASE_LOST the token is not the current one of the key')
end
if r[1] == 'succeeded' then
  if r[3] == ARGV[2] and r[4] == ARGV[3] then
    return 'OK'
  end
  return redis.error_reply('ALREADY_SETTLED the key was completed with another result')
end
redis.call('HSET', KEYS[1], 'state', 'succeeded', 'code', ARGV[2], 'body', ARGV[3])
redis.call('HDEL', KEYS[1], 'lease')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 'OK'
"#;

/// The two scripts' SHA-1 digests, as SCRIPT LOAD returned them.
struct Scripts {
    claim: String,
    complete: String,
}

/// What every connection shares.
struct Shared {
    design: Design,
    scripts: Scripts,
    lease_ms: String,
    retention_ms: String,
    code: String,
}

/// A fixed pool of Redis connections running the design.
pub struct RedisPeer {
    conns: Vec<Arc<Mutex<Resp>>>,
    shared: Arc<Shared>,
    addr: String,
}

impl RedisPeer {
    /// Opens `pool` connections to `redis://HOST:PORT` and loads the scripts.
    pub async fn connect(url: &str, pool: usize, design: Design) -> anyhow::Result<Self> {
        let addr = authority(url, "redis").map_err(anyhow::Error::msg)?;
        let mut conns = Vec::with_capacity(pool);
        for _ in 0..pool {
            let conn = Resp::connect(addr)
                .await
                .with_context(|| format!("cannot connect to the Redis peer {url}"))?;
            conns.push(Arc::new(Mutex::new(conn)));
        }
        let mut first = conns
            .first()
            .context("--peer-pool must be positive")?
            .lock()
            .await;
        let scripts = Scripts {
            claim: load(&mut first, CLAIM).await?,
            complete: load(&mut first, COMPLETE).await?,
        };
        drop(first);
        let ms = |d: std::time::Duration| d.as_millis().to_string();
        let shared = Shared {
            lease_ms: ms(design.lease),
            retention_ms: ms(design.retention),
            code: design.code.to_string(),
            design,
            scripts,
        };
        Ok(Self {
            conns,
            shared: Arc::new(shared),
            addr: addr.to_owned(),
        })
    }

    /// Worker `i`'s connection (shared round-robin when the pool is smaller than the workers).
    pub fn worker(&self, i: usize) -> RedisConn {
        RedisConn {
            conn: self.conns[i % self.conns.len()].clone(),
            shared: self.shared.clone(),
        }
    }

    /// `HOST:PORT` of the server (for its CPU time).
    pub fn addr(&self) -> &str {
        &self.addr
    }
}

async fn load(conn: &mut Resp, script: &str) -> anyhow::Result<String> {
    let reply = conn
        .call(&[b"SCRIPT", b"LOAD", script.as_bytes()])
        .await
        .map_err(|e| anyhow::anyhow!("SCRIPT LOAD: {}", describe(e)))?;
    text(&reply)
        .map(str::to_owned)
        .context("SCRIPT LOAD answered no digest")
}

fn describe(e: RespError) -> String {
    match e {
        RespError::Io(m) => format!("redis: {m}"),
        RespError::Server(m) => format!("redis: {m}"),
    }
}

/// A Redis error reply as the design's refusal (its first word is the code).
fn refusal(e: RespError) -> Refusal {
    match e {
        RespError::Server(m) if m.starts_with("KEY_REUSED") => Refusal::KeyReused,
        RespError::Server(m) if m.starts_with("LEASE_LOST") => Refusal::LeaseLost,
        RespError::Server(m) if m.starts_with("ALREADY_SETTLED") => Refusal::AlreadySettled,
        other => Refusal::Failed(describe(other)),
    }
}

/// One worker's connection.
pub struct RedisConn {
    conn: Arc<Mutex<Resp>>,
    shared: Arc<Shared>,
}

impl RedisConn {
    /// EVALSHA of `script` on one key; reloads the script once if the server lost it (NOSCRIPT,
    /// e.g. after a restart or SCRIPT FLUSH).
    async fn eval(
        &self,
        script: (&str, &str),
        key: &str,
        args: &[&[u8]],
    ) -> Result<BytesFrame, Refusal> {
        let mut conn = self.conn.lock().await;
        let (sha, source) = script;
        let mut command: Vec<&[u8]> = vec![b"EVALSHA", sha.as_bytes(), b"1", key.as_bytes()];
        command.extend_from_slice(args);
        match conn.call(&command).await {
            Err(RespError::Server(m)) if m.starts_with("NOSCRIPT") => {
                load(&mut conn, source)
                    .await
                    .map_err(|e| Refusal::Failed(e.to_string()))?;
                conn.call(&command).await.map_err(refusal)
            }
            other => other.map_err(refusal),
        }
    }

    /// The result body this connection stores (what a replay must return).
    pub fn body(&self) -> &[u8] {
        &self.shared.design.body
    }

    /// The design's Claim of `key`.
    pub async fn claim(&mut self, key: &str) -> Result<Claim, Refusal> {
        let s = &self.shared;
        let reply = self
            .eval(
                (&s.scripts.claim, CLAIM),
                &s.design.key(key),
                &[
                    &s.design.fingerprint,
                    s.lease_ms.as_bytes(),
                    s.retention_ms.as_bytes(),
                ],
            )
            .await?;
        parse_claim(reply)
    }

    /// The design's Complete of `key` with the lease's `token`, storing the run's result.
    pub async fn complete(&mut self, key: &str, token: u64) -> Result<(), Refusal> {
        let s = &self.shared;
        let token = token.to_string();
        self.eval(
            (&s.scripts.complete, COMPLETE),
            &s.design.key(key),
            &[
                token.as_bytes(),
                s.code.as_bytes(),
                &s.design.body,
                s.retention_ms.as_bytes(),
            ],
        )
        .await
        .map(|_| ())
    }
}

fn parse_claim(reply: BytesFrame) -> Result<Claim, Refusal> {
    let bad = || Refusal::Failed("redis: unexpected Claim reply".into());
    let BytesFrame::Array(items) = reply else {
        return Err(bad());
    };
    let int = |i: usize| match items.get(i) {
        Some(BytesFrame::Integer(n)) => u64::try_from(*n).ok(),
        _ => None,
    };
    match items.first().and_then(text) {
        Some("ACQUIRED") => Ok(Claim::Acquired {
            token: int(1).ok_or_else(bad)?,
        }),
        Some("COMPLETED") => {
            let code = int(1).and_then(|c| u32::try_from(c).ok()).ok_or_else(bad)?;
            let body = match items.get(2) {
                Some(BytesFrame::BulkString(b)) => b.clone(),
                _ => Bytes::new(),
            };
            Ok(Claim::Completed { code, body })
        }
        Some("IN_PROGRESS") => Ok(Claim::InProgress),
        _ => Err(bad()),
    }
}

/// The Redis server's CPU seconds so far (`used_cpu_sys` + `used_cpu_user` of INFO cpu), or
/// `None` when it cannot be read in a second.
pub async fn cpu_seconds(addr: &str) -> Option<f64> {
    let read = async {
        let mut conn = Resp::connect(addr).await.ok()?;
        let reply = conn.call(&[b"INFO", b"cpu"]).await.ok()?;
        parse_cpu(text(&reply)?)
    };
    tokio::time::timeout(std::time::Duration::from_secs(1), read)
        .await
        .ok()?
}

fn parse_cpu(info: &str) -> Option<f64> {
    let field = |name: &str| -> Option<f64> {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(field("used_cpu_sys")? + field("used_cpu_user")?)
}

#[cfg(test)]
mod tests;
