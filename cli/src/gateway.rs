//! `oncekey gateway`: the HTTP Idempotency-Key gateway's command line — its own flags (the
//! `oncekey-gateway` crate's) plus the client commands' ledger connection (`--server`, `--token`,
//! `--tenant`, TLS). Everything else lives in that crate.

use crate::client::ConnArgs;
use crate::log_format::LogFormat;
use clap::Args;
use oncekey_server::settings::ConfigError;
use oncekey_server::telemetry;

/// `oncekey gateway`
#[derive(Debug, Clone, Args)]
pub struct GatewayCmd {
    /// The ledger.
    #[command(flatten)]
    conn: ConnArgs,
    /// The gateway.
    #[command(flatten)]
    gateway: oncekey_gateway::GatewayArgs,
    /// Log format.
    #[arg(
        long,
        env = "ONCEKEY_GATEWAY_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
}

/// Runs `oncekey gateway` until SIGTERM or SIGINT, then drains.
pub async fn run(cmd: GatewayCmd) -> anyhow::Result<()> {
    telemetry::init(cmd.log_format.into(), None).map_err(ConfigError)?;
    let options = oncekey_client::ConnectOptions {
        token: cmd.conn.token.clone(),
        tenant: cmd.conn.tenant.clone(),
        tls: cmd
            .conn
            .tls
            .options()
            .map_err(|e| ConfigError(e.to_string()))?,
        ..Default::default()
    };
    let ledger = oncekey_gateway::LedgerConnection {
        server: cmd.conn.server.clone(),
        options,
    };
    match oncekey_gateway::run(cmd.gateway, ledger, oncekey_gateway::shutdown_signal()).await {
        Err(oncekey_gateway::Error::Config(e)) => Err(ConfigError(e.0).into()),
        other => Ok(other?),
    }
}
