//! Benchmark of the `zookeeper` checker: a seeded synthetic ZooKeeper register history
//! (1,000,000 operations, 200 keys, 20 processes, 5% crashed ops; zxids and versions as
//! ZooKeeper reports them), checked once as generated (must be valid) and once with one read
//! corrupted (must be invalid). Prints ops/s and peak memory.
//!
//! `cargo bench --bench zookeeper_checker` runs the full size; under `cargo test` (no
//! `--bench` flag) it runs a small smoke size.
//!
//! stampede is a binary crate, so the bench compiles the modules it needs from their files.

// Only part of the included modules is used here.
#![allow(unused)]

#[path = "../src/history/mod.rs"]
mod history;

#[path = "../src/checker/synth.rs"]
mod synth;
#[path = "../src/checker/zookeeper.rs"]
mod zookeeper;

use std::time::Instant;

use synth::{corrupt_one_read, generate, Flavor, SynthConfig};

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let config = SynthConfig {
        seed: 4,
        ops: if full { 1_000_000 } else { 10_000 },
        keys: 200,
        processes: 20,
        info_rate: 0.05,
        info_reads: true,
        mix: [2, 2, 1],
        value_range: None,
        flavor: Flavor::Versioned,
    };
    let started = Instant::now();
    let mut ops = generate(&config);
    println!(
        "generated {} operations ({} history entries) over {} keys, {} processes, in {:.2} s; \
         RSS {} MiB",
        config.ops,
        ops.len(),
        config.keys,
        config.processes,
        started.elapsed().as_secs_f64(),
        memory_kib("VmRSS:") / 1024
    );
    reset_peak_memory();

    let started = Instant::now();
    let report = zookeeper::check(&ops).expect("well-formed history");
    let elapsed = started.elapsed().as_secs_f64();
    assert!(report.valid, "a generated history must be valid:\n{report}");
    println!(
        "zookeeper checker, valid history: {:.3} s, {:.0} ops/s ({:.0} history entries/s), \
         peak RSS {} MiB; {} reads, {} writes, {} indeterminate",
        elapsed,
        config.ops as f64 / elapsed,
        ops.len() as f64 / elapsed,
        memory_kib("VmHWM:") / 1024,
        report.reads,
        report.writes,
        report.indeterminate_writes
    );

    let corrupted = corrupt_one_read(&mut ops, 7).expect("the history has reads");
    let started = Instant::now();
    let report = zookeeper::check(&ops).expect("well-formed history");
    let elapsed = started.elapsed().as_secs_f64();
    assert!(!report.valid, "op {corrupted} was corrupted:\n{report}");
    println!(
        "zookeeper checker, one read corrupted (op {corrupted}): {:.3} s, {:.0} ops/s, \
         invalid as it must be",
        elapsed,
        config.ops as f64 / elapsed
    );
    println!("process peak RSS {} MiB", memory_kib("VmHWM:") / 1024);
}

/// A memory figure of this process from `/proc/self/status`, in KiB (0 if unavailable).
fn memory_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Resets the peak RSS (`VmHWM`) to the current RSS, so the next reading is the checker's.
fn reset_peak_memory() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
