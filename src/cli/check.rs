//! `stampede check`: re-run the checkers on stored histories, one or many in one run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use super::check_file::{self, Checker, FileOptions, Judged};
use crate::checker::formats::Format;
use crate::checker::models::{FailedCas, NilRead};
use crate::checker::parallel;
use crate::store::RunFolder;

/// What `stampede check --help` says after the flags.
pub const AFTER_HELP: &str = "\
Each PATH is a history file, a results folder or a folder of histories. A folder is one or \
the other, never both, and a line on standard error says which it was taken for before the \
verdicts.

A results folder is one a run left (it has a test.yaml or a results.json). It is judged again \
exactly as its run judged it, its results.json, timeline.html and plots rewritten in place; \
with --model its history.jsonl is checked against that model instead. A run finished only \
if its controller wrote results.json, which it does after the heal and the replica \
comparison: a folder without one (its controller was killed, or is still running) is never \
valid, at best unknown (the run did not finish), invalid if the checkers find anomalies; \
the results.json the check writes there says the run did not finish, so it stays so when \
judged again.

A folder of histories is any other folder: every history file in it and in its folders \
below (*.edn, *.jsonl, *.json, *.log, *.txt, a history.jsonl among them; links passed over) \
is checked, and every results folder below is judged as its run did. Nothing is written into \
it unless --output is given.

Nothing is judged from nothing: a history file without a client operation (empty, blank, or \
only nemesis operations) is an error, and a run whose history has none is at best unknown.

Several histories are checked in parallel: one verdict line per history, then a summary line; \
the exit code is the worst of them (0 valid, 1 invalid, 2 unknown or error), and a history \
that cannot be read or has nothing to judge gets its one-line error as its verdict line while \
the others still run.

