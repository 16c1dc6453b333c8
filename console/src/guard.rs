//! What stands between a browser request and the ledger: reading and writing the session cookie,
//! and the checks every state-changing request passes — same origin (`Origin`, `Sec-Fetch-Site`)
//! and the session's CSRF token — before anything is called.

use http::header::{COOKIE, HOST, ORIGIN};
use http::HeaderMap;
use subtle::ConstantTimeEq as _;

/// The session cookie's name; with `Secure` it gets the `__Host-` prefix (no Domain, Path=/).
pub(crate) fn cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-oncekey_console"
    } else {
        "oncekey_console"
    }
}

/// The sign-in form's double-submit cookie.
pub(crate) fn signin_cookie_name(secure: bool) -> &'static str {
    if secure {
        "__Host-oncekey_console_signin"
    } else {
        "oncekey_console_signin"
    }
}

/// The value of cookie `name` in the request, if any.
pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Strict, Path=/, Secure when asked; `max_age` 0
/// clears it.
pub(crate) fn set_cookie(name: &str, value: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// `scheme://host[:port]` in lower case, without a default port, or `None` when not an origin.
pub(crate) fn parse_origin(text: &str) -> Option<String> {
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !(scheme == "http" || scheme == "https")
        || rest.is_empty()
        || rest.contains(['/', '?', '#', '@'])
    {
        return None;
    }
    let host = rest.to_ascii_lowercase();
    let host = match (scheme.as_str(), host.rsplit_once(':')) {
        ("http", Some((h, "80"))) | ("https", Some((h, "443"))) => h.to_owned(),
        _ => host,
    };
    Some(format!("{scheme}://{host}"))
}

/// Why a state-changing request was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The browser says another site sent it.
    CrossSite(String),
    /// No session, or its CSRF token is missing or wrong.
    Csrf,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::CrossSite(why) => write!(f, "a request from another site ({why})"),
            Refused::Csrf => f.write_str(
                "the form's CSRF token does not match this session (sign in again and resubmit \
                 from the console's own page)",
            ),
        }
    }
}

/// Refuses a request the browser marks as coming from another origin. `expected` is the
/// console's origin: `--public-origin`, else the scheme served plus the request's Host.
pub(crate) fn same_origin(headers: &HeaderMap, expected: &str) -> Result<(), Refused> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = site.to_str().unwrap_or("?");
        if !(site == "same-origin" || site == "none") {
            return Err(Refused::CrossSite(format!("Sec-Fetch-Site: {site}")));
        }
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let text = origin.to_str().unwrap_or("");
        if parse_origin(text).as_deref() != Some(expected) {
            return Err(Refused::CrossSite(format!("Origin: {text}")));
        }
    }
    Ok(())
}

/// The origin a request reached, from the scheme served and its Host header.
pub(crate) fn request_origin(headers: &HeaderMap, tls: bool) -> Option<String> {
    let host = headers.get(HOST)?.to_str().ok()?;
    parse_origin(&format!("{}://{host}", if tls { "https" } else { "http" }))
}

/// Whether a submitted CSRF token equals the expected one (in constant time).
pub(crate) fn csrf_matches(expected: &str, submitted: &str) -> bool {
    !expected.is_empty()
        && expected.len() == submitted.len()
        && bool::from(expected.as_bytes().ct_eq(submitted.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn origins_normalize() {
        assert_eq!(
            parse_origin("HTTPS://Console.Example:443").as_deref(),
            Some("https://console.example")
        );
        assert_eq!(
            parse_origin("http://127.0.0.1:8088").as_deref(),
            Some("http://127.0.0.1:8088")
        );
        assert_eq!(parse_origin("null"), None);
        assert_eq!(parse_origin("https://a.example/path"), None);
        assert_eq!(parse_origin("ftp://a.example"), None);
    }

    #[test]
    fn cross_site_requests_are_refused() {
        let me = "http://127.0.0.1:8088";
        assert_eq!(
            same_origin(
                &headers(&[("origin", me), ("sec-fetch-site", "same-origin")]),
                me
            ),
            Ok(())
        );
        assert_eq!(
            same_origin(&headers(&[]), me),
            Ok(()),
            "non-browser clients send neither"
        );
        assert!(matches!(
            same_origin(&headers(&[("origin", "http://evil.example")]), me),
            Err(Refused::CrossSite(_))
        ));
        assert!(matches!(
            same_origin(
                &headers(&[("origin", me), ("sec-fetch-site", "cross-site")]),
                me
            ),
            Err(Refused::CrossSite(_))
        ));
        assert!(matches!(
            same_origin(&headers(&[("origin", "null")]), me),
            Err(Refused::CrossSite(_))
        ));
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = headers(&[("cookie", "a=1; oncekey_console=xyz"), ("cookie", "b=2")]);
        assert_eq!(cookie(&h, "oncekey_console"), Some("xyz"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "c"), None);
        let set = set_cookie("n", "v", 60, true);
        assert!(
            set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.ends_with("Secure")
        );
        assert!(!set_cookie("n", "v", 60, false).contains("Secure"));
    }

    #[test]
    fn csrf_tokens_compare_exactly() {
        assert!(csrf_matches("abc", "abc"));
        assert!(!csrf_matches("abc", "abd"));
        assert!(!csrf_matches("abc", ""));
        assert!(!csrf_matches("", ""));
    }
}
