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
    #[arg(long, default_value = db::DEFAULT, value_parser = known_db, global = true)]
    pub db: String,
    #[command(flatten)]
    pub options: db::DbOptions,
}

/// `--db`'s value: the name of a database in the registry.
fn known_db(name: &str) -> Result<String, String> {
    db::entry(name)
        .map(|e| e.name.to_string())
        .map_err(|e| e.to_string())
}

impl DbChoice {
    /// The database for the nodes `targets` picks; on the local cluster its servers run under
    /// libfaketime so that clock faults never touch the shared kernel clock.
    pub fn build(
        &self,
        targets: &TargetArgs,
        nodes: Vec<crate::control::Node>,
    ) -> anyhow::Result<Box<dyn Db>> {
        let options = db::DbOptions {
            faketime: targets.uses_local_cluster(),
            ..self.options.clone()
        };
        db::build(&self.db, &options, &nodes)
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Wrap {
        #[command(flatten)]
        db: super::DbChoice,
    }

    #[test]
    fn db_is_a_registered_name_zookeeper_when_none_is_given() {
        let err = Wrap::try_parse_from(["x", "--db", "etcd"]).err().unwrap();
        let said = err.to_string();
        let line = said.lines().next().unwrap();
        assert_eq!(
            line,
            "error: invalid value 'etcd' for '--db <DB>': unknown database \"etcd\" (known: zookeeper, keeperd)"
        );
        let given = Wrap::try_parse_from(["x", "--db", "keeperd", "--keeperd-observers", "1"]);
        let given = given.unwrap().db;
        assert_eq!(
            (given.db.as_str(), given.options.keeperd_observers),
            ("keeperd", 1)
        );
        assert_eq!(Wrap::try_parse_from(["x"]).unwrap().db.db, "zookeeper");
    }
}
