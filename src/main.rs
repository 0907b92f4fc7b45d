//! `stampede`: a Jepsen-style black-box test harness for ZooKeeper.
//!
//! A run flows through the modules in this order, and each module uses only the ones before
//! it (`layers.rs` checks it):
//! [`config`] (workload and nemesis files, durations) → [`control`] (SSH to nodes) →
//! [`cluster`] (local namespace nodes) → [`db`] (ZooKeeper or keeperd on the nodes) →
//! [`history`] (recorded operations, and when faults were active) → [`nemesis`] (faults and
//! their healing) → [`client`] (sessions and how operations end) → [`generator`] (pacing, the
//! nemesis schedule, the heal) → [`checker`] (models and the checkers every workload shares)
//! → [`report`] (plots, timelines) → [`workload`] (each workload: what its processes run,
//! how its history is judged, its figures — Jepsen's shape, composing the stages before it)
//! → [`store`] (the results folder) → [`cli`] (the commands a person types, with [`suite`]
//! and [`serve`]). [`progress`] draws the progress bar of a run.

/// Declares the modules named, each with its registry entry `ENTRY`, and lists those entries
/// in the constant `$registry`: the workloads' registry and the databases'.
macro_rules! registry {
    ($(#[$doc:meta])* $registry:ident: $entry:ty { $($name:ident),* $(,)? }) => {
        $(pub mod $name;)*
        $(#[$doc])*
        pub const $registry: &[&$entry] = &[$(&$name::ENTRY),*];
    };
}

mod checker;
mod cli;
mod client;
mod cluster;
mod config;
mod control;
mod db;
mod engine;
mod generator;
mod history;
#[cfg(test)]
mod layers;
mod nemesis;
mod progress;
mod report;
mod serve;
mod store;
mod suite;
mod workload;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
