//! Real VMs on one machine: `stampede vm up` boots N Debian guests under qemu on a bridge of
//! stampede's own, each with its own address in a private /24, and writes an ansible
//! inventory (which is also stampede's nodes file) and a known_hosts file for them. The
//! guests come fresh from the image (a sudoer `debian` with a password and the provider's
//! key, nothing of stampede's installed): the playbook in `ansible/` provisions them as it
//! would cloud VMs ([`provision`]). A guest's emulator can be killed and booted again
//! ([`power_off`], [`power_on`]): the power-loss nemesis.

mod image;
mod ntp;
mod provision;
mod qemu;

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

pub use ntp::serve as serve_time;
pub use provision::{provision, DEFAULT_PLAYBOOK};
pub use qemu::Backend;

use super::local;

/// Where VM clusters keep their state: overlays, pid files, consoles, inventory, keys.
pub const STATE_ROOT: &str = "/var/lib/stampede/vms";

/// The user the image gives every guest (a sudoer with a password, as on a fresh cloud VM).
pub const GUEST_USER: &str = "debian";

/// What a VM cluster is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmSpec {
    /// Short name; prefixes the bridge and taps.
    pub name: String,
    /// Number of guests.
    pub nodes: usize,
    /// The first three octets of the private /24 (guest i gets `.i`, the bridge `.254`).
    pub subnet: [u8; 3],
    /// Memory per guest, in MiB.
    pub memory_mb: u32,
    /// Virtual CPUs per guest.
    pub cpus: u32,
}

/// A VM cluster's saved state: its spec and the backend its guests run on.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Saved {
    spec: VmSpec,
    backend: Backend,
}

/// A VM cluster on this machine, whether or not it is up.
#[derive(Debug, Clone)]
pub struct VmCluster {
    spec: VmSpec,
    backend: Backend,
    dir: PathBuf,
}

/// What `status` found for one guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestStatus {
    /// Guest name (`n1`).
    pub name: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// The pid of its emulator, when running.
    pub pid: Option<u32>,
    /// Whether its SSH port accepts connections.
    pub ssh_reachable: bool,
}

/// How long a booting guest may take to answer on its SSH port.
const BOOT_LIMIT: Duration = Duration::from_secs(300);

impl VmSpec {
    /// Checks the name, size, subnet and resources.
    pub fn validate(&self) -> anyhow::Result<()> {
        let probe = super::Spec {
            name: self.name.clone(),
            nodes: self.nodes,
            subnet: self.subnet,
        };
        probe.validate()?;
        if !(1..=9).contains(&self.nodes) {
            bail!(
                "--nodes {} is out of range: a VM cluster has 1 to 9 guests",
                self.nodes
            );
        }
        if !(256..=65536).contains(&self.memory_mb) {
            bail!(
                "--memory-mb {} is out of range: 256 to 65536",
                self.memory_mb
            );
        }
        if !(1..=64).contains(&self.cpus) {
            bail!("--cpus {} is out of range: 1 to 64", self.cpus);
        }
        Ok(())
    }
}

impl VmCluster {
    /// The VM cluster called `name`, as saved by `up`; an error when it is not up.
    pub fn named(name: &str) -> anyhow::Result<VmCluster> {
        let dir = Path::new(STATE_ROOT).join(name);
        let text = std::fs::read_to_string(dir.join("vm.json"))
            .with_context(|| format!("VM cluster {name} is not up (no {})", dir.display()))?;
        let saved: Saved = serde_json::from_str(&text)
            .with_context(|| format!("bad {}", dir.join("vm.json").display()))?;
        Ok(VmCluster {
            spec: saved.spec,
            backend: saved.backend,
            dir,
        })
    }

    /// The backend its guests run on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The ansible inventory of its guests, which is also stampede's nodes file.
    pub fn inventory_file(&self) -> PathBuf {
        self.dir.join("inventory.ini")
    }

    /// The key the playbook authorizes and stampede logs in with (not the provider's).
    pub fn key_file(&self) -> PathBuf {
        self.dir.join("id_ed25519")
    }

