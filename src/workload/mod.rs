//! Workloads, in Jepsen's shape: a workload is one folder and one [`Workload`]
//! implementation, composing the stages below it — how its section of a workload file
//! validates, what its processes run against the servers under the nemesis schedule (through
//! the [`generator`](crate::generator)) and record, how its history is judged (with the
//! [`checker`](crate::checker)s) into the typed parts of a verdict, and the figures and plots
//! its runs have (with [`report`](crate::report)). The commands, suites, `check`, `compare`
//! and `serve` know no particular workload: they find one by name in [`WORKLOADS`], the
//! registry below.
//!
//! Adding a workload: a folder `src/workload/<name>/` whose `mod.rs` has an [`Entry`] named
//! `ENTRY`, a file `workloads/<name>.yaml`, one line in the registry, and its section in
//! `docs/workloads.md` (walked through in `docs/extending.md`).

mod anomalies;
mod claims;
#[cfg(test)]
pub mod fake;
mod figures;
mod file;
mod herd;
mod keys;
mod on_disconnect;
mod paced;
mod positions;
mod requests;
mod rounds;
mod session;
mod settings;
#[cfg(test)]
mod test_runs;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::checker::result::Validity;
use crate::generator::{Healed, Target};
use crate::history::Op;

pub use figures::Figures;
#[cfg(test)]
pub use figures::ServerFigures;
pub use file::WorkloadFile;
pub use herd::{HerdMeter, HerdStats};
pub use requests::Requests;
pub use session::SessionConfig;
pub use settings::{Section, Settings};

// The registry: one line per workload folder (`registry!` declares it as a module).
registry! {
    /// Every workload stampede knows, in the order `stampede test --help` lists them.
    WORKLOADS: Entry {
        register,
        lock,
        election,
        barrier,
        queue,
        counter,
        set,
        unique_ids,
        bank,
        ephemeral,
        watch,
    }
}

/// The workload `stampede test` runs when none is named, and a run folder without
/// `test.yaml` is judged as.
pub const DEFAULT: &str = "register";

/// A workload as the registry knows it: its name (`workload: <name>` in a workload file,
/// which names its own section too), how a workload file becomes one, and whether its runs
/// compare by contenders.
pub struct Entry {
    /// The name a workload file gives it.
    pub name: &'static str,
    /// The workload a file describes, its settings checked (the error names the field).
    pub build: fn(&WorkloadFile) -> Result<Box<dyn Workload>, String>,
    /// Whether runs of it compare by contenders (`stampede test --contenders 5,20`).
    pub sweeps_contenders: bool,
}

/// The path of workload znode `name` in test run `run_id` (one znode name), under the run's
/// root that the replicas' comparison reads ([`crate::client::replica_read::run_root`]).
pub fn run_path(run_id: &str, name: &str) -> anyhow::Result<String> {
    anyhow::ensure!(
        !run_id.is_empty() && !run_id.contains('/'),
        "run id {run_id:?} must be a non-empty znode name without '/'"
    );
    Ok(format!(
        "{}/{name}",
        crate::client::replica_read::run_root(run_id)
    ))
}

/// The registry's entry of the workload called `name`; the error names the known ones.
pub fn entry(name: &str) -> Result<&'static Entry, String> {
    let found = WORKLOADS.iter().find(|e| e.name == name).copied();
    found.ok_or_else(|| {
        let known: Vec<&str> = WORKLOADS.iter().map(|e| e.name).collect();
        format!(
            "workload: unknown workload {name:?} (known: {})",
            known.join(", ")
        )
    })
}

/// The workload a file names, with every setting checked; the error names the field (or the
/// unknown workload and the known ones).
pub fn build(file: &WorkloadFile) -> Result<Box<dyn Workload>, String> {
    let entry = entry(&file.workload)?;
    file.check_sections()?;
    file.generator.validate()?;
    file.session.validate()?;
    file.db.validate()?;
    (entry.build)(file)
}

