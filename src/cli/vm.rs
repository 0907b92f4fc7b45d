//! `stampede vm up|down|status`: a cluster of Debian guests under qemu on this machine.

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
            let inventory = made.inventory_file();
            println!(
                "VM cluster {} is up with {nodes} guests ({:?}) in {} s: inventory {}, known_hosts {}\n\
                 provision them:  ansible-playbook -i {inv} ansible/stampede.yml -e stampede_ssh_public_key={key}.pub --ssh-common-args='-o UserKnownHostsFile={known}'\n\
                 then test:       stampede test --nodes-file {inv} --ssh-key {key} --known-hosts {known}",
                args.name,
                made.backend(),
                started.elapsed().as_secs(),
                inventory.display(),
                made.known_hosts_file().display(),
                inv = inventory.display(),
                key = made.key_file().display(),
                known = made.known_hosts_file().display(),
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
