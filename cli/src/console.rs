//! `oncekey console`: the operator console's command line — its own flags (the
//! `oncekey-console` crate's) plus `--server` and the client TLS flags. Operators sign in with
//! their own tokens in the browser, so there is no `--token` here.

use crate::client::TlsArgs;
use crate::log_format::LogFormat;
use clap::Args;
use oncekey_server::settings::ConfigError;
use oncekey_server::telemetry;

/// `oncekey console`
#[derive(Debug, Clone, Args)]
pub struct ConsoleCmd {
    /// The ledger's gRPC address.
    #[arg(long, env = "ONCEKEY_SERVER", default_value = "http://127.0.0.1:50051")]
    server: String,
    /// TLS to the ledger.
    #[command(flatten)]
    tls: TlsArgs,
    /// The console.
    #[command(flatten)]
    console: oncekey_console::ConsoleArgs,
    /// Log format.
    #[arg(
        long,
        env = "ONCEKEY_CONSOLE_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
}

/// Runs `oncekey console` until SIGTERM or SIGINT, then drains.
pub async fn run(cmd: ConsoleCmd) -> anyhow::Result<()> {
    telemetry::init(cmd.log_format.into(), None).map_err(ConfigError)?;
    let ledger = oncekey_console::LedgerConnection {
        server: cmd.server,
        tls: cmd.tls.options().map_err(|e| ConfigError(e.to_string()))?,
    };
    match oncekey_console::run(cmd.console, ledger, oncekey_gateway::shutdown_signal()).await {
        Err(oncekey_console::Error::Config(e)) => Err(ConfigError(e.0).into()),
        other => Ok(other?),
    }
}
