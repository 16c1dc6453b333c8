//! `Store::scan` on the CQL store: every tenant's record ids, partition after partition in token
//! order (the partitioner's; Murmur3 on Cassandra and ScyllaDB), one range query a page at the
//! level of the store's other reads. The cursor is the token of the last row read, 8 bytes
//! big-endian: the next page reads the tokens above it.
//!
//! Rows are read without their record, so an expired record whose row has not gone yet (row
//! TTLs count whole seconds) may be met; `reseal` answers `Gone` for it.

use super::{errors, CqlStore};
use oncekey_ledger::RecordId;
use oncekey_store::{ScanPage, StoreError};
use scylla::value::CqlValue;

/// The first token of a scan: the lowest there is, read with `>=` (a `>` would skip a row whose
/// token is exactly it).
const FIRST: i64 = i64::MIN;

/// The cursor after the row of `token`.
fn cursor(token: i64) -> Vec<u8> {
    token.to_be_bytes().to_vec()
}

/// The token a cursor names.
fn token(cursor: &[u8]) -> Result<i64, StoreError> {
    let bytes = <[u8; 8]>::try_from(cursor)
        .map_err(|_| StoreError::Corrupt("a scan cursor this store did not make".into()))?;
    Ok(i64::from_be_bytes(bytes))
}

impl CqlStore {
    /// `Store::scan`: up to `limit` ids after the token `after` names (from the first token
    /// without one). A page that came back full has a next one (it may turn out empty).
    ///
    /// Two partitions may share a token: should a page end between them, the next page, which
    /// reads the tokens above the last one, would skip the second. With 64-bit Murmur3 tokens
    /// that takes a collision among the table's keys falling exactly on a page boundary:
    /// astronomically unlikely, and a record it skips is only left to the next scan.
    pub(super) async fn scan_ids(
        &self,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<ScanPage, StoreError> {
        let (statement, from) = match after {
            Some(cursor) => (&self.statements.scan_after, token(cursor)?),
            None => (&self.statements.scan_from, FIRST),
        };
        let want = i32::try_from(limit.max(1)).unwrap_or(i32::MAX);
        let values = vec![Some(CqlValue::BigInt(from)), Some(CqlValue::Int(want))];
        let result = self
            .session()
            .execute_unpaged(statement, values)
            .await
            .map_err(|e| errors::classify(&e).into_store_error())?;
        let rows = result
            .into_rows_result()
            .map_err(|e| StoreError::Internal(format!("expected rows: {e}")))?;
        let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(e.to_string());
        let mut page = ScanPage::default();
        let mut last = None;
        for row in rows
            .rows::<(String, String, String, i64)>()
            .map_err(|e| corrupt(&e))?
        {
            let (tenant, namespace, key, token) = row.map_err(|e| corrupt(&e))?;
            page.ids.push(RecordId::new(tenant, namespace, key));
            last = Some(token);
        }
        if page.ids.len() >= limit {
            page.next = last.map(cursor);
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_the_last_token_big_endian() {
        for t in [i64::MIN, -1, 0, 42, i64::MAX] {
            assert_eq!(token(&cursor(t)).unwrap(), t);
        }
        assert_eq!(cursor(1), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert!(token(b"short").is_err());
        assert!(token(&[0; 9]).is_err());
    }
}
