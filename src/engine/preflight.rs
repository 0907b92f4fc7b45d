//! A run starts from a clean cluster: before anything is set up, every node is asked for what
//! an earlier run may have left (a controller killed before it healed, a run with
//! `--keep-db`): faults and their agents, servers of any database stampede runs, their files,
//! fake clocks and mounts. What is found is said and removed; what cannot be removed stops the
//! run with one line naming the node, the leftover and `stampede heal`.

use crate::control::{Control, Node};
use crate::db::{self, Db};
use crate::nemesis::{self, Restart};

/// What a run clears before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Faults and servers: the run sets up its own database (`stampede test`).
    Everything,
    /// Faults only: the run acts on servers set up by hand (`stampede nemesis run`).
    Faults,
}

/// What was found on one node.
struct Found {
    node: Node,
    faults: Vec<String>,
    /// Per database kind (in the order of `footprints`), what of its servers is there.
    servers: Vec<Vec<String>>,
}

impl Found {
    fn is_empty(&self) -> bool {
        self.faults.is_empty() && self.servers.iter().all(Vec::is_empty)
    }

    /// `n2: partition rules, zookeeper server running`.
    fn line(&self) -> String {
        let all: Vec<&str> = self
            .faults
            .iter()
            .chain(self.servers.iter().flatten())
            .map(String::as_str)
            .collect();
        format!("{}: {}", self.node.name, all.join(", "))
    }
}

/// Clears `control`'s nodes of what earlier runs left, as `scope` says, for a run of `db`.
/// Returns one line per node where something was found (and removed); an error when a node
/// does not answer or keeps a leftover.
pub async fn clear(control: &Control, db: &dyn Db, scope: Scope) -> anyhow::Result<Vec<String>> {
    let mut booted = Vec::new();
    for node in control.nodes() {
        if nemesis::leftovers::boot_if_off(control, db, node).await? {
            booted.push(format!("{}: guest powered off (booted)", node.name));
        }
    }
    let others = match scope {
        Scope::Everything => db::every_kind(control.nodes())?,
        Scope::Faults => Vec::new(),
    };
    let footprints: Vec<&dyn Db> = match scope {
        Scope::Everything => std::iter::once(db)
            .chain(
                others
                    .iter()
                    .map(|d| d.as_ref())
                    .filter(|d| d.name() != db.name()),
            )
            .collect(),
        Scope::Faults => Vec::new(),
    };
    let found = survey(control, &footprints).await?;
    let mut lines = booted;
    if found.iter().all(Found::is_empty) {
        return Ok(lines);
    }
    lines.extend(found.iter().filter(|f| !f.is_empty()).map(Found::line));
    let restart = match scope {
        Scope::Everything => Restart::Nothing,
        Scope::Faults => Restart::Servers,
    };
    nemesis::heal(control, db, restart).await?;
    for (i, kind) in footprints.iter().enumerate() {
        if found.iter().any(|f| !f.servers[i].is_empty()) {
            kind.teardown(control).await?;
        }
    }
    let left: Vec<String> = survey(control, &footprints)
        .await?
        .iter()
        .filter(|f| !f.is_empty())
        .map(Found::line)
        .collect();
    if let Some(first) = left.first() {
        anyhow::bail!(
            "{first}: still there after clearing what an earlier run left; run `stampede heal` \
             (and `stampede db teardown`), then try again"
        );
    }
    Ok(lines)
}

/// Asks every node at once what is left on it; a node that does not answer is an error
/// naming it.
async fn survey(control: &Control, footprints: &[&dyn Db]) -> anyhow::Result<Vec<Found>> {
    let asks = control.nodes().iter().map(|node| async move {
        let faults = nemesis::leftovers::on_node(control, node).await?;
        let mut servers = Vec::new();
        for kind in footprints {
            servers.push(db::leftovers(*kind, control, node).await?);
        }
        anyhow::Ok(Found {
            node: node.clone(),
            faults,
            servers,
        })
    });
    let mut found = Vec::new();
    for (node, result) in control
        .nodes()
        .iter()
        .zip(futures::future::join_all(asks).await)
    {
        let answer = result.map_err(|e| super::unanswered(node, e))?;
        found.push(answer);
    }
    Ok(found)
}
