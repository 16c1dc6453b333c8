//! What the console's tests share: a running `oncekey console`, a cookie-keeping HTTP client,
//! form encoding, and the ledger requests they start from.
#![allow(dead_code, unused_imports)]

pub(crate) use ::http::header::{CONTENT_TYPE, COOKIE, LOCATION, ORIGIN, SET_COOKIE};
pub(crate) use ::http::{HeaderMap, Method, Request, StatusCode};
pub(crate) use http_body_util::{BodyExt, Full};
pub(crate) use hyper_util::client::legacy::connect::HttpConnector;
pub(crate) use hyper_util::client::legacy::Client;
pub(crate) use hyper_util::rt::TokioExecutor;
pub(crate) use oncekey_api::v1;
pub(crate) use oncekey_tests::*;
pub(crate) use sha2::Digest;
pub(crate) use std::io::{BufRead, BufReader};
pub(crate) use std::process::{Child, Command, Stdio};

pub(crate) const NS: &str = "payouts.send";
pub(crate) const ALICE: &str = "tok-console-alice-1c9";
pub(crate) const BOB: &str = "tok-console-bob-7e2";

/// A running `oncekey console`.
pub(crate) struct Console {
    pub(crate) child: Child,
    pub(crate) base: String,
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Console {
    pub(crate) fn start(server: &str, extra: &[&str]) -> Console {
        let mut child = Command::new(binary())
            .args(["console", "--server", server, "--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start oncekey console");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // `listening http=ADDR`, or `https=ADDR` with --tls-cert.
        let (scheme, addr) = line
            .trim()
            .strip_prefix("listening ")
            .and_then(|rest| rest.split_once('='))
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        Console {
            base: format!("{scheme}://{addr}"),
            child,
        }
    }
}

/// A cookie-keeping HTTP client, like a browser without script.
pub(crate) struct Browser {
    pub(crate) base: String,
    pub(crate) client: Client<HttpConnector, Full<bytes::Bytes>>,
    pub(crate) cookies: Vec<(String, String)>,
}

pub(crate) struct Page {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Browser {
    pub(crate) fn new(base: &str) -> Self {
        Self {
            base: base.to_owned(),
            client: Client::builder(TokioExecutor::new()).build_http(),
            cookies: Vec::new(),
        }
    }

    pub(crate) async fn send(
        &mut self,
        method: Method,
        path: &str,
        form: Option<String>,
        origin: Option<&str>,
    ) -> Page {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            request = request.header(COOKIE, jar.join("; "));
        }
        if let Some(o) = origin {
            request = request.header(ORIGIN, o);
        }
        if form.is_some() {
            request = request.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        let body = Full::new(bytes::Bytes::from(form.unwrap_or_default()));
        let response = self
            .client
            .request(request.body(body).unwrap())
            .await
            .expect("console answers");
        let (parts, body) = response.into_parts();
        for set in parts.headers.get_all(SET_COOKIE) {
            let set = set.to_str().unwrap();
            let (pair, _) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            self.cookies.retain(|(k, _)| k != name);
            if !set.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
        let body = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
        Page {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }

    pub(crate) async fn get(&mut self, path: &str) -> Page {
        self.send(Method::GET, path, None, None).await
    }

    /// A form POST from the console's own origin.
    pub(crate) async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let origin = self.base.clone();
        self.send(Method::POST, path, Some(encode(fields)), Some(&origin))
            .await
    }

    /// A browser signed in to the console at `base` (asserted).
    pub(crate) async fn signed_in(base: &str, name: &str, credential: (&str, &str)) -> Self {
        let mut browser = Self::new(base);
        let page = browser.sign_in(&[("name", name), credential]).await;
        assert_eq!(page.status, StatusCode::SEE_OTHER, "{}", page.body);
        browser
    }

    pub(crate) async fn sign_in(&mut self, fields: &[(&str, &str)]) -> Page {
        let page = self.get("/signin").await;
        let csrf = hidden(&page.body, "csrf");
        let mut all = fields.to_vec();
        all.push(("csrf", &csrf));
        self.post("/signin", &all).await
    }
}

pub(crate) fn encode(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

pub(crate) fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of the first hidden input named `name`.
pub(crate) fn hidden(body: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = body
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} field in {body}"))
        + marker.len();
    body[start..].split('"').next().unwrap().to_owned()
}

pub(crate) fn tokens_file(dir: &std::path::Path) -> String {
    let hash = |t: &str| hex::encode(sha2::Sha256::digest(t.as_bytes()));
    let path = dir.join("tokens");
    std::fs::write(
        &path,
        format!(
            "acme:alice:{}:ledger,approve,admin\nacme:bob:{}\n",
            hash(ALICE),
            hash(BOB)
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

pub(crate) fn gated(key: &str) -> v1::ClaimRequest {
    v1::ClaimRequest {
        require_approval: true,
        ..claim(NS, key, r#"{"to":"acct-1","cents":500}"#)
    }
}

pub(crate) async fn record(server: &Server, key: &str) -> Option<v1::Record> {
    let mut rpc = server.client_with_token(ALICE).await;
    rpc.lookup(lookup(NS, key))
        .await
        .ok()
        .and_then(|r| r.into_inner().record)
}

/// The text between `start` and the next `end` in `body` (asserted to be there).
pub(crate) fn between<'a>(body: &'a str, start: &str, end: &str) -> &'a str {
    let from = body
        .find(start)
        .unwrap_or_else(|| panic!("no {start:?} in {body}"))
        + start.len();
    let len = body[from..].find(end).unwrap_or(body.len() - from);
    &body[from..from + len]
}
