//! The stored form of a parent's run budget (`ledger::Budget`), shared by every store: one
//! protobuf blob (forward compatible; new fields get new tags), empty when there is none.

use crate::StoreError;
use oncekey_ledger::Budget;
use prost::Message;
use std::collections::BTreeMap;

#[derive(Clone, PartialEq, Message)]
struct StoredBudget {
    #[prost(uint32, tag = "1")]
    max_children: u32,
    #[prost(btree_map = "string, uint32", tag = "2")]
    max_per_namespace: BTreeMap<String, u32>,
    #[prost(uint32, tag = "3")]
    children: u32,
    #[prost(btree_map = "string, uint32", tag = "4")]
    children_per_namespace: BTreeMap<String, u32>,
    #[prost(uint64, tag = "5")]
    refused: u64,
    #[prost(string, repeated, tag = "6")]
    counted: Vec<String>,
}

/// Encodes a budget; `None` → empty bytes.
pub fn encode(budget: Option<&Budget>) -> Vec<u8> {
    let Some(b) = budget else {
        return Vec::new();
    };
    StoredBudget {
        max_children: b.max_children,
        max_per_namespace: b.max_per_namespace.clone(),
        children: b.children,
        children_per_namespace: b.children_per_namespace.clone(),
        refused: b.refused,
        counted: b.counted.iter().cloned().collect(),
    }
    .encode_to_vec()
}

/// Decodes what `encode` wrote (empty bytes → `None`).
pub fn decode(bytes: &[u8]) -> Result<Option<Budget>, StoreError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let s = StoredBudget::decode(bytes).map_err(|e| StoreError::Corrupt(format!("budget: {e}")))?;
    Ok(Some(Budget {
        max_children: s.max_children,
        max_per_namespace: s.max_per_namespace,
        children: s.children,
        children_per_namespace: s.children_per_namespace,
        refused: s.refused,
        counted: s.counted.into_iter().collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(decode(&encode(None)).unwrap(), None);
        let mut b = Budget::new(5, BTreeMap::from([("email.send".into(), 3)]));
        b.children = 2;
        b.children_per_namespace.insert("email.send".into(), 2);
        b.refused = 7;
        b.counted.insert("email.send k1".into());
        assert_eq!(decode(&encode(Some(&b))).unwrap(), Some(b));
        assert!(decode(b"\xff\xff").is_err());
    }
}
