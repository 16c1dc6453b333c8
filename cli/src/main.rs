//! The `oncekey` command: parses the command line and dispatches to the crates that do the work
//! (`oncekey-server`, `oncekey-bench`, `oncekey-gateway`, `oncekey-console`, the client). Exit codes: 0 success, 1
//! runtime failure, 64 bad configuration (the message names the flag), 65 the embedded store's
//! data is damaged or missing (the message says what and how to proceed, e.g.
//! `--accept-data-loss`), 69 the CQL cluster did not become available in time; see `exit`.

mod args;
mod bench;
mod client;
mod console;
mod exit;
mod gateway;
mod log_format;
mod migrate;
mod operations;
mod protect;
mod records;
mod render;
mod token;

use args::{Cli, Command, TokenCommand};
use clap::Parser;
use oncekey_server::settings::ConfigError;
use oncekey_server::testing::TestKnobs;
use oncekey_server::{serve, telemetry};
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: under load, glibc's arena locks and consolidation took
/// about a tenth of the server's CPU in a profile of the cycle scenario.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return exit::command_line_error(&e),
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
    match runtime.block_on(dispatch(cli.command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => exit::report(&e),
    }
}

async fn dispatch(command: Command) -> anyhow::Result<()> {
    let output = match command {
        Command::Serve(args) => {
            let config = args.config(TestKnobs::from_env()?);
            let otel = telemetry::init(args.log_format.into(), args.otlp_endpoint.as_deref())
                .map_err(ConfigError)?;
            let result = serve::run(config).await;
            if let Some(otel) = otel {
                tokio::task::spawn_blocking(move || otel.shutdown()).await?;
            }
            return Ok(result?);
        }
        Command::Migrate(args) => return migrate::run(args.config()).await,
        Command::Token(TokenCommand::New {
            tenant,
            label,
            scopes,
        }) => return token::new(&tenant, label.as_deref(), &scopes),
        Command::Claim(cmd) => client::claim(cmd).await?,
        Command::Complete(cmd) => client::complete(cmd).await?,
        Command::Fail(cmd) => client::fail(cmd).await?,
        Command::Lookup(cmd) if cmd.history => {
            print!("{}", client::timeline(cmd).await?);
            return Ok(());
        }
        Command::Lookup(cmd) => client::lookup(cmd).await?,
        Command::Records(records::RecordsCommand::List(cmd)) => {
            print!("{}", records::list(cmd).await?);
            return Ok(());
        }
        Command::Health(cmd) => client::health(cmd).await?,
        Command::Approve(cmd) => operations::approve(cmd).await?,
        Command::Reject(cmd) => operations::reject(cmd).await?,
        Command::Purge(cmd) => operations::purge(cmd).await?,
        Command::Rekey(cmd) => return protect::rekey(cmd).await,
        Command::EraseTenant(cmd) => protect::erase_tenant(cmd).await?,
        Command::NewKey(cmd) => return protect::new_key(&cmd),
        Command::Bench(cmd) => return bench::run(*cmd).await,
        Command::Gateway(cmd) => return gateway::run(*cmd).await,
        Command::Console(cmd) => return console::run(*cmd).await,
    };
    println!("{}", render::json_text(&output)?);
    Ok(())
}