    /// The guests' host keys, scanned at their first boot.
    pub fn known_hosts_file(&self) -> PathBuf {
        self.dir.join("known_hosts")
    }

    fn bridge(&self) -> String {
        format!("{}-vbr", self.spec.name)
    }

    /// The pid file of the guests' time server.
    fn time_server_pid_file(&self) -> PathBuf {
        self.dir.join("time-server.pid")
    }

    /// The pid of the guests' time server, when it runs.
    fn time_server_pid(&self) -> Option<u32> {
        local::pid_in_file(&self.time_server_pid_file(), TIME_SERVER_COMMAND)
    }

    fn tap(&self, i: usize) -> String {
        format!("{}-vt{i}", self.spec.name)
    }

    fn address(&self, i: usize) -> Ipv4Addr {
        let [a, b, c] = self.spec.subnet;
        Ipv4Addr::new(a, b, c, i as u8)
    }

    fn guest(&self, i: usize) -> qemu::Guest {
        let [_, b, c] = self.spec.subnet;
        qemu::Guest {
            id: format!("stampede-vm-{}-n{i}", self.spec.name),
            name: format!("n{i}"),
            address: self.address(i),
            tap: self.tap(i),
            mac: format!("52:54:00:{b:02x}:{c:02x}:{i:02x}"),
            time_server: Some(self.address(254)),
            dir: self.dir.join(format!("n{i}")),
            memory_mb: self.spec.memory_mb,
            cpus: self.spec.cpus,
            backend: self.backend,
        }
    }

    fn guest_indices(&self) -> std::ops::RangeInclusive<usize> {
        1..=self.spec.nodes
    }
}

/// Builds the image if needed (cached between runs), picks the backend, and boots the
/// guests of `spec`; returns once every guest answers on its SSH port. Idempotent: guests
/// already running are left alone.
pub fn up(spec: VmSpec, backend: Option<Backend>) -> anyhow::Result<VmCluster> {
    spec.validate()?;
    super::check_platform()?;
    let dir = Path::new(STATE_ROOT).join(&spec.name);
    if let Ok(existing) = VmCluster::named(&spec.name) {
        if existing.spec != spec {
            bail!(
                "VM cluster {} is already up with another spec: run `stampede vm down --name {}` first",
                spec.name,
                spec.name
            );
        }
    }
    if let Some(other) = cluster_on_subnet(&spec) {
        bail!(
            "subnet {}.{}.{}.0/24 is already used by VM cluster {other}",
            spec.subnet[0],
            spec.subnet[1],
            spec.subnet[2]
        );
    }
    qemu::install()?;
    let built = image::ensure()?;
    let backend = match backend {
        Some(b) => b,
        None => qemu::pick_backend(&built)?,
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let cluster = VmCluster { spec, backend, dir };
    std::fs::write(
        cluster.dir.join("vm.json"),
        serde_json::to_vec_pretty(&Saved {
            spec: cluster.spec.clone(),
            backend,
        })?,
    )?;
    super::ensure_key(&cluster.key_file())?;
    ensure_bridge(&cluster)?;
    ensure_time_server(&cluster)?;
    let started = Instant::now();
    for i in cluster.guest_indices() {
        local::ensure_tap(&cluster.tap(i), &cluster.bridge())?;
        let guest = cluster.guest(i);
        if guest.pid().is_none() {
            guest.boot(&built)?;
        }
    }
    for i in cluster.guest_indices() {
        wait_for_ssh(&cluster.guest(i), started + BOOT_LIMIT)?;
    }
    write_known_hosts(&cluster)?;
    std::fs::write(cluster.inventory_file(), inventory(&cluster, &built)?)?;
    Ok(cluster)
}

fn cluster_on_subnet(spec: &VmSpec) -> Option<String> {
    let entries = std::fs::read_dir(STATE_ROOT).ok()?;
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| VmCluster::named(&e.file_name().to_string_lossy()).ok())
        .find(|c| c.spec.name != spec.name && c.spec.subnet == spec.subnet)
        .map(|c| c.spec.name)
}

