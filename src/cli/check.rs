//! `stampede check`: re-run the checkers on a stored history.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::checker::formats::{self, Format};
use crate::checker::models::FailedCas;
use crate::checker::result::write_results;
use crate::checker::{check_history, zookeeper, CheckOptions, ModelKind};
use crate::history::Op;

/// Arguments of `stampede check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// A results folder (its history.jsonl is read) or a history file.
    pub path: PathBuf,
    /// The model: register, cas-register, versioned-register, mutex, fenced-mutex, or
    /// zookeeper (ZooKeeper's own guarantees) [default: versioned-register for stampede
    /// histories, cas-register for Jepsen ones].
    #[arg(long, value_parser = parse_model)]
    pub model: Option<Checker>,
    /// The history's format: auto, jsonl, edn or jepsen-log.
    #[arg(long, default_value = "auto")]
    pub format: Format,
    /// What a failed cas tells: ignore (it did not happen) or mismatch (also: the register did
    /// not hold the expected value during it).
    #[arg(long, default_value = "ignore")]
    pub failed_cas: FailedCas,
    /// The register's initial value: an integer or nil.
    #[arg(long, default_value = "nil", value_parser = parse_initial)]
    pub initial: Initial,
    /// Give up with an unknown verdict after this long: seconds (`60`) or with a unit (`5m`).
    #[arg(long, default_value = "60s", value_parser = crate::config::Duration::parse_cli_std)]
    pub time_limit: Duration,
    /// Memory the search may use before giving up with an unknown verdict, in MiB.
    #[arg(long, default_value_t = 4096)]
    pub memory_limit_mib: usize,
    /// Also write the verdict as JSON to this file (e.g. results.json).
    #[arg(long)]
    pub output: Option<PathBuf>,
}

/// Which checker `--model` names.
#[derive(Debug, Clone, Copy)]
pub enum Checker {
    /// Linearizability against a model.
    Linearizable(ModelKind),
    /// ZooKeeper's own guarantees, from the zxids and versions in the history.
    Zookeeper,
}

fn parse_model(s: &str) -> Result<Checker, String> {
    if s == "zookeeper" {
        return Ok(Checker::Zookeeper);
    }
    s.parse()
        .map(Checker::Linearizable)
        .map_err(|e: String| format!("{e}, or zookeeper"))
}

/// The register's initial value as given on the command line.
#[derive(Debug, Clone, Copy)]
pub struct Initial(Option<i64>);

fn parse_initial(s: &str) -> Result<Initial, String> {
    if s == "nil" || s == "null" {
        return Ok(Initial(None));
    }
    s.parse()
        .map(|v| Initial(Some(v)))
        .map_err(|_| format!("{s:?} is neither an integer nor nil"))
}

/// Runs `stampede check`: prints the report, the verdict last, and exits 0, 1 or 2.
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    if args.path.is_dir() && args.model.is_none() && args.output.is_none() {
        let verdict = super::verdict::recheck_dir(&args.path)?;
        println!("{}", verdict.line);
        return Ok(ExitCode::from(verdict.exit_code));
    }
    let file = history_file(&args.path)?;
    let (ops, format) = formats::read(&file, args.format)?;
    let model = match args.model {
        Some(Checker::Linearizable(model)) => model,
        Some(Checker::Zookeeper) => return check_zookeeper(&file, &ops, args.output.as_deref()),
        None => match format {
            Format::Jsonl | Format::Auto => ModelKind::VersionedRegister,
            Format::Edn | Format::JepsenLog => ModelKind::CasRegister,
        },
    };
    let opts = CheckOptions {
        model,
        failed_cas: args.failed_cas,
        initial: args.initial.0,
        time_limit: Some(args.time_limit),
        memory_limit: args.memory_limit_mib << 20,
        ..CheckOptions::default()
    };
    let result = check_history(&ops, &opts).with_context(|| format!("{}", file.display()))?;
    if let Some(out) = &args.output {
        write_results(out, &result)?;
    }
    print!("{}", result.render());
    Ok(ExitCode::from(result.valid.exit_code()))
}

/// Runs the `zookeeper` checker alone; its report, then the verdict line.
fn check_zookeeper(file: &Path, ops: &[Op], output: Option<&Path>) -> anyhow::Result<ExitCode> {
    let report = zookeeper::check(ops).with_context(|| format!("{}", file.display()))?;
    if let Some(out) = output {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    }
    print!("{report}");
    let verdict = if report.valid { "valid" } else { "INVALID" };
    println!(
        "verdict: {verdict} (zookeeper; {} history entries)",
        ops.len()
    );
    Ok(ExitCode::from(if report.valid { 0 } else { 1 }))
}

/// The history file for `path`: the file itself, or a results folder's `history.jsonl`.
fn history_file(path: &Path) -> anyhow::Result<PathBuf> {
    if path.is_dir() {
        let file = path.join("history.jsonl");
        anyhow::ensure!(
            file.is_file(),
            "{} is a folder without a history.jsonl",
            path.display()
        );
        return Ok(file);
    }
    anyhow::ensure!(path.exists(), "{}: no such file or folder", path.display());
    Ok(path.to_path_buf())
}
