//! Decoding a returned row of the `records` table by column name (see `super`): the record, the
//! write nonces that settle a conditional write's answer, and `[applied]`.

use super::*;

/// One returned row, read by column name.
pub(crate) struct RowView<'a> {
    specs: ColumnSpecs<'a, 'a>,
    row: &'a Row,
}

impl<'a> RowView<'a> {
    /// Wraps a row with the column specs of its result.
    pub(crate) fn new(specs: ColumnSpecs<'a, 'a>, row: &'a Row) -> Self {
        Self { specs, row }
    }

    /// Whether the result carries column `name` at all (Cassandra omits columns on some failed
    /// conditions).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.specs.get_by_name(name).is_some()
    }

    /// The value of column `name`, `None` when absent from the result or null.
    pub(crate) fn get(&self, name: &str) -> Option<&'a CqlValue> {
        let (index, _) = self.specs.get_by_name(name)?;
        self.row.columns.get(index)?.as_ref()
    }

    /// `[applied]` of a conditional statement.
    pub(crate) fn applied(&self) -> Result<bool, StoreError> {
        match self.get("[applied]") {
            Some(CqlValue::Boolean(b)) => Ok(*b),
            other => Err(corrupt("[applied]", other)),
        }
    }

    /// The stored version; `None` for a row whose cells all expired (only its row marker is left).
    pub(crate) fn version(&self) -> Result<Option<u64>, StoreError> {
        self.get("version")
            .map(|v| u64_of("version", v))
            .transpose()
    }

    /// The stored write nonce, if any.
    pub(crate) fn write_id(&self) -> Option<&'a [u8]> {
        match self.get("write_id") {
            Some(CqlValue::Blob(b)) => Some(b),
            _ => None,
        }
    }

    /// The nonces of the latest writes the row took (`WRITE_MARKS`).
    pub(crate) fn write_marks(&self) -> Vec<[u8; 16]> {
        match self.get(WRITE_MARKS) {
            Some(CqlValue::Map(slots)) => slots
                .iter()
                .filter_map(|(_, nonce)| match nonce {
                    CqlValue::Blob(b) => <[u8; 16]>::try_from(b.as_slice()).ok(),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether every record column is present (a full row rather than just condition columns).
    pub(crate) fn is_full(&self) -> bool {
        COLUMNS.iter().all(|c| self.has(c))
    }

    /// Decodes the record of `id`; `None` when the row holds no record: its cells expired, or
    /// are expiring. TTLs count whole seconds, so the cells of two writes expire up to a second
    /// apart after `expires_at`; a dedup hit's write sets only `HIT_COLUMNS`, so for that second
    /// a row may keep `version` and lose every other column (which the full writes set together,
    /// `expires_at` among them), or the other way round.
    pub(crate) fn record(&self, id: &RecordId) -> Result<Option<Record>, StoreError> {
        let (Some(version), Some(expires_at)) = (self.version()?, self.timestamp("expires_at")?)
        else {
            return Ok(None);
        };
        let status = match self.text_req("status")? {
            "PROCESSING" => Status::Processing,
            "SUCCEEDED" => Status::Succeeded,
            "FAILED" => Status::Failed,
            "RETRY" => Status::Retry,
            "UNKNOWN" => Status::Unknown,
            "ABANDONED" => Status::Abandoned,
            "AWAITING_APPROVAL" => Status::AwaitingApproval,
            "APPROVED" => Status::Approved,
            "PURGED" => Status::Purged,
            other => return Err(StoreError::Corrupt(format!("unknown status {other:?}"))),
        };
        let semantics = match self.text_req("semantics")? {
            "AT_LEAST_ONCE" => Semantics::AtLeastOnce,
            "AT_MOST_ONCE" => Semantics::AtMostOnce,
            other => return Err(StoreError::Corrupt(format!("unknown semantics {other:?}"))),
        };
        let fingerprint = self
            .blob("fingerprint")
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| StoreError::Corrupt("fingerprint is not 32 bytes".into()))?;
        let result = match self.get("result_code") {
            None => None,
            Some(code) => Some(OpResult {
                code: i32_of("result_code", code)?,
                body: self.blob("result_body").unwrap_or_default().to_vec(),
                content_type: self.text("result_content_type")?.unwrap_or_default().into(),
                metadata: self.metadata("result_metadata")?,
            }),
        };
        let error = match self.get("error_code") {
            None => None,
            Some(code) => Some(OpError {
                code: i32_of("error_code", code)?,
                message: self.text("error_message")?.unwrap_or_default().into(),
                details: self.blob("error_details").unwrap_or_default().to_vec(),
            }),
        };
        Ok(Some(Record {
            id: id.clone(),
            status,
            fingerprint,
            semantics,
            fencing_token: self.u64_req("fencing_token")?,
            attempt: u32::try_from(self.u64_req("attempt")?)
                .map_err(|_| StoreError::Corrupt("attempt out of range".into()))?,
            dedup_hits: self.u64_req("dedup_hits")?,
            lease_owner: self.text("lease_owner")?.unwrap_or_default().into(),
            lease_expires_at: self.timestamp("lease_expires_at")?,
            result,
            error,
            parent: self.parent()?,
            created_at: self.timestamp_req("created_at")?,
            updated_at: self.timestamp_req("updated_at")?,
            expires_at: (expires_at != NEVER).then_some(expires_at),
            retention: match self.get("retention_ms") {
                Some(CqlValue::BigInt(n)) => *n,
                other => return Err(corrupt("retention_ms", other)),
            },
            version,
            history: match self.get("history") {
                Some(CqlValue::Blob(bytes)) => oncekey_store::events::decode(bytes)?,
                None => Vec::new(),
                other => return Err(corrupt("history", other)),
            },
            // Rows written before migration 0002 hold nulls here: no gate, no cap.
            require_approval: match self.get("require_approval") {
                None => false,
                Some(CqlValue::Boolean(b)) => *b,
                other => return Err(corrupt("require_approval", other)),
            },
            max_attempts: self.u32_or_zero("max_attempts")?,
            reconciliations: self.u32_or_zero("reconciliations")?,
            approval: self.approval()?,
            kept_until: self.timestamp("kept_until")?,
            // Rows written before migration 0005 hold null here: no budget.
            budget: match self.get("budget") {
                None => None,
                Some(CqlValue::Blob(bytes)) => oncekey_store::budget::decode(bytes)?,
                other => return Err(corrupt("budget", other)),
            },
        }))
    }

    fn u32_or_zero(&self, name: &str) -> Result<u32, StoreError> {
        match self.get(name) {
            None => Ok(0),
            Some(value) => u32::try_from(u64_of(name, value)?)
                .map_err(|_| StoreError::Corrupt(format!("{name} out of range"))),
        }
    }

    fn approval(&self) -> Result<Option<Approval>, StoreError> {
        let Some(decision) = self.text("approval_decision")? else {
            return Ok(None);
        };
        let decision = match decision {
            "APPROVED" => Decision::Approved,
            "REJECTED" => Decision::Rejected,
            other => return Err(StoreError::Corrupt(format!("unknown decision {other:?}"))),
        };
        Ok(Some(Approval {
            decision,
            decided_by: self.text("approval_decided_by")?.unwrap_or_default().into(),
            note: self.text("approval_note")?.unwrap_or_default().into(),
            decided_at: self.timestamp_req("approval_decided_at")?,
        }))
    }

    fn text(&self, name: &str) -> Result<Option<&'a str>, StoreError> {
        match self.get(name) {
            None => Ok(None),
            Some(CqlValue::Text(s) | CqlValue::Ascii(s)) => Ok(Some(s)),
            other => Err(corrupt(name, other)),
        }
    }

    fn text_req(&self, name: &str) -> Result<&'a str, StoreError> {
        self.text(name)?.ok_or_else(|| corrupt(name, None))
    }

    fn blob(&self, name: &str) -> Option<&'a [u8]> {
        match self.get(name) {
            Some(CqlValue::Blob(b)) => Some(b),
            _ => None,
        }
    }

    fn u64_req(&self, name: &str) -> Result<u64, StoreError> {
        u64_of(name, self.get(name).ok_or_else(|| corrupt(name, None))?)
    }

    fn timestamp(&self, name: &str) -> Result<Option<Millis>, StoreError> {
        match self.get(name) {
            None => Ok(None),
            Some(CqlValue::Timestamp(CqlTimestamp(ms))) => Ok(Some(*ms)),
            other => Err(corrupt(name, other)),
        }
    }

    fn timestamp_req(&self, name: &str) -> Result<Millis, StoreError> {
        self.timestamp(name)?.ok_or_else(|| corrupt(name, None))
    }

    fn metadata(&self, name: &str) -> Result<BTreeMap<String, String>, StoreError> {
        match self.get(name) {
            None => Ok(BTreeMap::new()),
            Some(CqlValue::Map(pairs)) => pairs
                .iter()
                .map(|pair| match pair {
                    (CqlValue::Text(k), CqlValue::Text(v)) => Ok((k.clone(), v.clone())),
                    _ => Err(StoreError::Corrupt(format!(
                        "{name} holds a non-text entry"
                    ))),
                })
                .collect(),
            other => Err(corrupt(name, other)),
        }
    }

    fn parent(&self) -> Result<Option<ParentRef>, StoreError> {
        match self.get("parent") {
            None => Ok(None),
            Some(CqlValue::Tuple(parts)) => match parts.as_slice() {
                [Some(CqlValue::Text(namespace)), Some(CqlValue::Text(key))] => {
                    Ok(Some(ParentRef {
                        namespace: namespace.clone(),
                        key: key.clone(),
                    }))
                }
                _ => Err(StoreError::Corrupt("parent is not (text, text)".into())),
            },
            other => Err(corrupt("parent", other)),
        }
    }
}

fn u64_of(name: &str, value: &CqlValue) -> Result<u64, StoreError> {
    match value {
        CqlValue::BigInt(n) => u64::try_from(*n).map_err(|_| corrupt(name, Some(value))),
        other => Err(corrupt(name, Some(other))),
    }
}

fn i32_of(name: &str, value: &CqlValue) -> Result<i32, StoreError> {
    match value {
        CqlValue::Int(n) => Ok(*n),
        other => Err(corrupt(name, Some(other))),
    }
}

/// Names the column and the kind of value found, never the value (it may be a stored body).
fn corrupt(name: &str, found: Option<&CqlValue>) -> StoreError {
    let kind = match found {
        None => "null".to_owned(),
        Some(v) => format!("{:?}", std::mem::discriminant(v)),
    };
    StoreError::Corrupt(format!("column {name}: unexpected {kind}"))
}
