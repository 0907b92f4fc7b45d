//! `cargo bench --bench checker`: the linearizability checker on seeded synthetic histories.
//!
//! Prints, per case, the verdict, the time, operations checked per second and the process's
//! peak resident memory so far. The cases are issue 4's targets on register histories:
//! (a) 100,000 operations over 200 keys, 20 processes, 5% info; (b) one key, 2,000 operations,
//! 10 processes, 10% info writes. Each runs valid and with one read corrupted (invalid twin).
//!
//! stampede is a binary crate, so the bench compiles the checker's source files in directly.

// The linearizability checker's own files, not the other checkers beside them in
// src/checker; their `super::` paths resolve to these top-level modules. Test-only items in
// them are compiled in (and unused) under `cargo test --all-targets`.
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/cache.rs"]
mod cache;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/calls.rs"]
mod calls;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/engine.rs"]
mod engine;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/history/mod.rs"]
mod history;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/linearizability.rs"]
mod linearizability;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/model.rs"]
mod model;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/models/mod.rs"]
mod models;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/parallel.rs"]
mod parallel;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/result.rs"]
mod result;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/search.rs"]
mod search;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/shrink.rs"]
mod shrink;
#[allow(dead_code)]
#[cfg_attr(test, allow(unused))]
#[path = "../src/checker/synth.rs"]
mod synth;

use std::time::{Duration, Instant};

use linearizability::{check_history, CheckOptions, ModelKind};
use synth::{corrupt_one_read, generate, make_one_read_stale, Flavor, SynthConfig};

struct Case {
    name: &'static str,
    config: SynthConfig,
    model: ModelKind,
    time_limit: Duration,
}

fn main() {
    let a = SynthConfig {
        seed: 1,
        ops: 100_000,
        keys: 200,
        processes: 20,
        info_rate: 0.05,
        info_reads: true,
        ..SynthConfig::default()
    };
    let b = SynthConfig {
        seed: 2,
        ops: 2_000,
        keys: 1,
        processes: 10,
        info_rate: 0.10,
        info_reads: false,
        ..SynthConfig::default()
    };
    let plain = |c: &SynthConfig| SynthConfig {
        flavor: Flavor::Plain,
        ..c.clone()
    };
    let cases = [
        Case {
            name: "(a) 100k ops, 200 keys",
            config: a.clone(),
            model: ModelKind::VersionedRegister,
            time_limit: Duration::from_secs(60),
        },
        Case {
            name: "(a) 100k ops, 200 keys",
            config: plain(&a),
            model: ModelKind::CasRegister,
            time_limit: Duration::from_secs(60),
        },
        Case {
            name: "(b) 2k ops, 1 key",
            config: b.clone(),
            model: ModelKind::VersionedRegister,
            time_limit: Duration::from_secs(10),
        },
        Case {
            name: "(b) 2k ops, 1 key",
            config: plain(&b),
            model: ModelKind::CasRegister,
            time_limit: Duration::from_secs(10),
        },
    ];
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    println!(
        "{:<24} {:<20} {:<8} {:>9} {:>9} {:>13} {:>12}",
        "case", "model", "history", "verdict", "seconds", "ops/s", "peak RSS MiB"
    );
    for case in &cases {
        if filter
            .as_deref()
            .is_some_and(|f| !case.name.contains(f) && !case.model.name().contains(f))
        {
            continue;
        }
        let valid = generate(&case.config);
        let mut invalid = valid.clone();
        corrupt_one_read(&mut invalid, case.config.seed).expect("the history has an ok read");
        for (label, ops) in [("valid", &valid), ("invalid", &invalid)] {
            let opts = CheckOptions {
                model: case.model,
                time_limit: Some(case.time_limit),
                ..CheckOptions::default()
            };
            let start = Instant::now();
            let result = check_history(ops, &opts).expect("synthetic histories are well formed");
            let secs = start.elapsed().as_secs_f64();
            let verdict = serde_json::to_string(&result.valid).unwrap_or_default();
            println!(
                "{:<24} {:<20} {:<8} {:>9} {:>9.3} {:>13.0} {:>12.1}",
                case.name,
                case.model.name(),
                label,
                verdict,
                secs,
                case.config.ops as f64 / secs,
                peak_rss_mib()
            );
        }
    }
    hard_single_key(filter.as_deref());
}

