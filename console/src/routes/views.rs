//! The pages: Needs attention (and its live refresh), Records, a record.

use super::{html, with_cookie, App, Shared};
use crate::ledger::CallError;
use crate::pages::{self, attention::Attention, duplicates, record, records::Filter};
use crate::session::{self, Session};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode};
use oncekey_api::v1;
use serde::Deserialize;

/// How many records each Needs attention list reads at most.
const ATTENTION_LIMIT: usize = 1000;
/// Children listed on a record's page.
const CHILDREN_LIMIT: usize = 200;

async fn read_attention(app: &App, session: &Session) -> Result<Attention, CallError> {
    let list = |status: v1::RecordStatus| v1::ListRecordsRequest {
        statuses: vec![status as i32],
        ..Default::default()
    };
    let records = async {
        tokio::try_join!(
            app.ledger
                .list_up_to(session, list(v1::RecordStatus::Unknown), ATTENTION_LIMIT),
            app.ledger
                .list_up_to(session, list(v1::RecordStatus::Processing), ATTENTION_LIMIT),
            app.ledger.list_up_to(
                session,
                list(v1::RecordStatus::AwaitingApproval),
                ATTENTION_LIMIT
            ),
        )
    };
    let intents = app.ledger.duplicate_intents(session, duplicates::PAGE_SIZE);
    let (records, intents) = tokio::join!(records, intents);
    let (unknown, processing, awaiting) = records?;
    // The duplicates are shown where they failed, unless the session itself did.
    let duplicates = match intents {
        Err(e) if e.code == tonic::Code::Unauthenticated => return Err(e),
        other => other.map(Into::into).map_err(|e| e.to_string()),
    };
    let now = session::now();
    Ok(Attention {
        truncated: unknown.1 || processing.1 || awaiting.1,
        unknown: unknown.0,
        awaiting: awaiting.0,
        duplicates,
        lapsed: processing
            .0
            .into_iter()
            .filter(|r| crate::render::lapsed(r, std::time::SystemTime::now()))
            .collect(),
        now,
    }
    .sorted())
}

pub(super) async fn home(State(app): Shared, headers: HeaderMap) -> Response {
    let (session, cookie) = match app.viewer(&headers) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let response = match read_attention(&app, &session).await {
        Ok(a) => html(
            StatusCode::OK,
            pages::attention::page(&session, &a, app.args.refresh.as_millis()),
        ),
        Err(e) => app.failed(Some(&session), &e, None),
    };
    with_cookie(response, cookie)
}

/// The live refresh: the lists alone; 401 once the session ended (the script says so). Does
/// not move the idle clock.
pub(super) async fn attention_fragment(State(app): Shared, headers: HeaderMap) -> Response {
    let Some(session) = app.session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "signed out\n").into_response();
    };
    match read_attention(&app, &session).await {
        Ok(a) => html(StatusCode::OK, pages::attention::fragment(&a)),
        Err(e) => (e.http_status(), format!("{e}\n")).into_response(),
    }
}

pub(super) async fn records_page(
    State(app): Shared,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let (session, cookie) = match app.viewer(&headers) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let mut filter = Filter::default();
    let mut flash = None;
    for (k, v) in query {
        match k.as_str() {
            "namespace" => filter.namespace = v,
            "status" => filter.statuses.push(v.trim().to_ascii_uppercase()),
            "parent" => filter.parent = v,
            "page_token" => filter.page_token = v,
            "done" if v == "purged" => flash = Some("Purged."),
            _ => {}
        }
    }
    let now = session::now();
    let (status, markup) = match filter.request() {
        Err(e) => (
            StatusCode::BAD_REQUEST,
            pages::records::page(&session, &filter, Err(&e), flash, now),
        ),
        Ok(request) => match app.ledger.list(&session, request).await {
            Ok(page) => (
                StatusCode::OK,
                pages::records::page(&session, &filter, Ok(&page), flash, now),
            ),
            Err(e) if e.code == tonic::Code::Unauthenticated => {
                return app.failed(Some(&session), &e, None)
            }
            Err(e) => (
                e.http_status(),
                pages::records::page(&session, &filter, Err(&e.to_string()), flash, now),
            ),
        },
    };
    with_cookie(html(status, markup), cookie)
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct RecordQuery {
    namespace: String,
    key: String,
    done: String,
}

pub(super) async fn record_page(
    State(app): Shared,
    headers: HeaderMap,
    Query(q): Query<RecordQuery>,
) -> Response {
    let (session, cookie) = match app.viewer(&headers) {
        Ok(v) => v,
        Err(r) => return *r,
    };
    let looked = app.ledger.lookup(&session, &q.namespace, &q.key).await;
    let response = match looked {
        Err(e) => app.failed(
            Some(&session),
            &e,
            Some(("/records", "Back to the records")),
        ),
        Ok(found) => {
            let Some(record) = found.record else {
                let e = CallError::local(tonic::Code::NotFound, "no record");
                return app.failed(Some(&session), &e, None);
            };
            let children = app
                .ledger
                .list_up_to(
                    &session,
                    v1::ListRecordsRequest {
                        parent: Some(v1::OperationRef {
                            namespace: record.namespace.clone(),
                            key: record.key.clone(),
                        }),
                        ..Default::default()
                    },
                    CHILDREN_LIMIT,
                )
                .await
                .map(|(c, _)| c)
                .map_err(|e| e.to_string());
            let flash = match q.done.as_str() {
                "approved" => Some("Approved."),
                "rejected" => Some("Rejected."),
                "reconciled" => Some("Reconciled."),
                _ => None,
            };
            let view = record::View {
                record: &record,
                history: &found.history,
                children: children.as_deref().map_err(Clone::clone),
                flash,
                now: session::now(),
            };
            html(StatusCode::OK, record::page(&session, &view))
        }
    };
    with_cookie(response, cookie)
}
