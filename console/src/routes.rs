//! The console's HTTP routes: pages (GET, signed in or sent to `/signin`), the live refresh,
//! the actions (POST: same origin, session, CSRF — then the ledger), sign-in and sign-out,
//! probes and the compiled-in assets. Every response carries the security headers.

use crate::guard::{self, Refused};
use crate::ledger::{CallError, Ledger, Settle};
use crate::pages::{self, attention::Attention, record, records::Filter};
use crate::session::{self, Credential, Sealer, Session};
use crate::ConsoleArgs;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use http::header::{CACHE_CONTROL, CONTENT_TYPE, SET_COOKIE};
use http::{HeaderMap, HeaderValue, StatusCode};
use maud::Markup;
use oncekey_api::v1;
use serde::Deserialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How many records each Needs attention list reads at most.
const ATTENTION_LIMIT: usize = 1000;
/// A page view refreshes the session's idle clock (and re-sends the cookie) at most this often
/// (seconds), or a tenth of `--idle-timeout` when that is shorter.
const SEEN_GRANULARITY: u64 = 60;
/// Children listed on a record's page.
const CHILDREN_LIMIT: usize = 200;

/// What every handler shares.
pub(crate) struct App {
    pub(crate) ledger: Ledger,
    pub(crate) sealer: Sealer,
    pub(crate) args: ConsoleArgs,
    /// Served over TLS.
    pub(crate) tls: bool,
    pub(crate) draining: AtomicBool,
}

type Shared = State<Arc<App>>;

/// The router.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(home))
        .route("/attention", get(attention_fragment))
        .route("/records", get(records_page))
        .route("/record", get(record_page))
        .route("/record/approve", post(approve))
        .route("/record/reject", post(reject))
        .route("/record/reconcile", post(reconcile))
        .route("/record/purge", post(purge))
        .route("/signin", get(signin_page).post(signin))
        .route("/signout", post(signout))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .fallback(not_found)
        .layer(axum::middleware::map_response(security_headers))
        .layer(axum::middleware::map_request(host_from_authority))
        .with_state(app)
}

/// HTTP/2 requests name their host in `:authority` (the URI), not in a Host header: copy it
/// there, so the same-origin check sees the same for both protocols.
async fn host_from_authority(mut request: axum::extract::Request) -> axum::extract::Request {
    if !request.headers().contains_key(http::header::HOST) {
        if let Some(value) = request
            .uri()
            .authority()
            .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
        {
            request.headers_mut().insert(http::header::HOST, value);
        }
    }
    request
}

/// Headers on every response: a Content-Security-Policy without inline script or style, no
/// framing, no sniffing, no referrer, no caching of pages.
async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: under `no-referrer` Chromium sends `Origin: null` with the
    // console's own form posts, which the same-origin check must refuse.
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

fn html(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

impl App {
    fn cookie_name(&self) -> &'static str {
        guard::cookie_name(self.args.secure_cookies())
    }

    /// The live session the request carries, if any.
    fn session(&self, headers: &HeaderMap) -> Option<Session> {
        let text = guard::cookie(headers, self.cookie_name())?;
        let session: Session = self.sealer.open(text)?;
        session
            .alive(
                session::now(),
                self.args.idle_timeout,
                self.args.session_lifetime,
            )
            .then_some(session)
    }

    /// The `Set-Cookie` value carrying `session`.
    fn session_cookie(&self, session: &Session) -> String {
        let left = (session.signed_in + self.args.session_lifetime.as_secs())
            .saturating_sub(session::now());
        guard::set_cookie(
            self.cookie_name(),
            &self.sealer.seal(session),
            left,
            self.args.secure_cookies(),
        )
    }

    /// A page view: the session (its idle clock moved on when due, with the cookie that says
    /// so), or a redirect to sign in.
    fn viewer(&self, headers: &HeaderMap) -> Result<(Session, Option<String>), Box<Response>> {
        let Some(mut session) = self.session(headers) else {
            return Err(Box::new(Redirect::to("/signin").into_response()));
        };
        let now = session::now();
        let every = SEEN_GRANULARITY.min(self.args.idle_timeout.as_secs() / 10);
        let cookie = (now >= session.seen + every).then(|| {
            session.seen = now;
            self.session_cookie(&session)
        });
        Ok((session, cookie))
    }

    /// The checks of a state-changing request: same origin, a session, its CSRF token.
    fn actor(&self, headers: &HeaderMap, csrf: &str) -> Result<Session, Box<Response>> {
        let refuse = |why: Refused| {
            tracing::warn!(%why, "refused a state-changing request");
            Box::new(html(
                StatusCode::FORBIDDEN,
                pages::problem(
                    None,
                    "Refused",
                    &format!("Refused: {why}."),
                    Some(("/", "Back to the console")),
                ),
            ))
        };
        let origin = match &self.args.public_origin {
            Some(o) => guard::parse_origin(o),
            None => guard::request_origin(headers, self.tls),
        }
        .unwrap_or_default();
        guard::same_origin(headers, &origin).map_err(refuse)?;
        let session = self.session(headers).ok_or(Refused::Csrf).map_err(refuse)?;
        if !guard::csrf_matches(&session.csrf, csrf) {
            return Err(refuse(Refused::Csrf));
        }
        Ok(session)
    }
}