/// Seeds of the hard single-key shape checked per model and variant: 50, or
/// `STAMPEDE_BENCH_SEEDS`.
fn seeds() -> u64 {
    std::env::var("STAMPEDE_BENCH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50)
}

/// How one seeded history of the hard single-key shape is made.
#[derive(Clone, Copy)]
enum Variant {
    /// As generated: linearizable.
    Valid,
    /// One read returns -1, a value nothing writes.
    NeverWritten,
    /// One read returns a value overwritten before it began (values unique, so invalid).
    Stale,
}

/// Case (b)'s shape over many seeds: the verdicts, and the median and worst time.
fn hard_single_key(filter: Option<&str>) {
    let seeds = seeds();
    println!();
    println!("(c) 1 key, 2,000 ops, 10 processes, 10% info writes; {seeds} seeds each, 10 s limit");
    println!(
        "{:<20} {:<8} {:<34} {:>28} {:>9} {:>9}",
        "model", "values", "history", "verdicts", "median s", "worst s"
    );
    let shapes = [("0..5", Some(5)), ("unique", None)];
    for model in [ModelKind::CasRegister, ModelKind::VersionedRegister] {
        if filter.is_some_and(|f| !"(c)".contains(f) && !model.name().contains(f)) {
            continue;
        }
        for (values, range) in shapes {
            let variants = match range {
                Some(_) => [
                    (Variant::Valid, "valid"),
                    (Variant::NeverWritten, "one read of a value never written"),
                ],
                None => [
                    (Variant::Valid, "valid"),
                    (Variant::Stale, "one stale read"),
                ],
            };
            for (variant, label) in variants {
                let mut times = Vec::new();
                let (mut valid, mut invalid, mut unknown) = (0, 0, 0);
                for seed in 1..=seeds {
                    let config = SynthConfig {
                        seed,
                        ops: 2_000,
                        keys: 1,
                        processes: 10,
                        info_rate: 0.10,
                        info_reads: false,
                        value_range: range,
                        flavor: match model {
                            ModelKind::CasRegister => Flavor::Plain,
                            _ => Flavor::Versioned,
                        },
                        ..SynthConfig::default()
                    };
                    let mut ops = generate(&config);
                    let changed = match variant {
                        Variant::Valid => Some(0),
                        Variant::NeverWritten => corrupt_one_read(&mut ops, seed),
                        Variant::Stale => make_one_read_stale(&mut ops, seed),
                    };
                    changed.expect("the history has a read to change");
                    let opts = CheckOptions {
                        model,
                        time_limit: Some(Duration::from_secs(10)),
                        ..CheckOptions::default()
                    };
                    let start = Instant::now();
                    let result = check_history(&ops, &opts).expect("well-formed history");
                    times.push(start.elapsed().as_secs_f64());
                    match result.valid {
                        result::Validity::Valid => valid += 1,
                        result::Validity::Invalid => invalid += 1,
                        result::Validity::Unknown => unknown += 1,
                    }
                }
                times.sort_by(f64::total_cmp);
                let verdicts = format!("{valid} valid, {invalid} invalid, {unknown} unknown");
                println!(
                    "{:<20} {:<8} {:<34} {:>28} {:>9.3} {:>9.3}",
                    model.name(),
                    values,
                    label,
                    verdicts,
                    times[times.len() / 2],
                    times[times.len() - 1]
                );
            }
        }
    }
}

/// The process's peak resident set size so far, in MiB.
fn peak_rss_mib() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}
