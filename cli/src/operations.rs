//! `oncekey approve|reject|purge`: the operator's commands, one RPC each, printing one JSON
//! document on stdout (like `claim`, `lookup`): the decided record, or what was purged. A gRPC
//! error prints `error: CODE REASON: message` on stderr, exit 1.
//!
//! `approve` and `reject` need a token with the `approve` scope, `purge` one with `admin`.

use super::client::{connect, record_json, ConnArgs};
use clap::Args;
use oncekey_api::v1;
use serde_json::{json, Value};

/// `oncekey approve` and `oncekey reject`.
#[derive(Debug, Clone, Args)]
pub struct DecideCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Operation kind.
    namespace: String,
    /// Idempotency key.
    key: String,
    /// A note kept with the decision (a rejection's error message), at most 1 KiB.
    #[arg(long, default_value = "")]
    note: String,
    /// The fingerprint (64 hex digits) of the arguments you reviewed: the decision applies only
    /// if the operation's stored fingerprint is this one (else KEY_REUSED).
    #[arg(long)]
    fingerprint: Option<String>,
}

/// `oncekey purge`
#[derive(Debug, Clone, Args)]
pub struct PurgeCmd {
    #[command(flatten)]
    conn: ConnArgs,
    /// Operation kind.
    namespace: String,
    /// Idempotency key.
    key: String,
    /// Purge an unsettled at-most-once operation too (PROCESSING or UNKNOWN): its effect may
    /// then run again.
    #[arg(long)]
    force: bool,
}

fn fingerprint(hex_fp: Option<&str>) -> anyhow::Result<Vec<u8>> {
    match hex_fp {
        None => Ok(Vec::new()),
        Some(text) => match hex::decode(text) {
            Ok(bytes) if bytes.len() == 32 => Ok(bytes),
            _ => anyhow::bail!("--fingerprint must be 64 hex digits"),
        },
    }
}

/// Runs `oncekey approve`.
pub async fn approve(cmd: DecideCmd) -> anyhow::Result<Value> {
    let request = v1::ApproveRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        fingerprint: fingerprint(cmd.fingerprint.as_deref())?,
        note: cmd.note.clone(),
    };
    let reply = connect(&cmd.conn)
        .await?
        .approve(request)
        .await?
        .into_inner();
    Ok(json!({ "record": reply.record.as_ref().map(record_json) }))
}

/// Runs `oncekey reject`.
pub async fn reject(cmd: DecideCmd) -> anyhow::Result<Value> {
    let request = v1::RejectRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        fingerprint: fingerprint(cmd.fingerprint.as_deref())?,
        note: cmd.note.clone(),
    };
    let reply = connect(&cmd.conn)
        .await?
        .reject(request)
        .await?
        .into_inner();
    Ok(json!({ "record": reply.record.as_ref().map(record_json) }))
}

/// Runs `oncekey purge`.
pub async fn purge(cmd: PurgeCmd) -> anyhow::Result<Value> {
    let request = v1::PurgeRequest {
        namespace: cmd.namespace.clone(),
        key: cmd.key.clone(),
        force: cmd.force,
    };
    connect(&cmd.conn).await?.purge(request).await?;
    Ok(json!({ "purged": true, "namespace": cmd.namespace, "key": cmd.key }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_64_hex_digits_or_absent() {
        assert!(fingerprint(None).unwrap().is_empty());
        assert_eq!(fingerprint(Some(&"ab".repeat(32))).unwrap(), vec![0xab; 32]);
        for bad in ["ab", "zz", &"ab".repeat(33)] {
            assert!(fingerprint(Some(bad)).is_err(), "{bad}");
        }
    }
}