Models follow Knossos (knossos.model), read from a history as Knossos reads it: a failed \
operation did not happen, an ok one takes its completion's value, a crashed (info or never \
completed) one may have happened at any later time or never. stampede differs in three \
places, each a flag: --nil-read (default any for Jepsen histories, as Knossos; value for \
stampede's own history.jsonl), --failed-cas (default ignore, as Knossos; mismatch is \
Porcupine's reading), and processes: as in Jepsen, only integer processes are clients \
(:nemesis and other keywords are loaded and counted, never checked).";

/// Arguments of `stampede check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// History files, results folders, or folders of history files.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The model: register, cas-register, multi-register, versioned-register, mutex,
    /// fenced-mutex, fifo-queue, unordered-queue, or zookeeper (ZooKeeper's own guarantees)
    /// [default: versioned-register for stampede histories, cas-register for Jepsen ones].
    #[arg(long, value_parser = parse_model)]
    pub model: Option<Checker>,
    /// The history's format: auto, jsonl, edn (a list or vector of op maps, or one map per
    /// line) or jepsen-log (jepsen.util log lines with tabs or spaces, or history.txt).
    #[arg(long, default_value = "auto")]
    pub format: Format,
    /// What a failed cas tells: ignore (it did not happen; Knossos) or mismatch (also: the
    /// register did not hold the expected value during it; Porcupine).
    #[arg(long, default_value = "ignore")]
    pub failed_cas: FailedCas,
    /// What a completed read that returned nil tells (register, cas-register,
    /// multi-register): any (nothing: it fits every state, Knossos's reading, as Jepsen clients
    /// return nil when they could not tell) or value (the register held nil) [default: any
    /// for Jepsen histories; value for stampede's history.jsonl, whose register workload reads
    /// a znode's empty data, the state it was created in, as nil: a nil read after
    /// acknowledged writes there is lost data, which "any" would hide].
    #[arg(long)]
    pub nil_read: Option<NilRead>,
    /// The register's initial value (every register's, for multi-register): an integer or
    /// nil.
    #[arg(long, default_value = "nil", value_parser = parse_initial)]
    pub initial: Initial,
    /// Give up with an unknown verdict after this long: seconds (`60`) or with a unit (`5m`).
    #[arg(long, default_value = "60s", value_parser = crate::config::Duration::parse_cli_std)]
    pub time_limit: Duration,
    /// Memory the search may use before giving up with an unknown verdict, in MiB (shared by
    /// the histories checked at once).
    #[arg(long, default_value_t = 4096)]
    pub memory_limit_mib: usize,
    /// Write results.json and timeline.html (counterexamples outlined) into this folder; with
    /// several histories, into one subfolder per history, named after it. Results folders
    /// judged as their run did are rewritten in place instead.
    #[arg(long, value_name = "DIR")]
    pub output: Option<PathBuf>,
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

/// One thing to judge.
#[derive(Debug, Clone)]
enum Input {
    /// A history file, and where its outputs go.
    File(PathBuf, Option<PathBuf>),
    /// A results folder, judged again as its run did.
    Results(PathBuf),
}

impl Input {
    fn path(&self) -> &Path {
        match self {
            Input::File(p, _) | Input::Results(p) => p,
        }
    }
}

/// File name endings taken from a folder of histories.
const HISTORY_ENDINGS: [&str; 5] = ["edn", "jsonl", "json", "log", "txt"];

/// Runs `stampede check`: one history's full report, or one verdict line per history and a
/// summary; the exit code is the worst verdict.
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let (found, many, taken) = collect(&args.paths, args.model.is_some())?;
    for line in taken {
        eprintln!("{line}");
    }
    let inputs = with_outputs(found, args.output.as_deref(), many);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(inputs.len())
        .max(1);
    let opts = FileOptions {
        checker: args.model,
        format: args.format,
        failed_cas: args.failed_cas,
        nil_read: args.nil_read,
        initial: args.initial.0,
        time_limit: args.time_limit,
        memory_limit: (args.memory_limit_mib << 20) / workers,
        threads: if many { 1 } else { 0 },
    };
    if !many {
        let judged = judge(&inputs[0], &opts)?;
        print!("{}", judged.report);
        return Ok(ExitCode::from(judged.exit_code));
    }
    let start = Instant::now();
    let outcomes = judge_all(&inputs, &opts, workers);
    let mut tally = [0usize; 4];
    let mut worst = 0;
    for (input, outcome) in inputs.iter().zip(&outcomes) {
        let path = input.path().display().to_string();
        let (line, code, slot) = match outcome {
            Ok(j) => (j.line.clone(), j.exit_code, usize::from(j.exit_code)),
            Err(e) => {
                let message = format!("{e:#}");
                let bare = message
                    .strip_prefix(&format!("{path}: "))
                    .unwrap_or(&message);
                (format!("error: {bare}"), 2, 3)
            }
        };
        println!("{path}: {line}");
        tally[slot] += 1;
        worst = worst.max(code);
    }
    println!(
        "{} histories: {} valid, {} INVALID, {} unknown, {} errors ({:.2} s)",
        inputs.len(),
        tally[0],
        tally[1],
        tally[2],
        tally[3],
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::from(worst))
}

/// The inputs `paths` name, whether they are several (a folder of histories counts as
/// several), and for each folder the line saying what it was taken for: a results folder
/// ([`RunFolder::is_run`]) or a folder of histories, never both. A path that does not exist,
/// or a folder without histories, is an error.
fn collect(
    paths: &[PathBuf],
    model_given: bool,
) -> anyhow::Result<(Vec<Input>, bool, Vec<String>)> {
    let mut inputs = Vec::new();
    let mut taken = Vec::new();
    let mut many = paths.len() > 1;
    for path in paths {
        anyhow::ensure!(path.exists(), "{}: no such file or folder", path.display());
        if !path.is_dir() {
            inputs.push(Input::File(path.clone(), None));
            continue;
        }
        if RunFolder::is_run(path) {
            inputs.push(results_folder(path, model_given));
            let how = match model_given {
                false => "judged as its run did",
                true => "its history.jsonl checked against the model given",
            };
            taken.push(format!(
                "checking {}: a results folder ({how})",
                path.display()
            ));
            continue;
        }
        many = true;
        let before = inputs.len();
        gather(path, model_given, &mut inputs)?;
        anyhow::ensure!(
            inputs.len() > before,
            "{}: a folder without history files or results folders",
            path.display()
        );
        taken.push(format!(
            "checking {}: {}",
            path.display(),
            folder_of_histories(&inputs[before..])
        ));
    }
    Ok((inputs, many, taken))
}

