//! The `gateway` scenario: HTTP POSTs with a fresh `Idempotency-Key` each through an in-process
//! `oncekey gateway` (in front of an in-process upstream, on the ledger at `--server`), and the
//! same POSTs sent to that upstream directly. The difference is what the gateway costs a request:
//! its Claim, its Complete, and the extra HTTP hop.
//!
//! The upstream answers at once with `--body-bytes` bytes, so that the measurement is the
//! gateway's and not a service's. Gateway, upstream and workers share the bench's process (and the
//! machine): the numbers include that contention.

use super::args::BenchArgs;
use anyhow::Context as _;
use bytes::Bytes;
use clap::Parser;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use tokio::net::TcpListener;

/// The request body every POST carries (the same for every key: only the key changes).
const REQUEST_BODY: &str = r#"{"bench":"oncekey","amount":1250,"currency":"EUR"}"#;

/// The upstream and the gateway, running until dropped.
pub struct Rig {
    /// `http://ADDR` of the upstream.
    pub direct: String,
    /// `http://ADDR` of the gateway.
    pub gateway: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[derive(Parser)]
struct GatewayCli {
    #[command(flatten)]
    args: oncekey_gateway::GatewayArgs,
}

impl Rig {
    /// Starts the upstream and a gateway in front of it on the ledger the bench targets.
    pub async fn start(args: &BenchArgs) -> anyhow::Result<Rig> {
        let body = Bytes::from(vec![b'x'; args.body_bytes]);
        let upstream = TcpListener::bind("127.0.0.1:0").await?;
        let direct = format!("http://{}", upstream.local_addr()?);
        let app = axum::Router::new().fallback(move || {
            let body = body.clone();
            async move {
                (
                    StatusCode::CREATED,
                    [(http::header::CONTENT_TYPE, "application/json")],
                    body,
                )
            }
        });
        let upstream_task = tokio::spawn(async move {
            let _ = axum::serve(upstream, app).await;
        });
        let cli = GatewayCli::try_parse_from(["gateway", "--upstream", &direct])
            .context("gateway settings")?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let admin = TcpListener::bind("127.0.0.1:0").await?;
        let gateway = format!("http://{}", listener.local_addr()?);
        let ledger = oncekey_gateway::LedgerConnection {
            server: args.server.clone(),
            options: oncekey_client::ConnectOptions {
                token: args.token.clone(),
                tenant: Some(args.tenant.clone()),
                tls: args.tls.clone(),
                ..Default::default()
            },
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let gateway_task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(e) =
                oncekey_gateway::serve(cli.args, ledger, listener, admin, shutdown).await
            {
                eprintln!("bench: the gateway stopped: {e}");
            }
        });
        Ok(Rig {
            direct,
            gateway,
            stop: Some(stop),
            tasks: vec![upstream_task, gateway_task],
        })
    }

    /// A worker's connection: through the gateway (`keyed`) or to the upstream directly.
    pub fn worker(&self, keyed: bool, client: &HttpClient) -> HttpConn {
        let base = if keyed { &self.gateway } else { &self.direct };
        HttpConn {
            client: client.clone(),
            url: Arc::from(format!("{base}/v1/charges")),
            keyed,
        }
    }
}

/// The pooled HTTP/1.1 client the workers share.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A client with Nagle off and a pool per host.
pub fn client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

/// One worker's HTTP target.
pub struct HttpConn {
    client: HttpClient,
    url: Arc<str>,
    keyed: bool,
}

impl HttpConn {
    /// POSTs once (with `key` when keyed); anything but a fresh 201 is an error.
    pub async fn post(&mut self, key: String) -> Result<(), String> {
        let mut request = Request::post(&*self.url).header("content-type", "application/json");
        if self.keyed {
            request = request.header("idempotency-key", key);
        }
        let request = request
            .body(Full::new(Bytes::from_static(REQUEST_BODY.as_bytes())))
            .map_err(|e| e.to_string())?;
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| format!("http: {e}"))?;
        let status = response.status();
        let replayed = response.headers().contains_key("idempotent-replayed");
        // Read the whole body: the request is done when its answer is.
        let _ = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("http body: {e}"))?;
        if status != StatusCode::CREATED || replayed {
            return Err(format!(
                "HTTP {}{}",
                status.as_u16(),
                if replayed { " replayed" } else { "" }
            ));
        }
        Ok(())
    }
}
