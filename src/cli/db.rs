//! `stampede db setup|teardown|status`: the database on the nodes, by hand.

use std::process::ExitCode;

use super::targets::TargetArgs;
use crate::db::{self, Db};

/// Arguments of `stampede db`.
#[derive(Debug, clap::Args)]
pub struct DbArgs {
    #[command(subcommand)]
    action: Action,
    #[command(flatten)]
    targets: TargetArgs,
    #[command(flatten)]
    db: DbChoice,
}

/// Which database, and how it is configured.
#[derive(Debug, Clone, clap::Args)]
pub struct DbChoice {
    /// The database under test.
    #[arg(long, default_value = "zookeeper", global = true)]
    pub db: String,
    /// An Apache ZooKeeper release tarball (path or URL) instead of the distribution's package.
    #[arg(long, global = true)]
    pub zookeeper_tarball: Option<String>,
    /// A keeperd binary to upload for `--db keeperd` (default: build it with cargo).
    #[arg(long, global = true)]
    pub keeperd_binary: Option<std::path::PathBuf>,
    /// How many of the nodes (the last ones) run keeperd as observers.
    #[arg(long, default_value_t = 0, global = true)]
    pub keeperd_observers: usize,
    /// keeperd failpoints to switch on, comma-separated (a binary built with
    /// `--features failpoints`; see keeperd/src/failpoint.rs).
    #[arg(long, value_delimiter = ',', global = true)]
    pub keeperd_failpoints: Vec<String>,
    /// The workload file's `db:` settings (`stampede test`; the defaults elsewhere).
    #[arg(skip)]
    pub settings: db::DbSettings,
}

impl DbChoice {
    /// The database for the nodes `targets` picks; on the local cluster its servers run under
    /// libfaketime so that clock faults never touch the shared kernel clock.
    pub fn build(
        &self,
        targets: &TargetArgs,
        nodes: Vec<crate::control::Node>,
    ) -> anyhow::Result<Box<dyn Db>> {
        match self.db.as_str() {
            "zookeeper" => {
                let mut cfg = db::zookeeper::ZkConfig {
                    faketime: targets.uses_local_cluster(),
                    settings: self.settings.clone(),
                    ..Default::default()
                };
                if let Some(tarball) = &self.zookeeper_tarball {
                    cfg.install = db::zookeeper::Install::Tarball(tarball.clone());
                }
                Ok(Box::new(db::zookeeper::ZooKeeper::new(cfg, nodes)))
            }
            "keeperd" => {
                let cfg = db::keeperd::KeeperdConfig {
                    binary: self.keeperd_binary.clone(),
                    observers: self.keeperd_observers,
                    failpoints: self.keeperd_failpoints.clone(),
                    faketime: targets.uses_local_cluster(),
                    settings: self.settings.clone(),
                    ..Default::default()
                };
                Ok(Box::new(db::keeperd::Keeperd::new(cfg, &nodes)?))
            }
            other => anyhow::bail!("--db {other}: unknown database (known: zookeeper, keeperd)"),
        }
    }
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Install, configure and start the database on every node; wait until it serves.
    Setup,
    /// Stop the servers and remove their data.
    Teardown,
    /// Say what each node's server reports.
    Status,
    /// Stop the servers and remove their data (the configuration stays; `setup` starts afresh).
    Wipe,
}

/// Runs `stampede db`.
pub async fn run(args: DbArgs) -> anyhow::Result<ExitCode> {
    let control = args.targets.control()?;
    let db = args.db.build(&args.targets, control.nodes().to_vec())?;
    let changes = !matches!(args.action, Action::Status);
    if changes {
        if let Some(holder) = crate::engine::running_elsewhere(&control).await? {
            anyhow::bail!("{holder}; it sets up and tears down its own database");
        }
    }
    match args.action {
        Action::Setup => {
            db.setup(&control).await?;
            print_status(db.as_ref(), &control).await;
        }
        Action::Teardown => {
            db.teardown(&control).await?;
            println!(
                "{} is torn down on {} nodes",
                db.name(),
                control.nodes().len()
            );
        }
        Action::Wipe => {
            for node in control.nodes() {
                db.stop(&control, node).await?;
                db.wipe(&control, node).await?;
            }
            println!(
                "{} data wiped on {} nodes",
                db.name(),
                control.nodes().len()
            );
        }
        Action::Status => {
            if !print_status(db.as_ref(), &control).await {
                return Ok(ExitCode::from(1));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints each node's mode; returns whether every node serves.
async fn print_status(db: &dyn Db, control: &crate::control::Control) -> bool {
    let modes = db::modes(db, control.nodes()).await;
    for (node, mode) in control.nodes().iter().zip(&modes) {
        let said = mode
            .map(|m| m.to_string())
            .unwrap_or_else(|| "not serving".into());
        println!("{:<6} {:<22} {said}", node.name, db.client_address(node));
    }
    modes.iter().all(Option::is_some)
}