/// The results folder `dir`: judged as its run did, or its history checked against the model
/// given.
fn results_folder(dir: &Path, model_given: bool) -> Input {
    match model_given {
        true => Input::File(RunFolder::open(dir).history_path(), None),
        false => Input::Results(dir.to_path_buf()),
    }
}

/// What a folder of histories holds, from the inputs found in it: `a folder of 3 histories`,
/// with how many of them are results folders judged as their runs did.
fn folder_of_histories(found: &[Input]) -> String {
    let runs = found
        .iter()
        .filter(|i| matches!(i, Input::Results(_)))
        .count();
    let histories = match found.len() {
        1 => "a folder of 1 history".to_string(),
        n => format!("a folder of {n} histories"),
    };
    match runs {
        0 => histories,
        1 => format!("{histories} (1 of them a results folder, judged as its run did)"),
        n => format!("{histories} ({n} of them results folders, judged as their runs did)"),
    }
}

/// Adds the history files and results folders in `dir` and, through its other folders, below
/// it, in name order; hidden entries and links (such as `results/latest`) are passed over.
fn gather(dir: &Path, model_given: bool, inputs: &mut Vec<Input>) -> anyhow::Result<()> {
    let mut entries: Vec<(PathBuf, std::fs::FileType)> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_type().ok().map(|t| (e.path(), t)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (entry, kind) in entries {
        let hidden = entry
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        let ending = entry.extension().and_then(|e| e.to_str()).unwrap_or("");
        if hidden || kind.is_symlink() {
            continue;
        }
        if kind.is_dir() {
            match RunFolder::is_run(&entry) {
                true => inputs.push(results_folder(&entry, model_given)),
                false => gather(&entry, model_given, inputs)?,
            }
        } else if HISTORY_ENDINGS.contains(&ending) {
            inputs.push(Input::File(entry, None));
        }
    }
    Ok(())
}

/// Gives each history file its output folder: `output` itself for one history, else a
/// subfolder named after the file (its folder's name for a `history.jsonl`), made unique.
fn with_outputs(inputs: Vec<Input>, output: Option<&Path>, many: bool) -> Vec<Input> {
    let Some(output) = output else {
        return inputs;
    };
    let mut taken: Vec<String> = Vec::new();
    inputs
        .into_iter()
        .map(|input| match input {
            Input::File(file, _) if !many => Input::File(file, Some(output.to_path_buf())),
            Input::File(file, _) => {
                let named = match file.file_name().and_then(|n| n.to_str()) {
                    Some("history.jsonl") => file.parent().and_then(Path::file_name),
                    _ => file.file_name(),
                };
                let base = named.map_or("history".into(), |n| n.to_string_lossy().to_string());
                let mut name = base.clone();
                for n in 2.. {
                    if !taken.contains(&name) {
                        break;
                    }
                    name = format!("{base}-{n}");
                }
                taken.push(name.clone());
                Input::File(file, Some(output.join(name)))
            }
            results => results,
        })
        .collect()
}

fn judge(input: &Input, opts: &FileOptions) -> anyhow::Result<Judged> {
    match input {
        Input::File(file, output) => check_file::judge(file, opts, output.as_deref()),
        Input::Results(dir) => {
            let verdict = super::verdict::recheck_dir(dir)?;
            Ok(Judged {
                report: format!("{}\n", verdict.line),
                line: verdict.line,
                exit_code: verdict.exit_code,
            })
        }
    }
}

/// Judges every input on `workers` threads; the outcomes in input order.
fn judge_all(inputs: &[Input], opts: &FileOptions, workers: usize) -> Vec<anyhow::Result<Judged>> {
    parallel::map(inputs, workers, |input| judge(input, opts))
}
