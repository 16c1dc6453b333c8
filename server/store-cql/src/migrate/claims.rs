//! The claims on `schema_migrations` that let one migrator at a time apply a version: claiming,
//! taking over a stale claim, recording the version applied, and the patient statements they
//! are made of (see `super`).

use super::*;

/// Claims, runs and records one migration; `Ok(false)` when someone else applied it.
pub(super) async fn apply_one(
    session: &Session,
    ks: &str,
    m: &Migration,
    owner: &str,
) -> Result<bool, MigrateError> {
    let checksum = checksum(m.text);
    let claim = lwt(
        session,
        &format!(
            "INSERT INTO {ks}.schema_migrations (version, name, checksum, owner, started_at) \
             VALUES (?, ?, ?, ?, ?) IF NOT EXISTS"
        ),
        vec![
            Some(CqlValue::Int(m.version)),
            Some(CqlValue::Text(m.name.into())),
            Some(CqlValue::Text(checksum.clone())),
            Some(CqlValue::Text(owner.into())),
            Some(now()),
        ],
    )
    .await?;
    if claim {
        run_file(session, ks, m).await?;
        return finish(session, ks, m, owner).await.map(|_| true);
    }
    loop {
        let state = claim_state(session, ks, m.version).await?;
        if !state.applied && state.owner == owner {
            // An earlier copy of this migrator's claim (or takeover), re-proposed after an
            // unknown outcome, is what applied.
            run_file(session, ks, m).await?;
            return finish(session, ks, m, owner).await.map(|_| true);
        }
        if state.applied {
            if state.checksum != checksum {
                return Err(MigrateError::Changed {
                    name: m.name.into(),
                    stored: state.checksum,
                    embedded: checksum,
                });
            }
            return Ok(false);
        }
        if state.age > STALE_CLAIM {
            let taken = lwt(
                session,
                &format!(
                    "UPDATE {ks}.schema_migrations SET owner = ?, started_at = ?, checksum = ? \
                     WHERE version = ? IF owner = ?"
                ),
                vec![
                    Some(CqlValue::Text(owner.into())),
                    Some(now()),
                    Some(CqlValue::Text(checksum.clone())),
                    Some(CqlValue::Int(m.version)),
                    Some(CqlValue::Text(state.owner.clone())),
                ],
            )
            .await?;
            if taken {
                tracing::warn!(migration = m.name, stale_owner = %state.owner, "took over a stale migration claim");
                run_file(session, ks, m).await?;
                return finish(session, ks, m, owner).await.map(|_| true);
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Marks a migration applied, if this migrator still holds its claim.
async fn finish(
    session: &Session,
    ks: &str,
    m: &Migration,
    owner: &str,
) -> Result<(), MigrateError> {
    let done = lwt(
        session,
        &format!("UPDATE {ks}.schema_migrations SET applied_at = ? WHERE version = ? IF owner = ?"),
        vec![
            Some(now()),
            Some(CqlValue::Int(m.version)),
            Some(CqlValue::Text(owner.into())),
        ],
    )
    .await?;
    if !done && !claim_state(session, ks, m.version).await?.applied {
        // Taken over while running: the new holder re-runs the (idempotent) file and records it.
        tracing::warn!(
            migration = m.name,
            "claim taken over while running; the new holder records it"
        );
    }
    Ok(())
}

struct ClaimState {
    owner: String,
    checksum: String,
    applied: bool,
    age: Duration,
}

async fn claim_state(
    session: &Session,
    ks: &str,
    version: i32,
) -> Result<ClaimState, MigrateError> {
    let mut statement = Statement::new(format!(
        "SELECT owner, checksum, started_at, applied_at FROM {ks}.schema_migrations \
             WHERE version = ?"
    ));
    statement.set_consistency(Consistency::Serial);
    let result = patiently(session, &statement, vec![Some(CqlValue::Int(version))])
        .await
        .map_err(cql("reading schema_migrations"))?;
    let found = all_rows(result)?;
    let row = found
        .first()
        .ok_or_else(|| MigrateError::Cql(format!("the claim of migration {version} vanished")))?;
    let text = |i: usize| match row.columns.get(i) {
        Some(Some(CqlValue::Text(s))) => s.clone(),
        _ => String::new(),
    };
    let started = match row.columns.get(2) {
        Some(Some(CqlValue::Timestamp(CqlTimestamp(ms)))) => *ms,
        _ => 0,
    };
    let now_ms = now_millis();
    Ok(ClaimState {
        owner: text(0),
        checksum: text(1),
        applied: matches!(row.columns.get(3), Some(Some(_))),
        age: Duration::from_millis(u64::try_from(now_ms - started).unwrap_or(0)),
    })
}

/// Runs a statement on the bookkeeping table, proposing it again, identically, while its outcome
/// is unknown (a Paxos round timed out on a busy cluster, a connection broke): every one of
/// them is safe to repeat, and a caller that finds its condition failed reads the row to tell
/// whether an earlier copy applied (the row then names this migrator as its owner).
async fn patiently(
    session: &Session,
    statement: &Statement,
    values: Vec<Option<CqlValue>>,
) -> Result<scylla::response::query_result::QueryResult, scylla::errors::ExecutionError> {
    let mut attempt = 1;
    loop {
        match session
            .query_unpaged(statement.clone(), values.clone())
            .await
        {
            Err(e) if attempt < ATTEMPTS && !matches!(classify(&e), Failure::Refused(_)) => {
                tracing::warn!(error = %e, attempt, "schema_migrations: outcome unknown; trying again");
                tokio::time::sleep(POLL * attempt).await;
                attempt += 1;
            }
            answer => return answer,
        }
    }
}

/// Runs a conditional statement; returns `[applied]`.
async fn lwt(
    session: &Session,
    text: &str,
    values: Vec<Option<CqlValue>>,
) -> Result<bool, MigrateError> {
    let result = patiently(session, &Statement::new(text), values)
        .await
        .map_err(cql("schema_migrations"))?;
    let rows = result
        .into_rows_result()
        .map_err(|e| MigrateError::Cql(format!("schema_migrations: {e}")))?;
    let (index, _) = rows
        .column_specs()
        .get_by_name("[applied]")
        .ok_or_else(|| MigrateError::Cql("conditional statement without [applied]".into()))?;
    let first = rows
        .rows::<Row>()
        .map_err(|e| MigrateError::Cql(e.to_string()))?
        .next()
        .transpose()
        .map_err(|e| MigrateError::Cql(e.to_string()))?;
    Ok(matches!(
        first.and_then(|r| r.columns.into_iter().nth(index).flatten()),
        Some(CqlValue::Boolean(true))
    ))
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn now() -> CqlValue {
    CqlValue::Timestamp(CqlTimestamp(now_millis()))
}
