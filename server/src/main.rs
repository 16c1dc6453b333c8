//! The `oncekey` command: parses the command line and dispatches; everything else is in the library.
//! Exit codes: 0 success, 1 runtime failure, 64 bad configuration (the message names the flag),
//! 65 the embedded store's data is damaged or missing (the message says what and how to proceed,
//! e.g. `--accept-data-loss`).

use clap::Parser;
use oncekey_server::cli::client;
use oncekey_server::config::{Cli, Command, ConfigError, TokenCommand};
use oncekey_server::store::embedded::IntegrityError;
use oncekey_server::{serve, telemetry};
use std::process::ExitCode;

const EXIT_CONFIG: u8 = 64;
/// sysexits' EX_DATAERR: the data on disk, not the configuration, is wrong.
const EXIT_DATA: u8 = 65;

/// mimalloc instead of glibc's malloc: under load, glibc's arena locks and consolidation took
/// about a tenth of the server's CPU (see README, Performance).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return command_line_error(&e),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(dispatch(cli.command));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(config) = e.downcast_ref::<ConfigError>() {
                eprintln!("error: {config}");
                return ExitCode::from(EXIT_CONFIG);
            }
            if let Some(refusal) = e.downcast_ref::<IntegrityError>() {
                eprintln!("error: {refusal}");
                return ExitCode::from(EXIT_DATA);
            }
            match e.downcast_ref::<tonic::Status>() {
                Some(status) => eprintln!("error: {}", client::describe(status)),
                None => eprintln!("error: {e:#}"),
            }
            ExitCode::FAILURE
        }
    }
}

/// A command line clap refused: help and version as clap shows them; a malformed value, a missing
/// or unknown flag is bad configuration: one line naming the flag, exit 64.
fn command_line_error(e: &clap::Error) -> ExitCode {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    match e.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => {
            let text = |kind| match e.get(kind) {
                Some(ContextValue::String(s)) => Some(s.as_str()),
                _ => None,
            };
            // "--listen <LISTEN>" → "--listen"
            let flag = text(ContextKind::InvalidArg)
                .and_then(|arg| arg.split_whitespace().next())
                .unwrap_or("a flag");
            let value = text(ContextKind::InvalidValue).unwrap_or_default();
            let why = match (std::error::Error::source(e), e.get(ContextKind::ValidValue)) {
                (Some(source), _) => source.to_string(),
                (None, Some(ContextValue::Strings(valid))) if !valid.is_empty() => {
                    format!("expected one of {}", valid.join(", "))
                }
                _ if value.is_empty() => {
                    eprintln!("error: {flag} needs a value");
                    return ExitCode::from(EXIT_CONFIG);
                }
                _ => "not a valid value".to_owned(),
            };
            eprintln!("error: {flag}: invalid value {value:?}: {why}");
            ExitCode::from(EXIT_CONFIG)
        }
        _ => {
            // clap's message without its usage and tip lines, on one line.
            let rendered = e.render().to_string();
            let message: Vec<&str> = rendered
                .lines()
                .map(str::trim)
                .take_while(|line| !line.starts_with("Usage:"))
                .filter(|line| !line.is_empty() && !line.starts_with("tip:"))
                .collect();
            eprintln!("{} (see --help)", message.join(" "));
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<()> {
    let output = match command {
        Command::Serve(args) => {
            let otel = telemetry::init(args.log_format, args.otlp_endpoint.as_deref())
                .map_err(ConfigError)?;
            let result = serve::run(*args).await;
            if let Some(otel) = otel {
                tokio::task::spawn_blocking(move || otel.shutdown()).await?;
            }
            return result;
        }
        Command::Migrate(args) => return oncekey_server::store::cql::migrate::command(args).await,
        Command::Token(TokenCommand::New {
            tenant,
            label,
            scopes,
        }) => {
            let (token, line) =
                oncekey_server::cli::token::new_token_line(&tenant, label.as_deref(), &scopes)?;
            println!("token: {token}");
            println!("tokens-file line: {line}");
            return Ok(());
        }
        Command::Claim(cmd) => client::claim(cmd).await?,
        Command::Complete(cmd) => client::complete(cmd).await?,
        Command::Fail(cmd) => client::fail(cmd).await?,
        Command::Lookup(cmd) if cmd.history => {
            print!("{}", client::timeline(cmd).await?);
            return Ok(());
        }
        Command::Lookup(cmd) => client::lookup(cmd).await?,
        Command::Health(cmd) => client::health(cmd).await?,
        Command::Approve(cmd) => oncekey_server::cli::operations::approve(cmd).await?,
        Command::Reject(cmd) => oncekey_server::cli::operations::reject(cmd).await?,
        Command::Purge(cmd) => oncekey_server::cli::operations::purge(cmd).await?,
        Command::Bench(args) => return oncekey_server::bench::run(*args).await,
        Command::Gateway(cmd) => return oncekey_server::cli::gateway::run(*cmd).await,
    };
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(())
}