/// Reads the workload file at `path` with `overrides` applied, then `set` changing its typed
/// values (a time limit given on the command line, the timing workloads run together share),
/// and the workload it describes, built and checked; an override's bare number is seconds where
/// the field is a duration (`--set lock.hold=2`). The error names the file and the field.
pub fn load(
    path: &Path,
    overrides: &[crate::config::Override],
    set: impl FnOnce(&mut WorkloadFile),
) -> anyhow::Result<(WorkloadFile, Box<dyn Workload>)> {
    let mut applied: Vec<crate::config::Override> = Vec::new();
    for o in overrides {
        applied.push(o.clone());
        let file: WorkloadFile = crate::config::load_with_overrides(path, &applied)?;
        if let (Err(_), Some(seconds)) = (build(&file), o.as_seconds()) {
            // Only where seconds read (a duration field); a number field keeps its number
            // and the error says what is wrong with it.
            let mut with_seconds = applied[..applied.len() - 1].to_vec();
            with_seconds.push(seconds);
            if crate::config::load_with_overrides::<WorkloadFile>(path, &with_seconds).is_ok() {
                applied = with_seconds;
            }
        }
    }
    let mut file: WorkloadFile = crate::config::load_with_overrides(path, &applied)?;
    set(&mut file);
    let workload = build(&file).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok((file, workload))
}

/// How a workload's run ended when it was not cut short.
#[derive(Debug, Clone, Default)]
pub struct Ran {
    /// The run's own summary, kept in `results.json` as `run` (`None`: nothing to keep).
    pub summary: Option<Value>,
    /// Faults that could not be healed.
    pub heal_failures: Vec<String>,
    /// Releases (lock hand-offs, leadership changes) the run counted, when it counts them:
    /// the servers' load is given per release.
    pub releases: Option<u64>,
}

impl Ran {
    /// A run whose summary `results.json` keeps, the faults that could not be healed among
    /// its fields; `releases` as [`Ran::releases`].
    pub fn kept<S: Serialize>(run: Healed<S>, releases: Option<u64>) -> anyhow::Result<Ran> {
        Ok(Ran {
            summary: Some(serde_json::to_value(&run)?),
            heal_failures: run.heal_failures,
            releases,
        })
    }
}

/// A workload's part of a verdict.
#[derive(Debug, Clone)]
pub struct Judged {
    /// What its checkers found.
    pub valid: Validity,
    /// Each checker's report by name, as `results.json` keeps them.
    pub checks: Map<String, Value>,
    /// The operations a timeline outlines (counterexamples, early passes).
    pub marked: Vec<u64>,
    /// Its part of the verdict line.
    pub line: String,
}

/// One workload: what it runs, how its history is judged, what its runs measure and draw.
#[async_trait]
pub trait Workload: Send + Sync {
    /// Its section of the workload file as a run's `test.yaml` keeps it (defaults filled in).
    fn settings(&self) -> Value;

    /// The operation whose open invocation names the node a process holds something on
    /// (`hold` of a lock, `lead` of an election), for the nemesis target `holder`.
    fn holder_op(&self) -> Option<&'static str> {
        None
    }

    /// Runs against `target` under the nemesis schedule, recording every operation in the
    /// target's history; no fault is left active on return.
    async fn run(&self, target: Target) -> anyhow::Result<Ran>;

    /// Judges a history of this workload; `run` is the run's summary, when it has one.
    fn judge(&self, ops: &[Op], run: Option<Value>) -> anyhow::Result<Judged>;

    /// The figures `compare`, the trend page and the sweep plots read, from the checkers'
    /// reports of a run.
    fn figures(&self, _checks: &Map<String, Value>) -> Figures {
        Figures::default()
    }

    /// Draws the run's plots into `dir`.
    fn plots(&self, ops: &[Op], dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
        crate::report::write_plots(ops, dir)
    }
}

/// A bool verdict as a [`Validity`].
pub fn validity(valid: bool) -> Validity {
    match valid {
        true => Validity::Valid,
        false => Validity::Invalid,
    }
}

/// A JSON object's fields (empty for anything else).
pub fn into_map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The ops of a linearizability result's counterexamples, for a timeline to outline.
pub fn counterexample_ops(result: &crate::checker::result::CheckResult) -> Vec<u64> {
    result
        .keys
        .values()
        .filter_map(|k| k.counterexample.as_ref())
        .flat_map(|cx| {
            cx.window
                .iter()
                .flat_map(|op| std::iter::once(op.index).chain(op.completed))
        })
        .collect()
}

/// The liveness part of a recipe run's verdict line.
pub fn liveness_summary(report: &crate::checker::liveness::LivenessReport) -> String {
    if !report.judged {
        return "not judged (run too short after the heal)".into();
    }
    match report.stalls.iter().map(|s| s.duration_ns).max() {
        None => format!("no stall in {} ms judged", report.judged_ms),
        Some(longest) => format!(
            "STUCK {} times (longest {} ms)",
            report.stalls.len(),
            longest / 1_000_000
        ),
    }
}
