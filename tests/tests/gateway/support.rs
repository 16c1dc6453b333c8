//! What the gateway tests share: a real upstream HTTP server that counts its calls, the real
//! `oncekey gateway` process in front of it, an HTTP client (HTTP/1.1 or h2c), and the ledger key
//! and fingerprint computed independently of the gateway's code.

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// How long any wait in these tests may take before it fails: generous, the machine is shared.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// The upstream's shared state.
struct UpState {
    calls: AtomicUsize,
    arrived: Semaphore,
    release: Semaphore,
    last_headers: Mutex<Option<HeaderMap>>,
}

/// A real HTTP server (axum) standing in for the upstream service. Routes:
/// - `/hold…`: counts, signals its arrival, waits for [`Upstream::release`], then answers as `/echo`;
/// - `/status/N`: answers status N with body `status N #CALL`;
/// - `/big?bytes=N`: answers 200 with N bytes;
/// - `/binary`: answers 200 with bytes that are not UTF-8;
/// - `/slow?ms=N`: waits N ms, then answers as `/echo`;
/// - anything else (`/echo`): 201, a JSON body naming the call number, method, path, query and
///   request body, `Location: /things/CALL`, `Set-Cookie`, `X-Upstream: yes` and a hop-by-hop
///   header (`Connection: x-resp-hop`, `X-Resp-Hop`).
pub struct Upstream {
    /// `http://ADDR`.
    pub url: String,
    state: Arc<UpState>,
    task: tokio::task::JoinHandle<()>,
}

