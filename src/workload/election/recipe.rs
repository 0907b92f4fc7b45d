//! The election recipes behind one interface: campaign until elected, resign.

use zookeeper_client::{Acls, Client, CreateMode, Error};

use super::{fair, unfair, ElectionRecipe};
use crate::client::{NoNodeIsLost, OpError};
use crate::workload::Requests;

/// A term a candidate won.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Won {
    /// The czxid of the znode that made the candidate leader.
    pub token: i64,
    /// The znodes to delete on resignation, in order.
    pub nodes: Vec<String>,
}

/// One election recipe over the znodes of one test run.
#[derive(Debug, Clone)]
pub struct Recipe {
    kind: ElectionRecipe,
    dir: String,
}

impl Recipe {
    /// The recipe `kind` for test run `run_id` (one znode name), under
    /// `/stampede/<run_id>/election`.
    pub fn new(kind: ElectionRecipe, run_id: &str) -> anyhow::Result<Recipe> {
        if run_id.is_empty() || run_id.contains('/') {
            anyhow::bail!("run id {run_id:?} must be a non-empty znode name without '/'");
        }
        Ok(Recipe {
            kind,
            dir: format!("/stampede/{run_id}/election"),
        })
    }

    /// The persistent znode the election's nodes live under.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// Creates the election's persistent znodes.
    pub async fn setup(&self, client: &Client) -> Result<(), Error> {
        let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
        client.mkdir(&self.dir, &options).await?;
        if self.kind == ElectionRecipe::Fair {
            client.mkdir(&fair::candidates(&self.dir), &options).await?;
        }
        Ok(())
    }

    /// Campaigns until `client`'s session is elected; `identity` is stored in the nodes it
    /// creates.
    pub async fn campaign(
        &self,
        client: &Client,
        identity: &str,
        req: &mut Requests<'_>,
    ) -> Result<Won, OpError> {
        match self.kind {
            ElectionRecipe::Unfair => unfair::campaign(&self.dir, client, identity, req).await,
            ElectionRecipe::Fair => fair::campaign(&self.dir, client, identity, req).await,
        }
    }

    /// Resigns a won term by deleting its nodes (the acknowledgement first). They are
    /// ephemeral on our session, which answers: a `no-node` answer is a loss of acknowledged
    /// state.
    pub async fn resign(
        &self,
        client: &Client,
        won: &Won,
        req: &mut Requests<'_>,
    ) -> Result<(), OpError> {
        for node in &won.nodes {
            req.send(client.delete(node, None))
                .await
                .no_node_is_lost(|| format!("our node {node} is gone though our session lives"))?;
        }
        Ok(())
    }
}

/// The fact a `no-node` answer on a directory created at setup states.
pub fn dir_gone(dir: &str) -> String {
    format!("the election directory {dir}, created at setup and never deleted, is gone")
}
