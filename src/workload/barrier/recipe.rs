//! The double barrier recipe of ZooKeeper's recipes page over the round nodes of one test run.
//!
//! A round's barrier node `b` holds an ephemeral child `p-<process>` for each process in the
//! round and, once enough processes arrived, the persistent node `ready`.
//!
//! - Enter: set an exists watch on `b/ready`, create `b/p-<process>`, list the children; with
//!   fewer than the threshold (not counting `ready`) wait for the watch, else create `ready`.
//!   A process that finds `ready` already there when it sets the watch passes at once.
//! - Leave: list the children (not counting `ready`); none: done; only our own: delete it,
//!   done; ours is the lowest: wait for the highest to go; else delete ours if it is still
//!   there and wait for the lowest to go; list again.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

/// The node that says a round's barrier is open.
const READY: &str = "ready";
/// The prefix of a process's node in a round.
const PREFIX: &str = "p-";

/// Deliberate mistakes, to prove against real ZooKeeper that the checker catches them.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flaw {
    /// Open the barrier when one process fewer than the threshold has arrived.
    EnterOneEarly,
    /// Leave by deleting our own node, without waiting for the others.
    LeaveWithoutWaiting,
}

/// The double barrier of one test run, under `/stampede/<run_id>/barrier`.
#[derive(Debug, Clone)]
pub struct Recipe {
    dir: String,
    threshold: usize,
    #[cfg(test)]
    flaw: Option<Flaw>,
}

impl Recipe {
    /// The barrier for test run `run_id` (one znode name) that opens once `threshold`
    /// processes entered.
    pub fn new(run_id: &str, threshold: usize) -> anyhow::Result<Recipe> {
        let dir = crate::workload::run_path(run_id, "barrier")?;
        anyhow::ensure!(threshold > 0, "a barrier needs a threshold of at least 1");
        Ok(Recipe {
            dir,
            threshold,
            #[cfg(test)]
            flaw: None,
        })
    }

    /// The same barrier with a deliberate mistake.
    #[cfg(test)]
    pub fn with_flaw(self, flaw: Flaw) -> Recipe {
        Recipe {
            flaw: Some(flaw),
            ..self
        }
    }

    /// The persistent znode the rounds live under.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The barrier node of round `round`.
    pub fn round_node(&self, round: u64) -> String {
        format!("{}/round-{round}", self.dir)
    }

    /// Creates the persistent znode the rounds live under.
    pub async fn setup(&self, client: &Client) -> Result<(), Error> {
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        client.mkdir(&self.dir, &options).await
    }

    /// How many nodes open the barrier.
    fn needed(&self) -> usize {
        #[cfg(test)]
        if self.flaw == Some(Flaw::EnterOneEarly) {
            return self.threshold - 1;
        }
        self.threshold
    }

    /// Enters round `round` as `process`: returns once the barrier is open.
    pub async fn enter(
        &self,
        client: &Client,
        round: u64,
        process: u64,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        let b = self.round_node(round);
        create_persistent(client, &b, req)
            .await
            .no_node_is_lost(|| gone(&self.dir))?;
        let ready = format!("{b}/{READY}");
        let (open, watcher) = req.send(client.check_and_watch_stat(&ready)).await?;
        let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        let mine = format!("{b}/{PREFIX}{process}");
        req.send(client.create(&mine, b"", &ephemeral))
            .await
            .no_node_is_lost(|| gone(&b))?;
        if open.is_some() {
            return Ok(());
        }
        let listed = req.send(client.list_children(&b)).await;
        let arrived = processes(&listed.no_node_is_lost(|| gone(&b))?).len();
        if arrived < self.needed() {
            return req.wait(watcher).await;
        }
        create_persistent(client, &ready, req).await
    }

    /// Leaves round `round` as `process`: returns once every process in the round left.
    pub async fn leave(
        &self,
        client: &Client,
        round: u64,
        process: u64,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        let b = self.round_node(round);
        let mine = format!("{b}/{PREFIX}{process}");
        #[cfg(test)]
        if self.flaw == Some(Flaw::LeaveWithoutWaiting) {
            return req.send(client.delete(&mine, None)).await;
        }
        // Our node is ephemeral on our session, which answers: until we delete it, a `no-node`
        // answer on it is a loss of acknowledged state.
        let mine_gone = || format!("our node {mine} is gone though our session lives");
        let mut deleted = false;
        loop {
            let listed = req.send(client.list_children(&b)).await;
            let present = processes(&listed.no_node_is_lost(|| gone(&b))?);
            let (Some(&lowest), Some(&highest)) = (present.first(), present.last()) else {
                return Ok(());
            };
            if present == [process] {
                let deleting = req.send(client.delete(&mine, None)).await;
                return deleting.no_node_is_lost(mine_gone);
            }
            let awaited = if lowest == process {
                highest
            } else {
                if !deleted {
                    let deleting = req.send(client.delete(&mine, None)).await;
                    deleting.no_node_is_lost(mine_gone)?;
                    deleted = true;
                }
                lowest
            };
            let node = format!("{b}/{PREFIX}{awaited}");
            if let (Some(_), watcher) = req.send(client.check_and_watch_stat(&node)).await? {
                req.wait(watcher).await?;
            }
        }
    }
}

/// The fact a `no-node` answer on a persistent node (the barrier's directory, a round's node
/// once created) states.
fn gone(node: &str) -> String {
    format!("the persistent node {node}, created and never deleted, is gone")
}

/// Creates the empty persistent node `path` unless it is there already.
async fn create_persistent(
    client: &Client,
    path: &str,
    req: &mut Requests<'_>,
) -> Result<(), OpError> {
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    match req.send(client.create(path, b"", &persistent)).await {
        Ok(_) | Err(OpError::Zk(Error::NodeExists)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The processes whose nodes are among `children`, lowest first (`ready` and anything else
/// left out).
fn processes(children: &[String]) -> Vec<u64> {
    let mut found: Vec<u64> = children
        .iter()
        .filter_map(|c| c.strip_prefix(PREFIX)?.parse().ok())
        .collect();
    found.sort_unstable();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_are_ordered_by_number_without_ready() {
        let children = ["p-10", "ready", "p-9", "p-100", "x-1"].map(String::from);
        assert_eq!(processes(&children), [9, 10, 100]);
        assert!(processes(&[READY.to_string()]).is_empty());
    }

    #[test]
    fn rounds_have_nodes_of_their_own() {
        let recipe = Recipe::new("run-1", 3).unwrap();
        assert_eq!(recipe.dir(), "/stampede/run-1/barrier");
        assert_eq!(recipe.round_node(7), "/stampede/run-1/barrier/round-7");
        assert!(Recipe::new("a/b", 3).is_err());
        assert!(Recipe::new("run-1", 0).is_err());
    }
}