fn with_cookie(mut response: Response, cookie: Option<String>) -> Response {
    if let Some(c) = cookie.and_then(|c| HeaderValue::try_from(c).ok()) {
        response.headers_mut().append(SET_COOKIE, c);
    }
    response
}

impl App {
    /// The page for a failed ledger call. A session the ledger no longer accepts (a revoked
    /// token) is ended: the operator is sent to sign in again.
    fn failed(
        &self,
        session: Option<&Session>,
        e: &CallError,
        back: Option<(&str, &str)>,
    ) -> Response {
        if e.code == tonic::Code::Unauthenticated && session.is_some() {
            let clear = guard::set_cookie(self.cookie_name(), "", 0, self.args.secure_cookies());
            return with_cookie(Redirect::to("/signin").into_response(), Some(clear));
        }
        let (title, detail) = if e.local {
            ("Not done", e.message.clone())
        } else if e.reason.is_empty() {
            ("The ledger said no", format!("{:?}: {}", e.code, e.message))
        } else {
            (
                "The ledger said no",
                format!("The ledger refused: {} — {}", e.reason, e.message),
            )
        };
        html(
            e.http_status(),
            pages::problem(session, title, &detail, back),
        )
    }
}

// ---- pages -----------------------------------------------------------------------------------

async fn read_attention(app: &App, session: &Session) -> Result<Attention, CallError> {
    let list = |status: v1::RecordStatus| v1::ListRecordsRequest {
        statuses: vec![status as i32],
        ..Default::default()
    };
    let (unknown, processing, awaiting) = tokio::try_join!(
        app.ledger
            .list_up_to(session, list(v1::RecordStatus::Unknown), ATTENTION_LIMIT),
        app.ledger
            .list_up_to(session, list(v1::RecordStatus::Processing), ATTENTION_LIMIT),
        app.ledger.list_up_to(
            session,
            list(v1::RecordStatus::AwaitingApproval),
            ATTENTION_LIMIT
        ),
    )?;
    let now = session::now();
    Ok(Attention {
        truncated: unknown.1 || processing.1 || awaiting.1,
        unknown: unknown.0,
        awaiting: awaiting.0,
        lapsed: processing
            .0
            .into_iter()
            .filter(|r| crate::render::lapsed(r, now))
            .collect(),
        now,
    }
    .sorted())
}

