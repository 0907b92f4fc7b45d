//! The stampede binary on the nodes: faults that must act on a node faster or longer than an
//! SSH command allows (packet shaping without netem, log triggers, the un-fsynced-data layer,
//! file damage) run it there as an agent.

use anyhow::Context;

use crate::control::{Control, Node, Retry};

/// The folder on nodes where stampede binaries are put to run agents.
pub const AGENT_DIR: &str = "/var/lib/stampede/bin";

/// Puts this stampede binary on `node`, at a path of [`AGENT_DIR`] named by its size unless a
/// file of that size is there already, and returns the path. Local nodes share one disk with
/// every controller on the host: a path of each binary's own means that no other controller's
/// upload (another checkout's build) replaces the agent a fault is about to start.
pub async fn install(control: &Control, node: &Node) -> anyhow::Result<String> {
    let binary = std::env::current_exe().context("cannot find the stampede binary to upload")?;
    let size = std::fs::metadata(&binary)?.len();
    let path = format!("{AGENT_DIR}/stampede-{size}");
    let present = control
        .exec(
            node,
            &format!("stat -c %s {path} 2>/dev/null || true"),
            Retry::Idempotent,
        )
        .await?;
    if present != size.to_string() {
        control
            .exec(node, &format!("mkdir -p {AGENT_DIR}"), Retry::Idempotent)
            .await?;
        let data =
            std::fs::read(&binary).with_context(|| format!("cannot read {}", binary.display()))?;
        control.upload(node, data, &path, 0o755).await?;
    }
    Ok(path)
}
