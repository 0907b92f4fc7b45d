//! What faults of an earlier run left on a node (a controller killed before it healed them):
//! each fault kind's own probe, asked in one command per node.

use super::{trigger, HealStage, KINDS};
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// The faults left on `node`, one phrase each (`partition rules`, `packet-fault agent`, …);
/// empty when there are none.
pub async fn on_node(control: &Control, node: &Node) -> anyhow::Result<Vec<String>> {
    let mut probes = vec![trigger::leftover_probe(node)];
    probes.extend(KINDS.iter().filter_map(|k| k.leftover_probe(node)));
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

/// Brings `node`'s machine back if an earlier run's fault took it down (a guest whose power
/// was cut, booted again); returns whether it had to (until then it cannot answer).
pub async fn boot_if_off(control: &Control, db: &dyn Db, node: &Node) -> anyhow::Result<bool> {
    let done = super::heal::heal_stages(control, db, node, |s| s == HealStage::Machine).await?;
    Ok(!done.is_empty())
}
