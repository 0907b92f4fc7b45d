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
#[cfg(test)]
#[allow(dead_code)]
#[path = "../src/checker/testing.rs"]
mod testing;

use std::time::{Duration, Instant};

use linearizability::{check_history, CheckOptions, ModelKind};
use synth::{corrupt_one_read, generate, Flavor, SynthConfig};

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
}

/// The process's peak resident set size so far, in MiB.
fn peak_rss_mib() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}
