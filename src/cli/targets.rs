//! Which nodes a command acts on: `--nodes`, `--nodes-file`, or the local cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;

use crate::cluster::{self, Cluster};
use crate::control::{self, Control, HostKeyPolicy, SshOptions};

/// Options that pick the nodes and how to reach them.
#[derive(Debug, Clone, clap::Args)]
pub struct TargetArgs {
    /// Nodes as a comma-separated list of `[user@]host[:port]`.
    #[arg(long, conflicts_with = "nodes_file", global = true)]
    pub nodes: Option<String>,
    /// A file with one node per line: `[name] [user@]host[:port]`.
    #[arg(long, global = true)]
    pub nodes_file: Option<PathBuf>,
    /// SSH user for nodes that do not name one.
    #[arg(long, default_value = "root", global = true)]
    pub ssh_user: String,
    /// SSH private key (default: ~/.ssh/id_ed25519, id_ecdsa, id_rsa, then the agent).
    #[arg(long, global = true)]
    pub ssh_key: Option<PathBuf>,
    /// known_hosts file for real nodes (default: ~/.ssh/known_hosts).
    #[arg(long, global = true)]
    pub known_hosts: Option<PathBuf>,
    /// The local cluster to use when no nodes are given.
    #[arg(long, env = "STAMPEDE_CLUSTER", default_value = cluster::DEFAULT_NAME, global = true)]
    pub cluster: String,
}

impl TargetArgs {
    /// Whether the nodes come from the local cluster (no --nodes or --nodes-file).
    pub fn uses_local_cluster(&self) -> bool {
        self.nodes.is_none() && self.nodes_file.is_none()
    }

    /// A controller for the selected nodes.
    pub fn control(&self) -> anyhow::Result<Control> {
        if self.uses_local_cluster() {
            let cluster = Cluster::named(&self.cluster);
            if !cluster.exists() {
                bail!(
                    "no nodes: pass --nodes or --nodes-file, or make the local cluster with `stampede cluster up`"
                );
            }
            return Ok(Control::new(cluster.nodes()?, cluster.ssh_options()));
        }
        let nodes = match (&self.nodes, &self.nodes_file) {
            (Some(list), _) => control::parse_list(list, &self.ssh_user)?,
            (None, Some(file)) => control::read_nodes_file(file, &self.ssh_user)?,
            (None, None) => unreachable!("checked by uses_local_cluster"),
        };
        if let Some(key) = &self.ssh_key {
            control::check_key_file(key)?;
        }
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/root"));
        let known_hosts = self
            .known_hosts
            .clone()
            .unwrap_or_else(|| home.join(".ssh/known_hosts"));
        let opts = SshOptions {
            key: self.ssh_key.clone(),
            known_hosts,
            policy: HostKeyPolicy::Strict,
            connect_timeout: Duration::from_secs(10),
        };
        Ok(Control::new(nodes, opts))
    }
}
