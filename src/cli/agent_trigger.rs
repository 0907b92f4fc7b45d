//! `stampede agent-trigger`: the log-trigger agent a fault with `trigger:` starts on a node
//! (not for use by hand).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::nemesis::trigger_action::Action;
use crate::nemesis::trigger_agent::{self, Firing, Server};

/// Arguments of `stampede agent-trigger`.
#[derive(Debug, clap::Args)]
pub struct AgentTriggerArgs {
    /// The server's log file to follow.
    #[arg(long)]
    log: PathBuf,
    /// The byte offset to follow it from (its size when the fault was armed).
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// The file holding the server's pid.
    #[arg(long)]
    pidfile: PathBuf,
    /// A string the server's command line contains.
    #[arg(long)]
    marker: String,
    /// The regular expression a line must match.
    #[arg(long)]
    pattern: String,
    /// KILL or STOP (signal the server), DROP (cut the node off from the `--drop-from`
    /// hosts), or LOSE (SIGKILL, then the layer of `--layer-port-file` loses unsynced data).
    #[arg(long)]
    action: String,
    /// The hosts a DROP drops packets from (the other servers).
    #[arg(long, value_delimiter = ',')]
    drop_from: Vec<String>,
    /// The file holding the lose-unfsynced layer's control port, for LOSE.
    #[arg(long)]
    layer_port_file: Option<PathBuf>,
    /// Wait between seeing the line and signalling, in milliseconds.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// A random extra wait, uniform from 0 to this many milliseconds.
    #[arg(long, default_value_t = 0)]
    jitter_ms: u64,
    /// Actions taken at most; the agent exits after the last.
    #[arg(long, default_value_t = 1)]
    count: u32,
    /// Chance that a matching line fires.
    #[arg(long, default_value_t = 1.0)]
    probability: f64,
    /// The file each firing is appended to, as a JSON line.
    #[arg(long)]
    record: PathBuf,
    /// How often the log is read, in microseconds.
    #[arg(long, default_value_t = 1000)]
    poll_us: u64,
}

/// Runs the agent until it has fired `count` times or is killed.
pub fn run(args: AgentTriggerArgs) -> anyhow::Result<ExitCode> {
    let action = match (args.action.as_str(), args.layer_port_file) {
        ("KILL", _) => Action::Signal(libc::SIGKILL),
        ("STOP", _) => Action::Signal(libc::SIGSTOP),
        ("DROP", _) if args.drop_from.is_empty() => {
            anyhow::bail!("--action DROP needs --drop-from")
        }
        ("DROP", _) => Action::Drop(args.drop_from),
        ("LOSE", Some(port_file)) => Action::PowerLoss(port_file),
        ("LOSE", None) => anyhow::bail!("--action LOSE needs --layer-port-file"),
        (other, _) => anyhow::bail!("--action {other:?}: KILL, STOP, DROP or LOSE"),
    };
    let firing = Firing {
        pattern: regex::Regex::new(&args.pattern).map_err(|e| anyhow::anyhow!("--pattern: {e}"))?,
        action,
        delay: Duration::from_millis(args.delay_ms),
        jitter: Duration::from_millis(args.jitter_ms),
        count: args.count,
        probability: args.probability,
    };
    let server = Server {
        pidfile: args.pidfile,
        marker: args.marker,
    };
    trigger_agent::run(
        &args.log,
        args.from,
        &server,
        &firing,
        &args.record,
        Duration::from_micros(args.poll_us),
    )?;
    Ok(ExitCode::SUCCESS)
}
