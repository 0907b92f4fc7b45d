//! The stampede binary on the nodes: faults that must act on a node faster or longer than an
//! SSH command allows (packet shaping without netem, and the like) run it there as an agent.

use anyhow::Context;

use crate::control::{Control, Node, Retry};

/// Where the stampede binary is put on nodes to run agents.
pub const AGENT_PATH: &str = "/var/lib/stampede/bin/stampede";

/// Puts this stampede binary at [`AGENT_PATH`] on `node`, unless a file of the same size is
/// there already, and returns that path.
pub async fn install(control: &Control, node: &Node) -> anyhow::Result<&'static str> {
    let binary = std::env::current_exe().context("cannot find the stampede binary to upload")?;
    let size = std::fs::metadata(&binary)?.len();
    let present = control
        .exec(
            node,
            &format!("stat -c %s {AGENT_PATH} 2>/dev/null || true"),
            Retry::Idempotent,
        )
        .await?;
    if present != size.to_string() {
        control
            .exec(node, "mkdir -p /var/lib/stampede/bin", Retry::Idempotent)
            .await?;
        let data =
            std::fs::read(&binary).with_context(|| format!("cannot read {}", binary.display()))?;
        control.upload(node, data, AGENT_PATH, 0o755).await?;
    }
    Ok(AGENT_PATH)
}
