//! `stampede`: a Jepsen-style black-box test harness for ZooKeeper.
//!
//! The modules follow the pipeline of a test run:
//! [`control`] (SSH to nodes) → [`cluster`] (local namespace nodes) → [`db`] (ZooKeeper on
//! the nodes) → [`nemesis`] (faults and their healing) → [`history`] (recorded operations) →
//! [`checker`] (models and verdicts) → [`cli`] (the commands a person types).

mod checker;
mod cli;
mod client;
mod cluster;
mod config;
mod control;
mod db;
mod generator;
mod history;
mod nemesis;
mod progress;
mod report;
mod serve;
mod suite;
mod workload;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
