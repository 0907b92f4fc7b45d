//! What faults of an earlier run left on a node (a controller killed before it healed them):
//! each fault kind's own probe, asked in one command per node.

use super::{clock, corrupt, packet, partition, reconfig, trigger};
use crate::control::{Control, Node, Retry};

/// The faults left on `node`, one phrase each (`partition rules`, `packet-fault agent`, …);
/// empty when there are none.
pub async fn on_node(control: &Control, node: &Node) -> anyhow::Result<Vec<String>> {
    let probes = [
        partition::LEFTOVER_PROBE.to_string(),
        packet::leftover_probe(node),
        trigger::leftover_probe(node),
        clock::leftover_probe(),
        corrupt::leftover_probe(node),
        reconfig::leftover_probe(node),
    ];
    let said = control
        .exec(node, &probes.join("; "), Retry::Idempotent)
        .await?;
    Ok(said
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// Boots `node` again if it is a guest whose power an earlier run cut; returns whether it had
/// to (until then it cannot answer).
pub async fn boot_if_off(control: &Control, node: &Node) -> anyhow::Result<bool> {
    super::power::power_on(control, node).await
}
