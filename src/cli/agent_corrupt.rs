//! `stampede agent-corrupt`: damages a server's data file where it lies, for the corrupt
//! nemesis (not for use by hand); prints what it did as JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::nemesis::corrupt::{self, How};

/// Arguments of `stampede agent-corrupt`.
#[derive(Debug, clap::Args)]
pub struct AgentCorruptArgs {
    /// The file to damage.
    #[arg(long)]
    file: PathBuf,
    /// flip, zero or truncate.
    #[arg(long, value_enum)]
    how: How,
    /// How many bytes of its data to damage.
    #[arg(long)]
    bytes: u64,
}

/// Damages the file and prints the [`corrupt::Damage`] done.
pub fn run(args: AgentCorruptArgs) -> anyhow::Result<ExitCode> {
    let done = corrupt::damage(&args.file, args.how, args.bytes, &mut rand::thread_rng())
        .with_context(|| format!("cannot damage {}", args.file.display()))?;
    println!("{}", serde_json::to_string(&done)?);
    Ok(ExitCode::SUCCESS)
}
