//! The sign-in page: a bearer token (or, for a dev-mode server, a tenant) and the operator's
//! name. The token field is a password field, never echoed back.

use super::{layout, Nav};
use maud::{html, Markup};

/// The sign-in form, with `error` above it when the last attempt failed.
pub(crate) fn page(csrf: &str, error: Option<&str>, name: &str, tenant: &str) -> Markup {
    layout(
        "Sign in",
        None,
        Nav::None,
        html! {
            h1 { "Sign in" }
            @if let Some(e) = error { p.error role="alert" { (e) } }
            form.card method="post" action="/signin" autocomplete="off" {
                input type="hidden" name="csrf" value=(csrf);
                label for="name" { "Your name" }
                input #name type="text" name="name" required maxlength="64" value=(name)
                    aria-describedby="name-help";
                p.help #name-help { "Recorded with the reconciliations you make." }
                label for="token" { "Token" }
                input #token type="password" name="token" autocomplete="off"
                    aria-describedby="token-help";
                p.help #token-help {
                    "Your own bearer token (" code { "oncekey token new --scope approve" } "). "
                    "It is kept only in an encrypted, HttpOnly cookie."
                }
                label for="tenant" { "Tenant (a server in dev mode, without tokens)" }
                input #tenant type="text" name="tenant" value=(tenant);
                button type="submit" { "Sign in" }
            }
        },
    )
}
