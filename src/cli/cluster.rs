//! `stampede cluster up|down|status`: the local cluster of namespace nodes.

use std::process::ExitCode;

use crate::cluster::{self, Spec};

/// Arguments of `stampede cluster`.
#[derive(Debug, clap::Args)]
pub struct ClusterArgs {
    #[command(subcommand)]
    action: Action,
    /// The cluster's name (prefix of its namespaces, veths and bridge).
    #[arg(long, env = "STAMPEDE_CLUSTER", default_value = cluster::DEFAULT_NAME, global = true)]
    name: String,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Make (or repair) the cluster: namespaces, bridge, sshd per node, keys, nodes file.
    Up {
        /// Number of nodes.
        #[arg(long, default_value_t = 5)]
        nodes: usize,
        /// The cluster's private /24 [default: an existing cluster's own, else the first
        /// free one of 10.241.0.0/16].
        #[arg(long)]
        subnet: Option<String>,
    },
    /// Remove everything `up` made.
    Down,
    /// Say what is up.
    Status,
}

/// Runs `stampede cluster`.
pub fn run(args: ClusterArgs) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Up { nodes, subnet } => {
            let spec = Spec {
                name: args.name.clone(),
                nodes,
                subnet: match subnet {
                    Some(subnet) => cluster::parse_subnet(&subnet)?,
                    None => cluster::subnet_for(&args.name)?,
                },
            };
            let count = spec.nodes;
            let made = cluster::up(spec)?;
            println!(
                "cluster {} is up with {count} nodes: nodes file {}, key {}",
                args.name,
                made.nodes_file().display(),
                made.key_file().display()
            );
        }
        Action::Down => {
            cluster::down(&args.name)?;
            println!("cluster {} is down", args.name);
        }
        Action::Status => {
            let nodes = cluster::status(&args.name)?;
            if nodes.is_empty() {
                println!("cluster {} is not up", args.name);
                return Ok(ExitCode::from(1));
            }
            let mut all_up = true;
            for n in &nodes {
                let up = n.namespace && n.sshd_pid.is_some() && n.ssh_reachable;
                all_up &= up;
                let sshd = n
                    .sshd_pid
                    .map(|p| format!("sshd pid {p}"))
                    .unwrap_or_else(|| "no sshd".into());
                let ns = if n.namespace {
                    "namespace"
                } else {
                    "no namespace"
                };
                let ssh = if n.ssh_reachable {
                    "ssh answers"
                } else {
                    "ssh does not answer"
                };
                println!(
                    "{:<4} {:<15} {}  {ns}, {sshd}, {ssh}",
                    n.name,
                    n.address,
                    if up { "up  " } else { "DOWN" }
                );
            }
            return Ok(ExitCode::from(if all_up { 0 } else { 1 }));
        }
    }
    Ok(ExitCode::SUCCESS)
}
