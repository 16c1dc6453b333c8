//! The console's pages, rendered on the server with maud (every interpolated string escaped, so
//! keys, owners, notes and bodies are inert text). No inline script or style: the only script is
//! `/assets/console.js`, which the Content-Security-Policy allows alone.

pub(crate) mod attention;
pub(crate) mod budget;
pub(crate) mod duplicates;
pub(crate) mod record;
pub(crate) mod records;
pub(crate) mod signin;

use crate::session::Session;
use maud::{html, Markup, DOCTYPE};

/// Which top-level page is shown (for the navigation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Attention,
    Records,
    None,
}

/// The link to one record's page.
pub(crate) fn record_href(namespace: &str, key: &str) -> String {
    let query =
        serde_urlencoded::to_string([("namespace", namespace), ("key", key)]).unwrap_or_default();
    format!("/record?{query}")
}

/// A whole page: head, navigation (with the operator and sign-out when signed in), content.
pub(crate) fn layout(title: &str, session: Option<&Session>, nav: Nav, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · Oncekey console" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    span.brand { "Oncekey console" }
                    @if let Some(s) = session {
                        nav aria-label="Main" {
                            a href="/" aria-current=[(nav == Nav::Attention).then_some("page")] { "Needs attention" }
                            a href="/records" aria-current=[(nav == Nav::Records).then_some("page")] { "Records" }
                        }
                        div.who {
                            span { "Signed in as " strong { (s.name) } }
                            @if let Some(t) = s.tenant() { span.muted { " (tenant " (t) ")" } }
                            form method="post" action="/signout" {
                                input type="hidden" name="csrf" value=(s.csrf);
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main #main tabindex="-1" { (content) }
            }
        }
    }
}

/// A page saying what went wrong, with a way back.
pub(crate) fn problem(
    session: Option<&Session>,
    title: &str,
    detail: &str,
    back: Option<(&str, &str)>,
) -> Markup {
    layout(
        title,
        session,
        Nav::None,
        html! {
            h1 { (title) }
            p.error role="alert" { (detail) }
            @if let Some((href, label)) = back { p { a href=(href) { (label) } } }
        },
    )
}