impl Upstream {
    /// Starts the server on a free port.
    pub async fn start() -> Upstream {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(UpState {
            calls: AtomicUsize::new(0),
            arrived: Semaphore::new(0),
            release: Semaphore::new(0),
            last_headers: Mutex::new(None),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Upstream { url, state, task }
    }

    /// How many requests reached the upstream.
    pub fn calls(&self) -> usize {
        self.state.calls.load(Ordering::SeqCst)
    }

    /// Waits for a request to arrive at `/hold`.
    pub async fn arrival(&self) {
        tokio::time::timeout(PATIENCE, self.state.arrived.acquire())
            .await
            .expect("a request reached /hold")
            .unwrap()
            .forget();
    }

    /// Lets `n` requests held at `/hold` answer.
    pub fn release(&self, n: usize) {
        self.state.release.add_permits(n);
    }

    /// The headers of the last request the upstream received.
    pub fn last_headers(&self) -> HeaderMap {
        self.state
            .last_headers
            .lock()
            .unwrap()
            .clone()
            .expect("a request arrived")
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn handle(
    axum::extract::State(state): axum::extract::State<Arc<UpState>>,
    request: Request<axum::body::Body>,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let n = state.calls.fetch_add(1, Ordering::SeqCst) + 1;
    *state.last_headers.lock().unwrap() = Some(request.headers().clone());
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    let param = |name: &str| -> u64 {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    if let Some(code) = path.strip_prefix("/status/") {
        let code = StatusCode::from_u16(code.parse().unwrap()).unwrap();
        return (code, format!("status {} #{n}", code.as_u16())).into_response();
    }
    match path.as_str() {
        "/big" => {
            return (
                [("content-type", "text/plain")],
                vec![b'x'; param("bytes") as usize],
            )
                .into_response()
        }
        "/binary" => {
            return (
                [("content-type", "application/octet-stream")],
                vec![0u8, 159, 146, 150, 255, b'{', b'\n', n as u8],
            )
                .into_response()
        }
        "/slow" => tokio::time::sleep(Duration::from_millis(param("ms"))).await,
        p if p.starts_with("/hold") => {
            state.arrived.add_permits(1);
            state.release.acquire().await.unwrap().forget();
        }
        _ => {}
    }
    let json = serde_json::json!({
        "n": n,
        "method": parts.method.as_str(),
        "path": path,
        "query": query,
        "body": String::from_utf8_lossy(&body),
    });
    (
        StatusCode::CREATED,
        [
            ("content-type", "application/json; charset=utf-8".to_owned()),
            ("location", format!("/things/{n}")),
            ("set-cookie", format!("session=s{n}")),
            ("x-upstream", "yes".to_owned()),
            ("connection", "x-resp-hop".to_owned()),
            ("x-resp-hop", "1".to_owned()),
        ],
        json.to_string(),
    )
        .into_response()
}

/// A running `oncekey gateway`.
pub struct Gateway {
    child: Option<Child>,
    /// `http://ADDR` of the proxy port.
    pub url: String,
    /// `http://ADDR` of the admin port.
    pub admin: String,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Gateway {
    /// Starts `oncekey gateway` in front of `upstream`, on the ledger at `server` (tenant `gw`),
    /// with extra flags.
    pub fn start(upstream: &str, server: &str, extra: &[&str]) -> Gateway {
        Self::launch(
            upstream,
            &["--server", server, "--tenant", "gw"],
            extra,
            None,
        )
    }

    /// Starts `oncekey gateway` in front of `upstream` with the ledger connection flags `ledger`
    /// and extra flags; with `descriptors`, allowed at most that many open file descriptors
    /// (`ulimit -n`).
    pub fn launch(
        upstream: &str,
        ledger: &[&str],
        extra: &[&str],
        descriptors: Option<u64>,
    ) -> Gateway {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("stderr");
        let stderr = std::fs::File::create(&stderr_path).unwrap();
        let mut command = match descriptors {
            None => Command::new(oncekey_tests::binary()),
            Some(n) => {
                // `exec` keeps the pid, so kill9 and terminate still reach the gateway.
                let mut c = Command::new("bash");
                c.arg("-c")
                    .arg(format!(r#"ulimit -n {n} && exec "$0" "$@""#))
                    .arg(oncekey_tests::binary());
                c
            }
        };
        let mut child = command
            .args([
                "gateway",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ])
            .args(["--upstream", upstream])
            .args(ledger)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn oncekey gateway");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(PATIENCE).unwrap_or_default();
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .map(|a| format!("http://{a}"))
        };
        match (field("http="), field("admin=")) {
            (Some(url), Some(admin)) => Gateway {
                child: Some(child),
                url,
                admin,
                stderr_path,
                _dir: dir,
            },
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "oncekey gateway did not start; stderr:\n{}",
                    read(&stderr_path)
                );
            }
        }
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    /// SIGTERM; returns a thread that waits for the exit status.
    pub fn terminate(&mut self) -> std::thread::JoinHandle<ExitStatus> {
        let mut child = self.child.take().expect("running");
        Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        std::thread::spawn(move || {
            let deadline = Instant::now() + PATIENCE;
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    return status;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    panic!("oncekey gateway did not exit within {PATIENCE:?} of SIGTERM");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    }

    /// What the gateway wrote to stderr.
    pub fn stderr(&self) -> String {
        read(&self.stderr_path)
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!("oncekey gateway stderr:\n{}", self.stderr());
        }
    }
}

fn read(path: &std::path::Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text
}

/// An HTTP response, read whole.
#[derive(Debug, Clone)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// The headers.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

impl Resp {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// True when the gateway replayed a stored response.
    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// Asserts a problem+json answer with `status` and `slug` (the end of its `type`), and
    /// returns its body.
    pub fn problem(&self, status: u16, slug: &str) -> serde_json::Value {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "{self:?}"
        );
        let body = self.json();
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(
            body["type"],
            format!("urn:oncekey:gateway:{slug}"),
            "{body}"
        );
        assert!(
            body["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{body}"
        );
        assert!(body["detail"].as_str().is_some(), "{body}");
        body
    }
}

/// An HTTP client: HTTP/1.1, or HTTP/2 with prior knowledge (h2c).
#[derive(Clone)]
pub struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    /// An HTTP/1.1 client.
    pub fn h1() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// A cleartext HTTP/2 client.
    pub fn h2c() -> Http {
        Http {
            client: Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build_http(),
        }
    }

    /// Sends `request` and reads the whole answer.
    pub async fn send(&self, request: Request<Full<Bytes>>) -> Resp {
        self.try_send(request).await.expect("an HTTP answer")
    }

    /// Sends `request` and reads the whole answer; the error when the connection fails.
    pub async fn try_send(&self, request: Request<Full<Bytes>>) -> Result<Resp, String> {
        let response = tokio::time::timeout(PATIENCE, self.client.request(request))
            .await
            .expect("an answer in time")
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    /// `POST url` with `Idempotency-Key: key` (when given), a JSON body and extra headers.
    pub async fn post(
        &self,
        url: &str,
        key: Option<&str>,
        body: &str,
        extra: &[(&str, &str)],
    ) -> Resp {
        self.send(post_request(url, key, body, extra)).await
    }

    /// [`Http::post`], returning the error when the connection fails.
    pub async fn try_post(&self, url: &str, key: Option<&str>, body: &str) -> Result<Resp, String> {
        self.try_send(post_request(url, key, body, &[])).await
    }
}

fn post_request(
    url: &str,
    key: Option<&str>,
    body: &str,
    extra: &[(&str, &str)],
) -> Request<Full<Bytes>> {
    let mut b = Request::post(url).header("content-type", "application/json");
    if let Some(key) = key {
        b = b.header("idempotency-key", key);
    }
    for (k, v) in extra {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body.to_owned()))).unwrap()
}

/// The ledger key of `key` for a caller whose `--caller-header` value is `caller` (empty when
/// absent), computed here from the rule, not with the gateway's code.
pub fn ledger_key(caller: &str, key: &str) -> String {
    format!(
        "{}:{key}",
        &hex::encode(Sha256::digest(caller.as_bytes()))[..16]
    )
}

/// SHA-256 of a canonical JSON text written out by hand.
pub fn sha256(text: &str) -> Vec<u8> {
    Sha256::digest(text.as_bytes()).to_vec()
}

/// Retries `f` until it returns `Some`, at most [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
