//! `stampede agent-netem`: the packet-fault agent the packet nemesis starts on a node whose
//! kernel has no netem (not for use by hand).

use std::process::ExitCode;
use std::time::Duration;

use crate::nemesis::nfqueue::{self, Shaping};

/// Arguments of `stampede agent-netem`.
#[derive(Debug, clap::Args)]
pub struct AgentArgs {
    /// The NFQUEUE number to serve.
    #[arg(long)]
    queue: u16,
    /// Delay added to each packet, in milliseconds.
    #[arg(long, default_value_t = 0)]
    delay_ms: u64,
    /// Uniform variation of the delay, ± milliseconds.
    #[arg(long, default_value_t = 0)]
    jitter_ms: u64,
    /// Probability of dropping a packet, from 0 to 1.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
}

/// Runs the agent until it is killed.
pub fn run(args: AgentArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.loss),
        "--loss {} is not a probability from 0 to 1",
        args.loss
    );
    let shaping = Shaping {
        delay: Duration::from_millis(args.delay_ms),
        jitter: Duration::from_millis(args.jitter_ms),
        loss: args.loss,
    };
    nfqueue::run(args.queue, shaping).map_err(|e| anyhow::anyhow!("queue {}: {e}", args.queue))?;
    Ok(ExitCode::SUCCESS)
}
