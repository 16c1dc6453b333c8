//! The console's HTTP routes: pages (GET, signed in or sent to `/signin`), the live refresh,
//! the actions (POST: same origin, session, CSRF — then the ledger), sign-in and sign-out,
//! probes and the compiled-in assets. Every response carries the security headers.

mod actions;
mod assets;
mod signin;
mod views;

use crate::guard::{self, Refused};
use crate::ledger::{CallError, Ledger};
use crate::pages;
use crate::session::{self, Sealer, Session};
use crate::ConsoleArgs;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, SET_COOKIE};
use http::{HeaderMap, HeaderValue, StatusCode};
use maud::Markup;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A page view refreshes the session's idle clock (and re-sends the cookie) at most this often
/// (seconds), or a tenth of `--idle-timeout` when that is shorter.
const SEEN_GRANULARITY: u64 = 60;

/// What every handler shares.
pub(crate) struct App {
    pub(crate) ledger: Ledger,
    pub(crate) sealer: Sealer,
    pub(crate) args: ConsoleArgs,
    /// Served over TLS.
    pub(crate) tls: bool,
    pub(crate) draining: AtomicBool,
}

pub(super) type Shared = State<Arc<App>>;

/// The router.
pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(views::home))
        .route("/attention", get(views::attention_fragment))
        .route("/records", get(views::records_page))
        .route("/record", get(views::record_page))
        .route("/record/approve", post(actions::approve))
        .route("/record/reject", post(actions::reject))
        .route("/record/reconcile", post(actions::reconcile))
        .route("/record/purge", post(actions::purge))
        .route("/signin", get(signin::signin_page).post(signin::signin))
        .route("/signout", post(signin::signout))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(assets::readyz))
        .route("/assets/console.css", get(assets::css))
        .route("/assets/console.js", get(assets::js))
        .fallback(assets::not_found)
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
}
