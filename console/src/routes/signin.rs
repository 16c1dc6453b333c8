//! Signing in (a token, or a tenant for a dev-mode server, checked and its scopes probed by the
//! ledger) and out.

use super::{html, with_cookie, App, Shared};
use crate::guard;
use crate::pages;
use crate::session::{self, Credential, Session};
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use http::header::SET_COOKIE;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;

pub(super) async fn signin_page(State(app): Shared, headers: HeaderMap) -> Response {
    if app.session(&headers).is_some() {
        return Redirect::to("/").into_response();
    }
    signin_form(&app, StatusCode::OK, None, "", "")
}

/// The sign-in form with a fresh double-submit token (cookie and hidden field).
fn signin_form(
    app: &App,
    status: StatusCode,
    error: Option<&str>,
    name: &str,
    tenant: &str,
) -> Response {
    let csrf = session::random_hex();
    let secure = app.args.secure_cookies();
    let lifetime = app.args.session_lifetime.as_secs();
    let cookie = guard::set_cookie(guard::signin_cookie_name(secure), &csrf, lifetime, secure);
    with_cookie(
        html(status, pages::signin::page(&csrf, error, name, tenant)),
        Some(cookie),
    )
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct SignIn {
    csrf: String,
    token: String,
    tenant: String,
    name: String,
}

pub(super) async fn signin(
    State(app): Shared,
    headers: HeaderMap,
    Form(form): Form<SignIn>,
) -> Response {
    let origin = match &app.args.public_origin {
        Some(o) => guard::parse_origin(o),
        None => guard::request_origin(&headers, app.tls),
    }
    .unwrap_or_default();
    let expected = guard::cookie(
        &headers,
        guard::signin_cookie_name(app.args.secure_cookies()),
    );
    if guard::same_origin(&headers, &origin).is_err() {
        return html(
            StatusCode::FORBIDDEN,
            pages::problem(
                None,
                "Refused",
                "Refused: sign in from the console's own sign-in page.",
                Some(("/signin", "Sign in")),
            ),
        );
    }
    let (name, tenant) = (form.name.trim(), form.tenant.trim());
    if !expected.is_some_and(|e| guard::csrf_matches(e, &form.csrf)) {
        // Same origin, but the form's token is not this browser's (an old tab, cleared
        // cookies): a fresh form, the token typed again.
        return signin_form(
            &app,
            StatusCode::FORBIDDEN,
            Some("This sign-in form expired: please sign in again."),
            name,
            tenant,
        );
    }
    let again = |status, error: &str| signin_form(&app, status, Some(error), name, tenant);
    if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
        return again(
            StatusCode::BAD_REQUEST,
            "Your name: 1 to 64 characters, please.",
        );
    }
    let credential = match (form.token.trim(), tenant) {
        ("", "") => {
            return again(
                StatusCode::BAD_REQUEST,
                "Give your token (or, for a dev-mode server, a tenant).",
            )
        }
        (token, "") => Credential::Token(token.to_owned()),
        ("", tenant) => Credential::Tenant(tenant.to_owned()),
        _ => {
            return again(
                StatusCode::BAD_REQUEST,
                "Give a token or a tenant, not both.",
            )
        }
    };
    match app.ledger.sign_in(&credential).await {
        Ok(scopes) => {
            let session = Session::new(credential, name.to_owned(), scopes);
            tracing::info!(operator = %session.name, ledger = scopes.ledger, approve = scopes.approve, admin = scopes.admin, "signed in");
            let mut response = Redirect::to("/").into_response();
            if let Ok(v) = HeaderValue::try_from(app.session_cookie(&session)) {
                response.headers_mut().append(SET_COOKIE, v);
            }
            let secure = app.args.secure_cookies();
            let clear = guard::set_cookie(guard::signin_cookie_name(secure), "", 0, secure);
            with_cookie(response, Some(clear))
        }
        Err(e) if e.code == tonic::Code::Unauthenticated => again(
            StatusCode::UNAUTHORIZED,
            if form.token.trim().is_empty() {
                "The ledger did not accept a tenant: it has a tokens file, so sign in with a token."
            } else {
                "The ledger did not accept this token."
            },
        ),
        Err(e) => again(
            e.http_status(),
            &format!("The ledger refused: {} {}", e.reason, e.message),
        ),
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
pub(super) struct SignOut {
    csrf: String,
}

pub(super) async fn signout(
    State(app): Shared,
    headers: HeaderMap,
    Form(form): Form<SignOut>,
) -> Response {
    // A session that ended already (expired, or sealed under another key) has nothing to end.
    if app.session(&headers).is_some() {
        if let Err(r) = app.actor(&headers, &form.csrf) {
            return *r;
        }
    }
    let clear = guard::set_cookie(app.cookie_name(), "", 0, app.args.secure_cookies());
    with_cookie(Redirect::to("/signin").into_response(), Some(clear))
}
