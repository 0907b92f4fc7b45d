//! `stampede agent-lazyfs`: the un-fsynced-data layer on a node, run by the lose-unfsynced
//! nemesis (not for use by hand): mounts a layer and serves it until it is unmounted.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::nemesis::lazyfs::serve;

/// Arguments of `stampede agent-lazyfs`.
#[derive(Debug, clap::Args)]
pub struct AgentLazyfsArgs {
    /// The directory that holds the files.
    #[arg(long)]
    backing: PathBuf,
    /// Where the layer is mounted (the server's data directory).
    #[arg(long)]
    mount: PathBuf,
    /// Where the agent writes the loopback port it takes commands on.
    #[arg(long)]
    port_file: PathBuf,
}

/// Runs the agent until its layer is unmounted.
pub fn run(args: AgentLazyfsArgs) -> anyhow::Result<ExitCode> {
    serve::run(&args.backing, &args.mount, &args.port_file)?;
    Ok(ExitCode::SUCCESS)
}