fn ensure_bridge(cluster: &VmCluster) -> anyhow::Result<()> {
    let addr = format!("{}/24", cluster.address(254));
    local::ensure_bridge(&cluster.bridge(), &addr)
}

/// The hidden `stampede vm` action that runs the guests' time server.
const TIME_SERVER_COMMAND: &str = "serve-time";

/// Starts the guests' time server on the bridge address (NTP, port 123) unless it runs: a
/// `stampede vm serve-time` process of its own, its pid in the cluster's folder.
fn ensure_time_server(cluster: &VmCluster) -> anyhow::Result<()> {
    if cluster.time_server_pid().is_some() {
        return Ok(());
    }
    let listen = format!("{}:123", cluster.address(254));
    let log_path = cluster.dir.join("time-server.log");
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["vm", TIME_SERVER_COMMAND, "--listen", &listen])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("cannot start the guests' time server")?;
    std::thread::sleep(Duration::from_millis(300));
    if let Some(status) = child.try_wait()? {
        let said = std::fs::read_to_string(&log_path).unwrap_or_default();
        bail!(
            "the guests' time server on {listen} exited ({status}): {}",
            said.trim()
        );
    }
    std::fs::write(cluster.time_server_pid_file(), child.id().to_string())?;
    Ok(())
}

/// Stops the guests' time server, if it runs.
fn stop_time_server(cluster: &VmCluster) -> anyhow::Result<()> {
    let Some(pid) = cluster.time_server_pid() else {
        return Ok(());
    };
    // The pid is this cluster's time server: `time_server_pid` checked its command line.
    if !local::kill_and_wait(pid, Duration::from_secs(5)) {
        bail!("the guests' time server (pid {pid}) survives SIGKILL");
    }
    Ok(())
}