async fn home(State(app): Shared, headers: HeaderMap) -> Response {
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
async fn attention_fragment(State(app): Shared, headers: HeaderMap) -> Response {
    let Some(session) = app.session(&headers) else {
        return (StatusCode::UNAUTHORIZED, "signed out\n").into_response();
    };
    match read_attention(&app, &session).await {
        Ok(a) => html(StatusCode::OK, pages::attention::fragment(&a)),
        Err(e) => (e.http_status(), format!("{e}\n")).into_response(),
    }
}

async fn records_page(
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
struct RecordQuery {
    namespace: String,
    key: String,
    done: String,
}

async fn record_page(
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

// ---- actions ---------------------------------------------------------------------------------

#[derive(Default, Deserialize)]
#[serde(default)]
struct Decide {
    csrf: String,
    namespace: String,
    key: String,
    fingerprint: String,
    note: String,
}

/// A short, non-reversible name of a key for logs.
fn key_hash(key: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(key.as_bytes())[..8])
}

async fn decide(app: &App, headers: &HeaderMap, form: Decide, approve: bool) -> Response {
    let session = match app.actor(headers, &form.csrf) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let back = pages::record_href(&form.namespace, &form.key);
    let Ok(fingerprint) = hex::decode(form.fingerprint.trim()) else {
        let e = CallError::local(tonic::Code::InvalidArgument, "fingerprint: not hex");
        return app.failed(Some(&session), &e, Some((&back, "Back to the record")));
    };
    let target = (form.namespace.as_str(), form.key.as_str());
    match app
        .ledger
        .decide(&session, approve, target, fingerprint, &form.note)
        .await
    {
        Ok(()) => {
            let action = if approve { "approved" } else { "rejected" };
            tracing::info!(operator = %session.name, action, namespace = %form.namespace, key_hash = %key_hash(&form.key), "console action");
            Redirect::to(&format!("{back}&done={action}")).into_response()
        }
        Err(e) => app.failed(Some(&session), &e, Some((&back, "Back to the record"))),
    }
}

async fn approve(State(app): Shared, headers: HeaderMap, Form(form): Form<Decide>) -> Response {
    decide(&app, &headers, form, true).await
}

async fn reject(State(app): Shared, headers: HeaderMap, Form(form): Form<Decide>) -> Response {
    decide(&app, &headers, form, false).await
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Reconcile {
    csrf: String,
    namespace: String,
    key: String,
    outcome: String,
    code: String,
    content_type: String,
    body: String,
    message: String,
    note: String,
}

/// The Claim's owner: who reconciled and why, cut to the ledger's 256 bytes.
fn reconcile_owner(name: &str, note: &str) -> String {
    // The ledger refuses control characters in an owner: a note's line breaks become spaces.
    let note: String = note
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut owner = format!("{name} (console): {note}");
    if owner.len() > 256 {
        let mut end = 253;
        while !owner.is_char_boundary(end) {
            end -= 1;
        }
        owner.truncate(end);
        owner.push('…');
    }
    owner
}

/// A reconciliation note: it must fit the result's metadata (1 KiB with its name).
const MAX_NOTE_BYTES: usize = 1000;
/// A result body (the ledger's default `--max-result-bytes`).
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// An error message (the ledger's limit).
const MAX_MESSAGE_BYTES: usize = 16 * 1024;

/// The settlement the form describes, or what is wrong with it (naming the field).
fn settle(form: &Reconcile, name: &str) -> Result<Settle, String> {
    let code: i32 = form
        .code
        .trim()
        .parse()
        .map_err(|_| format!("code {:?}: a whole number", form.code))?;
    // Checked here, before the Claim: a settlement the ledger refused after acquiring would
    // leave the operation PROCESSING until its lease lapses back to UNKNOWN.
    if form.note.trim().is_empty() {
        return Err("note: say what you checked (it goes into the receipts)".into());
    }
    if form.note.trim().len() > MAX_NOTE_BYTES {
        return Err(format!("note: at most {MAX_NOTE_BYTES} bytes"));
    }
    let content_type = form.content_type.trim();
    if content_type.len() > 256 || content_type.chars().any(char::is_control) {
        return Err("content_type: at most 256 bytes, no control characters".into());
    }
    if form.body.len() > MAX_BODY_BYTES {
        return Err(format!(
            "body: at most {MAX_BODY_BYTES} bytes (the ledger's default --max-result-bytes)"
        ));
    }
    if form.message.len() > MAX_MESSAGE_BYTES {
        return Err(format!("message: at most {MAX_MESSAGE_BYTES} bytes"));
    }
    match form.outcome.as_str() {
        "succeeded" => Ok(Settle::Succeeded(v1::OperationResult {
            code,
            body: form.body.clone().into_bytes(),
            content_type: content_type.to_owned(),
            metadata: [
                ("oncekey.reconciled_by".to_owned(), name.to_owned()),
                ("oncekey.note".to_owned(), form.note.trim().to_owned()),
            ]
            .into(),
        })),
        "failed" => {
            let details = serde_json::json!({"reconciled_by": name, "note": form.note.trim()});
            let message = match form.message.trim() {
                "" => "reconciled: it did not happen".to_owned(),
                m => m.to_owned(),
            };
            Ok(Settle::Failed(v1::OperationError {
                code,
                message,
                details: details.to_string().into_bytes(),
            }))
        }
        other => Err(format!(
            "outcome {other:?}: choose whether it happened (succeeded) or not (failed)"
        )),
    }
}

async fn reconcile(
    State(app): Shared,
    headers: HeaderMap,
    Form(form): Form<Reconcile>,
) -> Response {
    let session = match app.actor(&headers, &form.csrf) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let back = pages::record_href(&form.namespace, &form.key);
    let back_link = Some((back.as_str(), "Back to the record"));
    let settlement = match settle(&form, &session.name) {
        Ok(s) => s,
        Err(e) => {
            let e = CallError::local(tonic::Code::InvalidArgument, e);
            return app.failed(Some(&session), &e, back_link);
        }
    };
    let record = match app
        .ledger
        .lookup(&session, &form.namespace, &form.key)
        .await
    {
        Ok(found) => found.record.unwrap_or_default(),
        Err(e) => return app.failed(Some(&session), &e, back_link),
    };
    if record.status != v1::RecordStatus::Unknown as i32 {
        let e = CallError::local(
            tonic::Code::FailedPrecondition,
            format!(
                "the record is {}, not UNKNOWN: only an operation whose outcome is unknown is reconciled",
                crate::render::status(record.status)
            ),
        );
        return app.failed(Some(&session), &e, back_link);
    }
    let owner = reconcile_owner(&session.name, &form.note);
    match app
        .ledger
        .reconcile(&session, &record, owner, settlement)
        .await
    {
        Ok(()) => {
            tracing::info!(operator = %session.name, action = "reconciled", outcome = %form.outcome, namespace = %form.namespace, key_hash = %key_hash(&form.key), "console action");
            Redirect::to(&format!("{back}&done=reconciled")).into_response()
        }
        Err(e) => app.failed(Some(&session), &e, back_link),
    }
}

#[derive(Default, Deserialize)]
#[serde(default)]
struct Purge {
    csrf: String,
    namespace: String,
    key: String,
    confirm: String,
    force: String,
}

async fn purge(State(app): Shared, headers: HeaderMap, Form(form): Form<Purge>) -> Response {
    let session = match app.actor(&headers, &form.csrf) {
        Ok(s) => s,
        Err(r) => return *r,
    };
    let back = pages::record_href(&form.namespace, &form.key);
    let back_link = Some((back.as_str(), "Back to the record"));
    if form.confirm != form.key {
        let e = CallError::local(
            tonic::Code::InvalidArgument,
            "confirm: type the record's key exactly to purge it",
        );
        return app.failed(Some(&session), &e, back_link);
    }
    let force = form.force == "on";
    match app
        .ledger
        .purge(&session, &form.namespace, &form.key, force)
        .await
    {
        Ok(()) => {
            tracing::info!(operator = %session.name, action = "purged", force, namespace = %form.namespace, key_hash = %key_hash(&form.key), "console action");
            let query = serde_urlencoded::to_string([
                ("namespace", form.namespace.as_str()),
                ("done", "purged"),
            ])
            .unwrap_or_default();
            Redirect::to(&format!("/records?{query}")).into_response()
        }
        Err(e) => app.failed(Some(&session), &e, back_link),
    }
}

// ---- sign-in ---------------------------------------------------------------------------------

async fn signin_page(State(app): Shared, headers: HeaderMap) -> Response {
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
struct SignIn {
    csrf: String,
    token: String,
    tenant: String,
    name: String,
}

async fn signin(State(app): Shared, headers: HeaderMap, Form(form): Form<SignIn>) -> Response {
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
struct SignOut {
    csrf: String,
}

async fn signout(State(app): Shared, headers: HeaderMap, Form(form): Form<SignOut>) -> Response {
    // A session that ended already (expired, or sealed under another key) has nothing to end.
    if app.session(&headers).is_some() {
        if let Err(r) = app.actor(&headers, &form.csrf) {
            return *r;
        }
    }
    let clear = guard::set_cookie(app.cookie_name(), "", 0, app.args.secure_cookies());
    with_cookie(Redirect::to("/signin").into_response(), Some(clear))
}

// ---- probes and assets -----------------------------------------------------------------------

async fn readyz(State(app): Shared) -> Response {
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

async fn css() -> Response {
    asset(
        "text/css; charset=utf-8",
        include_str!("../assets/console.css"),
    )
}

async fn js() -> Response {
    asset(
        "text/javascript; charset=utf-8",
        include_str!("../assets/console.js"),
    )
}

async fn not_found(State(app): Shared, headers: HeaderMap) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt as _;

    fn app(public_origin: Option<&str>) -> Router {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: ConsoleArgs,
        }
        let mut args = Cli::parse_from(["console"]).args;
        args.public_origin = public_origin.map(str::to_owned);
        router(Arc::new(App {
            // Never reached: nothing listens on port 1.
            ledger: Ledger::new("http://127.0.0.1:1", None).unwrap(),
            sealer: Sealer::new(&[1; 32]),
            args,
            tls: false,
            draining: false.into(),
        }))
    }

    /// A sign-in POST as a browser sends it, over HTTP/1.1 (Host) or HTTP/2 (authority only).
    fn signin(uri: &str, host: Option<&str>, origin: &str) -> axum::extract::Request {
        let mut r = http::Request::post(uri)
            .header(http::header::ORIGIN, origin)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(
                http::header::COOKIE,
                "oncekey_console_signin=abc; __Host-oncekey_console_signin=abc",
            );
        if let Some(h) = host {
            r = r.header(http::header::HOST, h);
        }
        r.body(axum::body::Body::from("csrf=abc&name=a&tenant=t"))
            .unwrap()
    }

    #[tokio::test]
    async fn the_origin_check_reads_http2_authorities_and_the_public_origin() {
        let refused = StatusCode::FORBIDDEN;
        // Past the origin and CSRF checks, the unreachable ledger answers (503), not a refusal.
        let h1 = signin("/signin", Some("console.example"), "http://console.example");
        assert_ne!(app(None).oneshot(h1).await.unwrap().status(), refused);
        let h2 = signin(
            "http://console.example/signin",
            None,
            "http://console.example",
        );
        assert_ne!(app(None).oneshot(h2).await.unwrap().status(), refused);
        let other = signin("/signin", Some("console.example"), "http://evil.example");
        assert_eq!(app(None).oneshot(other).await.unwrap().status(), refused);
        // Behind a proxy the public origin is what browsers send, whatever the Host.
        let proxied = signin("/signin", Some("10.0.0.7:8088"), "https://ops.example");
        let public = app(Some("https://ops.example"));
        assert_ne!(
            public.clone().oneshot(proxied).await.unwrap().status(),
            refused
        );
        let direct = signin("/signin", Some("10.0.0.7:8088"), "http://10.0.0.7:8088");
        assert_eq!(public.oneshot(direct).await.unwrap().status(), refused);
    }

    #[test]
    fn reconcile_owners_fit_the_ledger() {
        assert_eq!(
            reconcile_owner("alice", " checked stripe "),
            "alice (console): checked stripe"
        );
        assert_eq!(
            reconcile_owner("alice", "line one\nline two"),
            "alice (console): line one line two",
            "no control characters reach the ledger"
        );
        let long = reconcile_owner("bob", &"é".repeat(300));
        assert!(long.len() <= 256, "{}", long.len());
        assert!(long.ends_with('…'));
    }

    #[test]
    fn reconcile_forms_name_their_bad_field() {
        let form = |outcome: &str, code: &str, note: &str| Reconcile {
            csrf: String::new(),
            namespace: "n".into(),
            key: "k".into(),
            outcome: outcome.into(),
            code: code.into(),
            content_type: "application/json".into(),
            body: "{}".into(),
            message: String::new(),
            note: note.into(),
        };
        assert!(settle(&form("succeeded", "x", "n"), "a")
            .unwrap_err()
            .starts_with("code"));
        assert!(settle(&form("succeeded", "200", " "), "a")
            .unwrap_err()
            .starts_with("note"));
        let long_note = "x".repeat(1001);
        assert!(settle(&form("succeeded", "200", &long_note), "a")
            .unwrap_err()
            .starts_with("note"));
        assert!(settle(&form("maybe", "200", "n"), "a")
            .unwrap_err()
            .starts_with("outcome"));
        match settle(&form("succeeded", "201", "saw it"), "alice").unwrap() {
            Settle::Succeeded(r) => {
                assert_eq!(r.code, 201);
                assert_eq!(r.metadata["oncekey.reconciled_by"], "alice");
            }
            other => panic!("{other:?}"),
        }
        match settle(&form("failed", "402", "declined"), "alice").unwrap() {
            Settle::Failed(e) => assert_eq!(
                (e.code, e.message.as_str()),
                (402, "reconciled: it did not happen")
            ),
            other => panic!("{other:?}"),
        }
    }
}
