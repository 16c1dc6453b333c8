//! Header handling of a proxy: hop-by-hop fields removed in both directions (RFC 9110 §7.6.1,
//! including every field the `Connection` header names), `Via` added (§7.6.3), the client's address
//! appended to `X-Forwarded-For` and `Forwarded` (RFC 7239), the `Host` set to the upstream's; and
//! which response headers are stored with a response and replayed: `location` plus
//! `--store-headers` (never `set-cookie` unless listed: a cookie is one client's session, and
//! replaying it to a retry that might come from elsewhere would hand that session over).

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Version;
use std::collections::HashMap;
use std::net::SocketAddr;

/// Hop-by-hop fields every proxy removes, besides those `Connection` names.
pub(crate) const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("proxy-connection"),
    HeaderName::from_static("keep-alive"),
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
    header::PROXY_AUTHENTICATE,
];

/// The header that marks a replayed response.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Separates the values of a multi-valued header in stored metadata (never inside a value).
const VALUE_SEPARATOR: char = '\n';

/// Removes the hop-by-hop fields, including those the `Connection` header lists.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// `Via`'s protocol version token for `version`.
fn via_version(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "0.9",
        Version::HTTP_10 => "1.0",
        Version::HTTP_2 => "2",
        Version::HTTP_3 => "3",
        _ => "1.1",
    }
}

/// Appends this gateway to `Via`, for a message received over `version`.
pub fn append_via(headers: &mut HeaderMap, version: Version) {
    let value = format!("{} oncekey-gateway", via_version(version));
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.append(header::VIA, v);
    }
}

/// What the gateway knows about the client side of a request.
#[derive(Debug, Clone)]
pub struct Origin {
    /// The client's address.
    pub peer: SocketAddr,
    /// The host the client asked for (`Host`, or the HTTP/2 authority).
    pub host: Option<String>,
    /// The protocol version of the client's request.
    pub version: Version,
}

/// Prepares a request's headers for the upstream: hop-by-hop fields removed, `Host` set to
/// `upstream_host`, the client appended to `X-Forwarded-For` and `Forwarded`, `X-Forwarded-Host`
/// and `X-Forwarded-Proto` set when absent, `Via` appended.
pub fn for_upstream(headers: &mut HeaderMap, origin: &Origin, upstream_host: &HeaderValue) {
    strip_hop_by_hop(headers);
    let ip = origin.peer.ip();
    append_comma(
        headers,
        HeaderName::from_static("x-forwarded-for"),
        &ip.to_string(),
    );
    let node = match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("\"[{v6}]\""),
    };
    let mut forwarded = format!("for={node};proto=http");
    if let Some(host) = origin.host.as_deref().filter(|h| is_token_or_quotable(h)) {
        forwarded.push_str(&format!(";host=\"{host}\""));
    }
    append_comma(headers, header::FORWARDED, &forwarded);
    if let Some(host) = origin.host.as_deref() {
        let name = HeaderName::from_static("x-forwarded-host");
        if !headers.contains_key(&name) {
            if let Ok(v) = HeaderValue::from_str(host) {
                headers.insert(name, v);
            }
        }
    }
    let proto = HeaderName::from_static("x-forwarded-proto");
    if !headers.contains_key(&proto) {
        headers.insert(proto, HeaderValue::from_static("http"));
    }
    headers.insert(header::HOST, upstream_host.clone());
    append_via(headers, origin.version);
}

/// A host fit to put inside a quoted `Forwarded` value (no quote or backslash).
fn is_token_or_quotable(host: &str) -> bool {
    host.bytes()
        .all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
}

