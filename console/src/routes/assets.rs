//! Probes, the compiled-in stylesheet and script, and the not-found page.

use super::{html, Shared};
use crate::pages;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, StatusCode};
use std::sync::atomic::Ordering;

pub(super) async fn readyz(State(app): Shared) -> Response {
    if app.draining.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    match app.ledger.ready().await {
        Ok(()) => (StatusCode::OK, "ready\n").into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

pub(super) async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../../assets/console.css"),
    )
}

pub(super) async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../../assets/console.js"),
    )
}

pub(super) async fn not_found(State(app): Shared, headers: HeaderMap) -> Response {
    let session = app.session(&headers);
    html(
        StatusCode::NOT_FOUND,
        pages::problem(
            session.as_ref(),
            "Not found",
            "There is no such page.",
            Some(("/", "Back to the console")),
        ),
    )
}
