//! The command line: parses arguments and hands each subcommand to its stage.

mod agent;
mod agent_corrupt;
mod agent_lazyfs;
mod agent_trigger;
mod check;
mod check_file;
mod cluster;
mod compare;
mod db;
mod exec;
mod holder;
mod nemesis;
mod serve;
mod suite;
mod sweep;
mod targets;
mod test;
mod verdict;
mod vm;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A Jepsen-style black-box test harness for ZooKeeper.
#[derive(Debug, Parser)]
#[command(name = "stampede", version, about)]
struct Cli {
    /// More log output (-v: debug, -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a test: workload + nemesis against the database, then check and plot the history.
    Test(test::TestArgs),
    /// Make, remove or inspect the local cluster of namespace nodes.
    Cluster(cluster::ClusterArgs),
    /// Boot, remove or inspect a cluster of Debian guests under qemu on this machine.
    Vm(vm::VmArgs),
    /// Set up, tear down or inspect the database on the nodes.
    Db(db::DbArgs),
    /// Run a shell command as root on the nodes, over SSH.
    Exec(exec::ExecArgs),
    /// Heal every fault on the nodes (after a controller crash).
    Heal(nemesis::HealArgs),
    /// Inject a fault by hand.
    Nemesis(nemesis::NemesisArgs),
    /// The packet-fault agent run on nodes without netem (started by the packet nemesis).
    #[command(hide = true)]
    AgentNetem(agent::AgentArgs),
    /// Damages a server's data file (run on a node by the corrupt nemesis).
    #[command(hide = true)]
    AgentCorrupt(agent_corrupt::AgentCorruptArgs),
    /// The log-trigger agent (started by a fault with `trigger:`).
    #[command(hide = true)]
    AgentTrigger(agent_trigger::AgentTriggerArgs),
    /// The un-fsynced-data layer run on nodes (by the lose-unfsynced nemesis).
    #[command(hide = true)]
    AgentLazyfs(agent_lazyfs::AgentLazyfsArgs),
    /// Check stored histories: history files (stampede's, Jepsen EDN or logs), results
    /// folders, or folders of them.
    #[command(after_help = check::AFTER_HELP)]
    Check(check::CheckArgs),
    /// Run a matrix of tests unattended (a suite file), with a summary, JUnit XML and HTML.
    Suite(suite::SuiteArgs),
    /// Serve the results folder as web pages (runs, suites, trends), on localhost.
    Serve(serve::ServeArgs),
    /// Compare test runs: a table of verdicts, lock latencies and herd load, and plots.
    Compare(compare::CompareArgs),
}

/// Parses the command line, runs the command and turns its outcome into an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Test(args) => runtime()?.block_on(test::run(args)),
        Command::Cluster(args) => cluster::run(args),
        Command::Vm(args) => vm::run(args),
        Command::Check(args) => check::run(args),
        Command::AgentNetem(args) => agent::run(args),
        Command::AgentCorrupt(args) => agent_corrupt::run(args),
        Command::AgentTrigger(args) => agent_trigger::run(args),
        Command::AgentLazyfs(args) => agent_lazyfs::run(args),
        Command::Db(args) => runtime()?.block_on(db::run(args)),
        Command::Exec(args) => runtime()?.block_on(exec::run(args)),
        Command::Heal(args) => runtime()?.block_on(nemesis::heal(args)),
        Command::Nemesis(args) => runtime()?.block_on(nemesis::run(args)),
        Command::Suite(args) => runtime()?.block_on(suite::run(args)),
        Command::Serve(args) => serve::run(args),
        Command::Compare(args) => compare::run(args),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!(
            "stampede={level},zookeeper_client={},warn",
            if verbose > 0 { "warn" } else { "off" }
        ))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