/// Appends `value` to a comma-separated list header (one field, as proxies usually do).
fn append_comma(headers: &mut HeaderMap, name: HeaderName, value: &str) {
    let joined = match headers
        .get_all(&name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
    {
        existing if existing.is_empty() => value.to_owned(),
        existing => format!("{}, {value}", existing.join(", ")),
    };
    if let Ok(v) = HeaderValue::from_str(&joined) {
        headers.insert(name, v);
    }
}

/// Prepares an upstream response's headers for the client: hop-by-hop fields removed, `Via`
/// appended.
pub fn for_client(headers: &mut HeaderMap, upstream_version: Version) {
    strip_hop_by_hop(headers);
    append_via(headers, upstream_version);
}

/// The headers of a response that are stored with it: each of `names` present, its values joined
/// by a newline. Values that are not visible ASCII text are left out.
pub fn stored(headers: &HeaderMap, names: &[HeaderName]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for name in names {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if !values.is_empty() {
            out.insert(
                name.as_str().to_owned(),
                values.join(&VALUE_SEPARATOR.to_string()),
            );
        }
    }
    out
}

/// The headers of a replayed response: the stored metadata (entries that are not valid headers
/// are skipped), the content type, and `Idempotent-Replayed: true`.
pub fn replayed(metadata: &HashMap<String, String>, content_type: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, values) in metadata {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        for value in values.split(VALUE_SEPARATOR) {
            if let Ok(v) = HeaderValue::from_str(value) {
                headers.append(name.clone(), v);
            }
        }
    }
    if !content_type.is_empty() {
        if let Ok(v) = HeaderValue::from_str(content_type) {
            headers.insert(header::CONTENT_TYPE, v);
        }
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn hop_by_hop_fields_and_those_connection_names_are_removed() {
        let mut h = map(&[
            ("connection", "keep-alive, X-Secret-Hop"),
            ("keep-alive", "timeout=5"),
            ("x-secret-hop", "1"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic eA=="),
            ("x-end-to-end", "kept"),
        ]);
        strip_hop_by_hop(&mut h);
        let names: Vec<_> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["x-end-to-end"]);
    }

    #[test]
    fn forwarding_headers_are_appended() {
        let mut h = map(&[
            ("x-forwarded-for", "10.0.0.1"),
            ("forwarded", "for=10.0.0.1"),
            ("host", "api.example"),
        ]);
        let origin = Origin {
            peer: "127.0.0.7:5000".parse().unwrap(),
            host: Some("api.example".into()),
            version: Version::HTTP_11,
        };
        for_upstream(&mut h, &origin, &HeaderValue::from_static("127.0.0.1:9000"));
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 127.0.0.7");
        assert_eq!(
            h["forwarded"],
            "for=10.0.0.1, for=127.0.0.7;proto=http;host=\"api.example\""
        );
        assert_eq!(h["host"], "127.0.0.1:9000");
        assert_eq!(h["x-forwarded-host"], "api.example");
        assert_eq!(h["x-forwarded-proto"], "http");
        assert_eq!(h["via"], "1.1 oncekey-gateway");
        let v6 = Origin {
            peer: "[::1]:5000".parse().unwrap(),
            host: None,
            version: Version::HTTP_2,
        };
        let mut h = HeaderMap::new();
        for_upstream(&mut h, &v6, &HeaderValue::from_static("u"));
        assert_eq!(h["forwarded"], "for=\"[::1]\";proto=http");
        assert_eq!(h["via"], "2 oncekey-gateway");
    }

    #[test]
    fn only_listed_headers_are_stored_and_replayed_with_the_marker() {
        let h = map(&[
            ("location", "/v1/charges/7"),
            ("set-cookie", "session=secret"),
            ("etag", "\"a\""),
            ("link", "<a>; rel=x"),
            ("link", "<b>; rel=y"),
        ]);
        let names = [header::LOCATION, header::LINK];
        let stored = stored(&h, &names);
        assert_eq!(stored.len(), 2);
        assert!(!stored.contains_key("set-cookie"));
        let replay = replayed(&stored, "application/json");
        assert_eq!(replay["location"], "/v1/charges/7");
        let links: Vec<_> = replay.get_all("link").iter().collect();
        assert_eq!(links, ["<a>; rel=x", "<b>; rel=y"]);
        assert_eq!(replay["content-type"], "application/json");
        assert_eq!(replay["idempotent-replayed"], "true");
        assert!(!replay.contains_key("set-cookie"));
    }
}
