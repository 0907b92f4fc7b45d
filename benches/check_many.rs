//! `cargo bench --bench check_many`: the `stampede check` command on a folder of 100 small
//! Jepsen histories, as a user would run it.
//!
//! Writes 100 seeded histories of a simulated linearizable cas register (150 operations each
//! over 1 to 3 independent keys, 5 processes, 5% crashed operations; every third one with a
//! read corrupted, so invalid) into a temporary folder, in Jepsen's formats by turns: one EDN
//! list, an EDN map per line, `jepsen.util` log lines. Then runs the release binary
//! `stampede check <folder>` ten times and prints the median and worst wall time of the whole
//! process (start, reading, checking, printing) and whether every verdict was the one made.
//!
//! stampede is a binary crate, so the bench compiles the generator from its files.

// Only part of the included modules is used here.
#![allow(unused)]

#[path = "../src/history/mod.rs"]
mod history;
#[path = "../src/checker/synth.rs"]
mod synth;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use history::{Op, OpType, Process};
use serde_json::Value;
use synth::{corrupt_one_read, generate, Flavor, SynthConfig};

/// Histories in the folder.
const HISTORIES: u64 = 100;
/// Runs of `stampede check` timed.
const RUNS: usize = 10;

fn main() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut invalid = 0;
    for seed in 0..HISTORIES {
        let mut ops = generate(&SynthConfig {
            seed,
            ops: 150,
            keys: 1 + (seed % 3) as usize,
            processes: 5,
            info_rate: 0.05,
            info_reads: true,
            mix: [2, 2, 1],
            value_range: Some(5),
            flavor: Flavor::Plain,
        });
        let name = if seed % 3 == 0 && corrupt_one_read(&mut ops, seed).is_some() {
            invalid += 1;
            format!("invalid-{seed:03}")
        } else {
            format!("valid-{seed:03}")
        };
        write_history(dir.path(), &name, seed, &ops);
    }
    let binary = env!("CARGO_BIN_EXE_stampede");
    let mut seconds = Vec::with_capacity(RUNS);
    let mut last = String::new();
    let mut right = true;
    for _ in 0..RUNS {
        let start = Instant::now();
        let out = Command::new(binary)
            .arg("check")
            .arg(dir.path())
            .output()
            .expect("stampede runs");
        seconds.push(start.elapsed().as_secs_f64());
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        right &= stdout
            .lines()
            .filter(|l| l.contains("/valid-"))
            .all(|l| l.contains(": verdict: valid"))
            && stdout
                .lines()
                .filter(|l| l.contains("/invalid-"))
                .all(|l| l.contains(": verdict: INVALID"))
            && out.status.code() == Some(1);
        last = stdout.lines().last().unwrap_or_default().to_string();
    }
    seconds.sort_by(f64::total_cmp);
    println!(
        "stampede check on {HISTORIES} small Jepsen histories ({} invalid), {RUNS} runs",
        invalid
    );
    println!(
        "wall time per run: median {:.3} s, worst {:.3} s; every verdict right: {}",
        seconds[RUNS / 2],
        seconds[RUNS - 1],
        if right { "yes" } else { "NO" }
    );
    println!("last summary line: {last}");
}

/// Writes `ops` as a Jepsen history named `name`: an EDN list, a map per line, or a log.
fn write_history(dir: &Path, name: &str, seed: u64, ops: &[Op]) {
    let maps = ops.iter().map(edn_op);
    let (file, text) = match seed % 3 {
        0 => (
            format!("{name}.edn"),
            format!("({})\n", maps.collect::<Vec<_>>().join("\n ")),
        ),
        1 => (
            format!("{name}.edn"),
            maps.collect::<Vec<_>>().join("\n") + "\n",
        ),
        _ => (
            format!("{name}.log"),
            ops.iter().map(log_line).collect::<Vec<_>>().join("\n") + "\n",
        ),
    };
    std::fs::write(dir.join(file), text).expect("the history is written");
}

/// An op's `[key value]` tuple, as `jepsen.independent` writes it.
fn value(op: &Op) -> String {
    let key = op.key.as_deref().unwrap_or("0");
    format!("[{key} {}]", edn(&op.value))
}

fn edn_op(op: &Op) -> String {
    let mut s = format!(
        "{{:index {}, :time {}, :type :{}, :process {}, :f :{}, :value {}",
        op.index,
        op.time,
        kind(op.kind),
        process(op.process),
        op.f,
        value(op)
    );
    if let Some(e) = &op.error {
        let _ = write!(s, ", :error {e:?}");
    }
    s + "}"
}

fn log_line(op: &Op) -> String {
    format!(
        "INFO  jepsen.util - {}\t:{}\t:{}\t{}",
        process(op.process),
        kind(op.kind),
        op.f,
        value(op)
    )
}

fn kind(kind: OpType) -> &'static str {
    match kind {
        OpType::Invoke => "invoke",
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info => "info",
    }
}

fn process(p: Process) -> String {
    match p {
        Process::Client(p) => p.to_string(),
        Process::Nemesis(_) => ":nemesis".to_string(),
    }
}

/// A JSON value as EDN: null is nil, arrays are vectors.
fn edn(v: &Value) -> String {
    match v {
        Value::Null => "nil".to_string(),
        Value::Array(items) => format!("[{}]", items.iter().map(edn).collect::<Vec<_>>().join(" ")),
        other => other.to_string(),
    }
}
