//! `stampede vm up|provision|down|status`: a cluster of Debian guests under qemu on this machine.

use std::process::ExitCode;

use crate::cluster::{self, vm};

/// Arguments of `stampede vm`.
#[derive(Debug, clap::Args)]
pub struct VmArgs {
    #[command(subcommand)]
    action: Action,
    /// The VM cluster's name (prefix of its bridge and taps).
    #[arg(long, default_value = "vms", global = true)]
    name: String,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Build the image if needed and boot the guests; write their inventory and known_hosts.
    Up {
        /// Number of guests.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// The guests' private /24 (guest i gets .i, this machine .254).
        #[arg(long, default_value = "10.242.0.0/24")]
        subnet: String,
        /// Memory per guest, in MiB.
        #[arg(long, default_value_t = 1024)]
        memory_mb: u32,
        /// Virtual CPUs per guest.
        #[arg(long, default_value_t = 1)]
        cpus: u32,
        /// The backend (default: KVM if a probe boot succeeds, else TCG).
        #[arg(long, value_enum)]
        backend: Option<vm::Backend>,
    },
    /// Run the project's playbook on the guests (installing ansible with apt-get if missing).
    Provision {
        /// The playbook (relative paths from the current directory).
        #[arg(long, default_value = vm::DEFAULT_PLAYBOOK)]
        playbook: std::path::PathBuf,
    },
    /// Kill the guests and remove their taps, bridge, overlays and state (the image stays).
    Down,
    /// Say which guests run and answer on SSH.
    Status,
    /// The guests' time server (started by `up`, stopped by `down`).
    #[command(hide = true)]
    ServeTime {
        /// The address and UDP port to answer NTP requests on.
        #[arg(long)]
        listen: std::net::SocketAddr,
    },
}

/// Runs `stampede vm`.
pub fn run(args: VmArgs) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Up {
            nodes,
            subnet,
            memory_mb,
            cpus,
            backend,
        } => {
            let spec = vm::VmSpec {
                name: args.name.clone(),
                nodes,
                subnet: cluster::parse_subnet(&subnet)?,
                memory_mb,
                cpus,
            };
            let started = std::time::Instant::now();
            let made = vm::up(spec, backend)?;
            println!(
                "VM cluster {} is up with {nodes} guests ({:?}) in {} s: inventory {}, known_hosts {}",
                args.name,
                made.backend(),
                started.elapsed().as_secs(),
                made.inventory_file().display(),
                made.known_hosts_file().display(),
            );
            println!(
                "provision them:  stampede vm provision --name {}",
                args.name
            );
            let playbook = made.playbook_command(std::path::Path::new(vm::DEFAULT_PLAYBOOK));
            println!("  (it runs:      {playbook})");
            println!("then test:       {}", test_command(&made));
        }
        Action::Provision { playbook } => {
            let cluster = vm::VmCluster::named(&args.name)?;
            let started = std::time::Instant::now();
            vm::provision(&cluster, &playbook)?;
            println!(
                "VM cluster {} is provisioned in {} s\nthen test:  {}",
                args.name,
                started.elapsed().as_secs(),
                test_command(&cluster),
            );
        }
        Action::ServeTime { listen } => vm::serve_time(listen)?,
        Action::Down => {
            vm::down(&args.name)?;
            println!("VM cluster {} is down", args.name);
        }
        Action::Status => {
            let guests = vm::status(&args.name)?;
            if guests.is_empty() {
                println!("VM cluster {} is not up", args.name);
                return Ok(ExitCode::from(1));
            }
            let mut all_up = true;
            for g in &guests {
                let up = g.pid.is_some() && g.ssh_reachable;
                all_up &= up;
                let emulator = g
                    .pid
                    .map(|p| format!("qemu pid {p}"))
                    .unwrap_or_else(|| "no emulator".into());
                let ssh = if g.ssh_reachable {
                    "ssh answers"
                } else {
                    "ssh does not answer"
                };
                let state = if up { "up  " } else { "DOWN" };
                println!("{:<4} {:<15} {state}  {emulator}, {ssh}", g.name, g.address);
            }
            return Ok(ExitCode::from(if all_up { 0 } else { 1 }));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// How long the test `up` and `provision` print runs: long enough for every fault of
/// `nemeses/vm.yaml` to start in turn, 10 s apart and 10 s long (the workload's nemesis
/// interval and duration), on emulated guests, where a clock fault took 48 s to start and
/// 90 s to heal on a loaded machine (60 s and 2 m reached only the first two faults; in 5 m
/// the fourth started at 279 s).
const TEST_TIME_LIMIT: &str = "5m";

/// The `stampede test` command line that runs against the guests of `cluster` under
/// `nemeses/vm.yaml`.
fn test_command(cluster: &vm::VmCluster) -> String {
    format!(
        "stampede test --nodes-file {} --ssh-key {} --known-hosts {} --nemesis nemeses/vm.yaml \
         --time-limit {TEST_TIME_LIMIT}",
        cluster.inventory_file().display(),
        cluster.key_file().display(),
        cluster.known_hosts_file().display(),
    )
}
