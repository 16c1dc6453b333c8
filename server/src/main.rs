//! The `oncekey` command: parses the command line and dispatches; everything else is in the library.
//! Exit codes: 0 success, 1 runtime failure, 64 bad configuration (the message names the flag).

use clap::Parser;
use oncekey_server::cli::client;
use oncekey_server::config::{Cli, Command, ConfigError, TokenCommand};
use oncekey_server::{serve, telemetry};
use std::process::ExitCode;

const EXIT_CONFIG: u8 = 64;

/// mimalloc instead of glibc's malloc: under load, glibc's arena locks and consolidation took
/// about a tenth of the server's CPU (see README, Performance).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
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
            match e.downcast_ref::<tonic::Status>() {
                Some(status) => eprintln!("error: {}", client::describe(status)),
                None => eprintln!("error: {e:#}"),
            }
            ExitCode::FAILURE
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
        Command::Token(TokenCommand::New { tenant }) => {
            let (token, line) = oncekey_server::cli::token::new_token(&tenant)?;
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
        Command::Bench(args) => return oncekey_server::bench::run(*args).await,
        Command::Gateway(cmd) => return oncekey_server::cli::gateway::run(*cmd).await,
    };
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(())
}
