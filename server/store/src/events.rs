//! The stored form of a record's receipt history, shared by every store: one protobuf blob
//! (forward compatible; new fields get new tags).

use crate::StoreError;
use oncekey_ledger::{Event, EventKind};
use prost::Message;

#[derive(Clone, PartialEq, Message)]
struct StoredHistory {
    #[prost(message, repeated, tag = "1")]
    events: Vec<StoredEvent>,
}

#[derive(Clone, PartialEq, Message)]
struct StoredEvent {
    #[prost(int64, tag = "1")]
    at: i64,
    #[prost(int32, tag = "2")]
    kind: i32,
    #[prost(string, tag = "3")]
    outcome: String,
    #[prost(uint32, tag = "4")]
    attempt: u32,
    #[prost(uint64, tag = "5")]
    fencing_token: u64,
    #[prost(string, tag = "6")]
    owner: String,
    #[prost(string, tag = "7")]
    reason: String,
}

fn kind_code(kind: EventKind) -> i32 {
    match kind {
        EventKind::Claim => 1,
        EventKind::Takeover => 2,
        EventKind::Complete => 3,
        EventKind::Fail => 4,
        EventKind::Renew => 5,
        EventKind::Approve => 6,
        EventKind::Reject => 7,
    }
}

fn kind_from(code: i32) -> Result<EventKind, StoreError> {
    Ok(match code {
        1 => EventKind::Claim,
        2 => EventKind::Takeover,
        3 => EventKind::Complete,
        4 => EventKind::Fail,
        5 => EventKind::Renew,
        6 => EventKind::Approve,
        7 => EventKind::Reject,
        other => return Err(StoreError::Corrupt(format!("unknown event kind {other}"))),
    })
}

/// Encodes a history (empty history → empty bytes).
pub fn encode(history: &[Event]) -> Vec<u8> {
    StoredHistory {
        events: history
            .iter()
            .map(|e| StoredEvent {
                at: e.at,
                kind: kind_code(e.kind),
                outcome: e.outcome.clone(),
                attempt: e.attempt,
                fencing_token: e.fencing_token,
                owner: e.owner.clone(),
                reason: e.reason.clone(),
            })
            .collect(),
    }
    .encode_to_vec()
}

/// Decodes what `encode` wrote.
pub fn decode(bytes: &[u8]) -> Result<Vec<Event>, StoreError> {
    let stored =
        StoredHistory::decode(bytes).map_err(|e| StoreError::Corrupt(format!("history: {e}")))?;
    stored
        .events
        .into_iter()
        .map(|e| {
            Ok(Event {
                at: e.at,
                kind: kind_from(e.kind)?,
                outcome: e.outcome,
                attempt: e.attempt,
                fencing_token: e.fencing_token,
                owner: e.owner,
                reason: e.reason,
            })
        })
        .collect()
}
