//! `stampede`: a Jepsen-style black-box test harness for ZooKeeper.
//!
//! The modules follow the pipeline of a test run:
//! [`control`] (SSH to nodes) → [`cluster`] (local namespace nodes) → [`db`] (ZooKeeper on
//! the nodes) → [`client`] (sessions and how operations end) → [`workload`] (what the
//! processes do) → [`generator`] (pacing and the nemesis schedule) → [`nemesis`] (faults and
//! their healing) → [`history`] (recorded operations) → [`checker`] (models and verdicts) →
//! [`report`] (plots) → [`store`] (the results folder) → [`cli`] (the commands a person
//! types, with [`suite`] and [`serve`]).

mod checker;
mod cli;
mod client;
mod cluster;
mod config;
mod control;
mod db;
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
