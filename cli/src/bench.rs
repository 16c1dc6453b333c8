//! `oncekey bench`: the load generator's flags (the `oncekey-bench` crate's) plus the client
//! commands' TLS flags; everything else lives in that crate.

use crate::client::TlsArgs;
use clap::Args;

/// `oncekey bench`
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
pub async fn run(cmd: BenchCmd) -> anyhow::Result<()> {
    let mut bench = cmd.bench;
    bench.tls = cmd.tls.options()?;
    oncekey_bench::run(bench).await
}
