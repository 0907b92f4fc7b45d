//! `stampede nemesis run` and `stampede heal`: faults by hand, and healing after a crash.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::db::DbChoice;
use super::targets::TargetArgs;
use crate::engine::{self, Scope};
use crate::nemesis::{self, Ending};

/// Arguments of `stampede nemesis`.
#[derive(Debug, clap::Args)]
pub struct NemesisArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Inject one fault, hold it, then heal it (and everything else).
    Run {
        /// Fault kind, with its default settings (docs/faults.md; an unknown kind is refused
        /// with the list of known ones).
        #[arg(long)]
        kind: String,
        /// Which nodes: one, minority, majority, all, leader or a node name; partitions also
        /// take halves, majorities-ring and bridge.
        #[arg(long, default_value = "one")]
        target: String,
        /// How long the fault lasts: seconds (`10`) or with a unit (`10s`, `1m`).
        #[arg(long, default_value = "10s", value_parser = crate::config::Duration::parse_cli_std)]
        duration: Duration,
        #[command(flatten)]
        targets: TargetArgs,
        #[command(flatten)]
        db: DbChoice,
    },
}

/// Arguments of `stampede heal`.
#[derive(Debug, clap::Args)]
pub struct HealArgs {
    #[command(flatten)]
    targets: TargetArgs,
    #[command(flatten)]
    db: DbChoice,
}

/// Runs `stampede nemesis`.
pub async fn run(args: NemesisArgs) -> anyhow::Result<ExitCode> {
    let Action::Run {
        kind,
        target,
        duration,
        targets,
        db,
    } = args.action;
    let control = targets.control()?;
    let db: Arc<dyn crate::db::Db> = db.build(&targets, control.nodes().to_vec())?.into();
    let spec = nemesis::FaultConfig::new(&kind, &target);
    let aim = nemesis::Aim {
        nodes: control.nodes(),
        db: db.as_ref(),
    };
    spec.validate(false, Some(&aim))
        .map_err(|(field, e)| anyhow::anyhow!("--{field}: {e}"))?;
    let dice = nemesis::Dice::seeded(rand::random());
    let fault = nemesis::build(&spec, control.clone(), db.clone(), None, dice)?;
    // A signal cuts the wait short, never the start or the stop: the fault is stopped (and
    // everything healed) only once its start is over.
    let (cancel, mut cancelled) = tokio::sync::watch::channel(false);
    let work = async {
        let started = fault.start().await;
        if let Ok(value) = &started {
            println!("start-{kind}: {value}");
            tokio::select! {
                _ = tokio::time::sleep(duration) => {}
                _ = cancelled.wait_for(|c| *c) => {}
            }
        }
        let stopped = fault.stop().await?;
        println!("stop-{kind}: {stopped}");
        started.map(drop)
    };
    let on_signal = nemesis::OnSignal(cancel, Duration::from_secs(120));
    let claim = engine::claim(&control, db.as_ref(), Scope::Faults).await?;
    let guarded = nemesis::guarded(&control, db.as_ref(), claim.interrupts(), on_signal, work);
    let ending = guarded.await;
    claim.release().await;
    match ending? {
        Ending::Finished(result) => {
            result?;
            println!("healed");
            Ok(ExitCode::SUCCESS)
        }
        Ending::Interrupted(signal) => {
            println!("interrupted by {signal}; healed");
            Ok(ExitCode::from(2))
        }
    }
}

/// Runs `stampede heal`.
pub async fn heal(args: HealArgs) -> anyhow::Result<ExitCode> {
    let control = args.targets.control()?;
    let db = args.db.build(&args.targets, control.nodes().to_vec())?;
    if let Some(holder) = engine::running_elsewhere(&control).await? {
        anyhow::bail!("{holder}; it heals its own faults when it ends: not healing under it");
    }
    nemesis::heal_all(&control, db.as_ref()).await?;
    println!(
        "healed {} nodes: no partition rules, no paused server, every set-up server running",
        control.nodes().len()
    );
    Ok(ExitCode::SUCCESS)
}
