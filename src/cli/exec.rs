//! `stampede exec`: run a shell command as root on nodes, over SSH.

use std::process::ExitCode;
use std::time::Duration;

use super::targets::TargetArgs;
use crate::control::Retry;

/// Arguments of `stampede exec`.
#[derive(Debug, clap::Args)]
pub struct ExecArgs {
    /// Only this node (by name); default: every node, at once.
    #[arg(long)]
    node: Option<String>,
    /// Time limit per node, in seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// The command line, run by the remote shell.
    #[arg(required = true, trailing_var_arg = true)]
    command: Vec<String>,
    #[command(flatten)]
    targets: TargetArgs,
}

/// Runs `stampede exec`: prints each node's output prefixed by its name; exits 1 if any
/// node's command failed.
pub async fn run(args: ExecArgs) -> anyhow::Result<ExitCode> {
    let control = args.targets.control()?;
    let nodes: Vec<_> = match &args.node {
        Some(name) => {
            let node = control.nodes().iter().find(|n| &n.name == name);
            vec![node
                .ok_or_else(|| anyhow::anyhow!("--node {name}: no such node"))?
                .clone()]
        }
        None => control.nodes().to_vec(),
    };
    let command = args.command.join(" ");
    let timeout = Duration::from_secs(args.timeout);
    let runs = nodes
        .iter()
        .map(|n| control.run(n, &command, timeout, Retry::Once));
    let mut all_ok = true;
    for (node, result) in nodes.iter().zip(futures::future::join_all(runs).await) {
        match result {
            Ok(out) => {
                for line in out.stdout_text().lines() {
                    println!("{}: {line}", node.name);
                }
                for line in out.stderr_text().lines() {
                    eprintln!("{}: {line}", node.name);
                }
                if out.status != 0 {
                    all_ok = false;
                    eprintln!("{}: exit status {}", node.name, out.status);
                }
            }
            Err(e) => {
                all_ok = false;
                eprintln!("{}: error: {e:#}", node.name);
            }
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
