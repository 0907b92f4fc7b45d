//! One history file under `stampede check`: read it, check it against a model (or ZooKeeper's
//! own guarantees), and write `results.json` and `timeline.html` if asked.

use std::path::Path;

use anyhow::Context;

use crate::checker::formats::{self, Format};
use crate::checker::models::{FailedCas, NilRead};
use crate::checker::result::write_results;
use crate::checker::{check_history, zookeeper, CheckOptions, ModelKind};
use crate::history::{nothing_to_judge, Op};
use crate::report::timeline;

/// Which checker judges a history.
#[derive(Debug, Clone, Copy)]
pub enum Checker {
    /// Linearizability against a model.
    Linearizable(ModelKind),
    /// ZooKeeper's own guarantees, from the zxids and versions in the history.
    Zookeeper,
}

/// How to judge each file: the flags of `stampede check`, defaults not yet settled by format.
#[derive(Debug, Clone, Copy)]
pub struct FileOptions {
    /// `--model`, if given.
    pub checker: Option<Checker>,
    /// `--format`.
    pub format: Format,
    /// `--failed-cas`.
    pub failed_cas: FailedCas,
    /// `--nil-read`, if given.
    pub nil_read: Option<NilRead>,
    /// `--initial`.
    pub initial: Option<i64>,
    /// `--time-limit`.
    pub time_limit: std::time::Duration,
    /// Bytes the search may hold.
    pub memory_limit: usize,
    /// Worker threads of one file's check (0 = one per core).
    pub threads: usize,
}

/// The verdict on one file.
#[derive(Debug, Clone)]
pub struct Judged {
    /// The report a person reads, ending with the verdict line.
    pub report: String,
    /// The verdict line alone.
    pub line: String,
    /// 0 valid, 1 invalid, 2 unknown.
    pub exit_code: u8,
}

/// Reads and judges the history `file`, writing `results.json` and `timeline.html` into
/// `output` if given. Errors (a file that does not parse, one without a client operation to
/// judge, an op the model cannot read) name the file.
pub fn judge(file: &Path, opts: &FileOptions, output: Option<&Path>) -> anyhow::Result<Judged> {
    let (ops, format) = formats::read(file, opts.format)?;
    if let Some(why) = nothing_to_judge(&ops) {
        anyhow::bail!("{}: no operations to judge ({why})", file.display());
    }
    let jepsen = matches!(format, Format::Edn | Format::JepsenLog);
    let model = match opts.checker {
        Some(Checker::Zookeeper) => return judge_zookeeper(file, &ops, output),
        Some(Checker::Linearizable(model)) => model,
        None if jepsen => ModelKind::CasRegister,
        None => ModelKind::VersionedRegister,
    };
    let check = CheckOptions {
        model,
        failed_cas: opts.failed_cas,
        nil_read: opts.nil_read.unwrap_or(match jepsen {
            true => NilRead::Any,
            false => NilRead::Value,
        }),
        initial: opts.initial,
        time_limit: Some(opts.time_limit),
        memory_limit: opts.memory_limit,
        threads: opts.threads,
        shrink: true,
    };
    let result = check_history(&ops, &check).with_context(|| format!("{}", file.display()))?;
    if let Some(dir) = output {
        create(dir)?;
        write_results(&dir.join("results.json"), &result)?;
        write_timeline(dir, file, &ops, &result.marked_ops())?;
    }
    Ok(Judged {
        report: result.render(),
        line: result.verdict_line(),
        exit_code: result.valid.exit_code(),
    })
}

/// The `zookeeper` checker alone: its report, then the verdict line.
fn judge_zookeeper(file: &Path, ops: &[Op], output: Option<&Path>) -> anyhow::Result<Judged> {
    let report = zookeeper::check(ops).with_context(|| format!("{}", file.display()))?;
    if let Some(dir) = output {
        create(dir)?;
        let path = dir.join("results.json");
        let text = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        write_timeline(dir, file, ops, &report.marked_ops())?;
    }
    let verdict = if report.valid { "valid" } else { "INVALID" };
    let line = format!(
        "verdict: {verdict} (zookeeper; {} history entries)",
        ops.len()
    );
    Ok(Judged {
        report: format!("{report}{line}\n"),
        line,
        exit_code: u8::from(!report.valid),
    })
}

fn create(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))
}

fn write_timeline(dir: &Path, file: &Path, ops: &[Op], marked: &[u64]) -> anyhow::Result<()> {
    timeline::write(
        &dir.join("timeline.html"),
        ops,
        marked,
        &file.display().to_string(),
    )
}
