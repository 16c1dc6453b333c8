//! Record ids as ordered byte keys: length-prefixed parts, so distinct ids never collide and the
//! records of one tenant, or one namespace, are one range of keys.

use super::corrupt;
use oncekey_ledger::RecordId;
use oncekey_store::StoreError;

/// Encodes (tenant, namespace, key) as length-prefixed parts, so distinct ids never collide.
pub(crate) fn encode_id(id: &RecordId) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + id.tenant.len() + id.namespace.len() + id.key.len());
    for part in [&id.tenant, &id.namespace, &id.key] {
        let len = u16::try_from(part.len()).unwrap_or(u16::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&part.as_bytes()[..usize::from(len)]);
    }
    out
}

/// Decodes what `encode_id` wrote.
pub(crate) fn decode_id(bytes: &[u8]) -> Result<RecordId, StoreError> {
    let mut parts = Vec::with_capacity(3);
    let mut rest = bytes;
    for _ in 0..3 {
        let (part, after) = split_part(rest).ok_or_else(|| corrupt("a record key is cut short"))?;
        parts.push(String::from_utf8(part.to_vec()).map_err(corrupt)?);
        rest = after;
    }
    if !rest.is_empty() {
        return Err(corrupt("a record key has bytes after its three parts"));
    }
    let key = parts.pop().unwrap_or_default();
    let namespace = parts.pop().unwrap_or_default();
    let tenant = parts.pop().unwrap_or_default();
    Ok(RecordId {
        tenant,
        namespace,
        key,
    })
}

/// The first length-prefixed part of `bytes` and what follows it.
fn split_part(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = usize::from(u16::from_be_bytes([*bytes.first()?, *bytes.get(1)?]));
    let part = bytes.get(2..2 + len)?;
    Some((part, &bytes[2 + len..]))
}

/// The prefix `encode_id` gives every id of `tenant` (and of `namespace` in it, when given): the
/// records of one tenant, or one namespace, are one range of keys.
pub(crate) fn id_prefix(tenant: &str, namespace: Option<&str>) -> Vec<u8> {
    let id = RecordId::new(tenant, namespace.unwrap_or_default(), "");
    let mut bytes = encode_id(&id);
    // Drop the empty key's length, and the namespace's when there is none.
    bytes.truncate(bytes.len() - 2);
    if namespace.is_none() {
        bytes.truncate(bytes.len() - 2);
    }
    bytes
}

/// The tenant's part of an encoded id (its length prefix included).
pub(crate) fn tenant_part(id: &[u8]) -> Result<&[u8], StoreError> {
    let (tenant, _) = split_part(id).ok_or_else(|| corrupt("a record key is cut short"))?;
    Ok(&id[..2 + tenant.len()])
}
