//! `oncekey bench`: the load generator's flags (the `oncekey-bench` crate's) plus the client
//! commands' TLS flags; everything else lives in that crate. A binary built without the `bench`
//! feature (the container image's) keeps the command, which then only says so.

#[cfg(feature = "bench")]
use crate::client::TlsArgs;
use clap::Args;

/// `oncekey bench` in a binary built without the bench: takes any arguments, runs nothing.
#[cfg(not(feature = "bench"))]
#[derive(Debug, Clone, Args)]
pub struct BenchCmd {
    /// The bench's flags (ignored).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<String>,
}

/// Says that this binary has no bench (the image ships only what serves): a usage error.
#[cfg(not(feature = "bench"))]
pub async fn run(_cmd: BenchCmd) -> anyhow::Result<()> {
    Err(oncekey_server::settings::ConfigError(
        "this oncekey was built without the bench (the container image carries only what serves): \
         run `oncekey bench` from a build with the default features (`cargo build -p oncekey`)"
            .into(),
    )
    .into())
}

/// `oncekey bench`
#[cfg(feature = "bench")]
#[derive(Debug, Clone, Args)]
pub struct BenchCmd {
    /// The load generator.
    #[command(flatten)]
    bench: oncekey_bench::BenchArgs,
    /// TLS to the server (with an `https://` --server), as for the client commands.
    #[command(flatten)]
    tls: TlsArgs,
}

/// Runs the bench; fails when the server cannot be reached or any measured op failed.
#[cfg(feature = "bench")]
pub async fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    let mut bench = cmd.bench;
    bench.tls = cmd.tls.options()?;
    oncekey_bench::run(bench).await
}