fn wait_for_ssh(guest: &qemu::Guest, deadline: Instant) -> anyhow::Result<()> {
    let addr = SocketAddr::from((guest.address, 22));
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return Ok(());
        }
        if guest.pid().is_none() {
            bail!(
                "guest {} stopped while booting (see {})",
                guest.name,
                guest.console().display()
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    bail!(
        "guest {} does not answer on {addr} after {} s (see {})",
        guest.name,
        BOOT_LIMIT.as_secs(),
        guest.console().display()
    )
}

/// Scans each guest's ed25519 host key (generated at its first boot) into known_hosts.
fn write_known_hosts(cluster: &VmCluster) -> anyhow::Result<()> {
    let mut lines = String::new();
    for i in cluster.guest_indices() {
        let addr = cluster.address(i).to_string();
        let mut scanned = String::new();
        for _ in 0..20 {
            scanned =
                local::run("ssh-keyscan", &["-T", "5", "-t", "ed25519", &addr]).unwrap_or_default();
            if !scanned.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if scanned.is_empty() {
            bail!("cannot read the host key of guest n{i} ({addr}) with ssh-keyscan");
        }
        lines.push_str(&scanned);
        lines.push('\n');
    }
    std::fs::write(cluster.known_hosts_file(), lines)?;
    Ok(())
}

fn inventory(cluster: &VmCluster, built: &image::Image) -> anyhow::Result<String> {
    let hosts: String = cluster
        .guest_indices()
        .map(|i| format!("n{i} ansible_host={}\n", cluster.address(i)))
        .collect();
    Ok(format!(
        "# Written by `stampede vm up` for VM cluster {name}: the playbook's inventory and\n\
         # stampede's nodes file. The guests are fresh: the provider's key logs in as {user},\n\
         # who has sudo with a password, until the playbook authorizes {key}.pub.\n\
         [zookeeper]\n{hosts}\n[zookeeper:vars]\n\
         ansible_user={user}\n\
         ansible_ssh_private_key_file={provider}\n\
         ansible_become_password={password}\n",
        name = cluster.spec.name,
        user = GUEST_USER,
        key = cluster.key_file().display(),
        provider = built.provider_key.display(),
        password = image::password()?,
    ))
}

/// Each guest of the VM cluster called `name`: its emulator and SSH port.
pub fn status(name: &str) -> anyhow::Result<Vec<GuestStatus>> {
    let Ok(cluster) = VmCluster::named(name) else {
        return Ok(Vec::new());
    };
    Ok(cluster
        .guest_indices()
        .map(|i| {
            let guest = cluster.guest(i);
            GuestStatus {
                name: guest.name.clone(),
                address: guest.address,
                pid: guest.pid(),
                ssh_reachable: TcpStream::connect_timeout(
                    &SocketAddr::from((guest.address, 22)),
                    Duration::from_millis(300),
                )
                .is_ok(),
            }
        })
        .collect())
}

/// Removes everything `up` made for the VM cluster `name`: its emulators (by pid), taps,
/// bridge, overlays and state. The cached image stays for the next `up`.
pub fn down(name: &str) -> anyhow::Result<()> {
    super::check_platform()?;
    let dir = Path::new(STATE_ROOT).join(name);
    if let Ok(cluster) = VmCluster::named(name) {
        for i in cluster.guest_indices() {
            cluster.guest(i).kill()?;
            local::remove_link(&cluster.tap(i))?;
        }
        stop_time_server(&cluster)?;
        local::remove_link(&cluster.bridge())?;
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove {}", dir.display()))?;
    }
    Ok(())
}

/// The guest of a VM cluster on this machine whose address is `host`.
fn guest_at(host: &str) -> Option<qemu::Guest> {
    let entries = std::fs::read_dir(STATE_ROOT).ok()?;
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| VmCluster::named(&e.file_name().to_string_lossy()).ok())
        .find_map(|c| {
            c.guest_indices()
                .map(|i| c.guest(i))
                .find(|g| g.address.to_string() == host)
        })
}

/// Whether `host` is the address of a guest of a VM cluster on this machine (whose power
/// stampede can cut).
pub fn is_guest(host: &str) -> bool {
    guest_at(host).is_some()
}

/// Cuts the power of the guest at `host`: its emulator is killed with SIGKILL, so whatever
/// the guest had not flushed to its disk is lost.
pub fn power_off(host: &str) -> anyhow::Result<()> {
    let guest = guest_at(host).with_context(|| format!("{host} is not a stampede VM guest"))?;
    guest.kill()
}

/// Boots the guest at `host` again if it is off, and waits until it answers on its SSH
/// port; returns whether it had to be booted.
pub fn power_on(host: &str) -> anyhow::Result<bool> {
    let guest = guest_at(host).with_context(|| format!("{host} is not a stampede VM guest"))?;
    if guest.pid().is_some() {
        return Ok(false);
    }
    let built = image::cached()?;
    guest.boot(&built)?;
    wait_for_ssh(&guest, Instant::now() + BOOT_LIMIT)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> VmSpec {
        VmSpec {
            name: "vmt".into(),
            nodes: 3,
            subnet: [10, 9, 8],
            memory_mb: 1024,
            cpus: 1,
        }
    }

    #[test]
    fn specs_are_validated() {
        assert!(spec().validate().is_ok());
        assert!(VmSpec {
            nodes: 10,
            ..spec()
        }
        .validate()
        .is_err());
        assert!(VmSpec {
            memory_mb: 64,
            ..spec()
        }
        .validate()
        .is_err());
        assert!(VmSpec { cpus: 0, ..spec() }.validate().is_err());
        assert!(VmSpec {
            name: "Bad-Name".into(),
            ..spec()
        }
        .validate()
        .is_err());
    }

    #[test]
    fn guests_get_distinct_names_addresses_and_macs() {
        let cluster = VmCluster {
            spec: VmSpec {
                name: "abcdefghi".into(),
                ..spec()
            },
            backend: Backend::Tcg,
            dir: PathBuf::from("/tmp/x"),
        };
        let (a, b) = (cluster.guest(1), cluster.guest(2));
        assert_eq!(a.address, Ipv4Addr::new(10, 9, 8, 1));
        assert_ne!(a.mac, b.mac);
        assert_eq!(a.mac, "52:54:00:09:08:01");
        assert!(cluster.tap(9).len() <= 15 && cluster.bridge().len() <= 15);
    }
}
