//! The local cluster: nodes n1..nN as Linux network namespaces on one machine, joined by a
//! bridge, each with its own address and its own sshd, so that the rest of stampede treats
//! them exactly like remote VMs (reached only over SSH).

mod local;
mod packages;
mod subnet;
pub mod vm;

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use crate::control::{HostKeyPolicy, Node, SshOptions};

/// Where local clusters keep their keys, sshd configs and nodes files.
pub const STATE_ROOT: &str = "/var/lib/stampede/clusters";

/// The name of the cluster used when none is given.
pub const DEFAULT_NAME: &str = "stampede";

/// What a local cluster is: its name, size and address prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// Short name; prefixes the namespaces, veths and bridge.
    pub name: String,
    /// Number of nodes.
    pub nodes: usize,
    /// The first three octets of the cluster's private /24 (node i gets `.i`, the bridge `.254`).
    pub subnet: [u8; 3],
}

/// The state a cluster leaves on the controller, and the names it gives things.
#[derive(Debug, Clone)]
pub struct Cluster {
    spec: Spec,
    dir: PathBuf,
}

/// What `status` found for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeStatus {
    /// Node name (`n1`).
    pub name: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// Whether its namespace exists.
    pub namespace: bool,
    /// The pid of its sshd, when running.
    pub sshd_pid: Option<u32>,
    /// Whether its SSH port accepts connections from the controller.
    pub ssh_reachable: bool,
}

impl Spec {
    /// Checks that the name and size are usable.
    pub fn validate(&self) -> anyhow::Result<()> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 9
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        if !name_ok {
            bail!(
                "cluster name {:?} must be 1 to 9 lowercase letters or digits",
                self.name
            );
        }
        if !(1..=50).contains(&self.nodes) {
            bail!(
                "--nodes {} is out of range: a local cluster has 1 to 50 nodes",
                self.nodes
            );
        }
        if !(self.subnet[0] == 10 || (self.subnet[0] == 192 && self.subnet[1] == 168)) {
            bail!(
                "subnet {}.{}.{}.0/24 is not private: use 10.x.y.0/24 or 192.168.y.0/24",
                self.subnet[0],
                self.subnet[1],
                self.subnet[2]
            );
        }
        Ok(())
    }
}

/// The subnet of a cluster made without one named: the saved one of an existing cluster
/// `name`, else the first free /24 of 10.241.0.0/16.
pub fn subnet_for(name: &str) -> anyhow::Result<[u8; 3]> {
    match Cluster::named(name).saved_spec() {
        Ok(saved) => Ok(saved.subnet),
        Err(_) => subnet::free(name),
    }
}

/// Parses a subnet given as `A.B.C.0/24` (or `A.B.C`).
pub fn parse_subnet(text: &str) -> anyhow::Result<[u8; 3]> {
    let base = text.strip_suffix("/24").unwrap_or(text);
    let base = base.strip_suffix(".0").unwrap_or(base);
    let octets: Vec<u8> = base
        .split('.')
        .map(|o| o.parse::<u8>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("bad subnet {text:?}: expected A.B.C.0/24"))?;
    match octets.as_slice() {
        [a, b, c] => Ok([*a, *b, *c]),
        _ => bail!("bad subnet {text:?}: expected A.B.C.0/24"),
    }
}

impl Cluster {
    /// The cluster called `name`, whether or not it is up.
    pub fn named(name: &str) -> Cluster {
        let spec = Spec {
            name: name.to_string(),
            nodes: 0,
            subnet: [0; 3],
        };
        let dir = Path::new(STATE_ROOT).join(name);
        let mut cluster = Cluster { spec, dir };
        if let Ok(saved) = cluster.saved_spec() {
            cluster.spec = saved;
        }
        cluster
    }

    fn for_spec(spec: Spec) -> Cluster {
        let dir = Path::new(STATE_ROOT).join(&spec.name);
        Cluster { spec, dir }
    }

    /// The nodes file `up` writes: one `nI root@ADDR:22` per line.
    pub fn nodes_file(&self) -> PathBuf {
        self.dir.join("nodes")
    }

    /// The private key that logs in to every node as root.
    pub fn key_file(&self) -> PathBuf {
        self.dir.join("id_ed25519")
    }

    /// The known_hosts file holding every node's host key.
    pub fn known_hosts_file(&self) -> PathBuf {
        self.dir.join("known_hosts")
    }

    /// Whether `up` has completed for this cluster (its nodes file exists).
    pub fn exists(&self) -> bool {
        self.nodes_file().exists()
    }

    /// SSH options for reaching this cluster's nodes (host keys: accept-new).
    pub fn ssh_options(&self) -> SshOptions {
        SshOptions {
            key: Some(self.key_file()),
            known_hosts: self.known_hosts_file(),
            policy: HostKeyPolicy::AcceptNew,
            connect_timeout: Duration::from_secs(5),
        }
    }

    /// The nodes, as the nodes file lists them.
    pub fn nodes(&self) -> anyhow::Result<Vec<Node>> {
        crate::control::read_nodes_file(&self.nodes_file(), "root")
    }

    fn saved_spec(&self) -> anyhow::Result<Spec> {
        let text = std::fs::read_to_string(self.dir.join("cluster.json"))?;
        Ok(serde_json::from_str(&text)?)
    }

    fn namespace(&self, i: usize) -> String {
        format!("{}-n{i}", self.spec.name)
    }

    fn veth(&self, i: usize) -> String {
        format!("{}-v{i}", self.spec.name)
    }

    fn bridge(&self) -> String {
        format!("{}-br", self.spec.name)
    }

    fn address(&self, i: usize) -> Ipv4Addr {
        let [a, b, c] = self.spec.subnet;
        Ipv4Addr::new(a, b, c, i as u8)
    }

    fn node_dir(&self, i: usize) -> PathBuf {
        self.dir.join(format!("n{i}"))
    }

    fn sshd_pid(&self, i: usize) -> Option<u32> {
        let config = self.node_dir(i).join("sshd_config");
        local::pid_in_file(
            &self.node_dir(i).join("sshd.pid"),
            &config.display().to_string(),
        )
    }
}

/// Fails with a sentence saying how to proceed when the local cluster cannot be made here.
pub fn check_platform() -> anyhow::Result<()> {
    if !cfg!(target_os = "linux") {
        bail!("the local cluster needs Linux network namespaces; on this OS, run against real nodes with --nodes-file FILE --ssh-key KEY");
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("the local cluster needs root (namespaces, bridge, sshd): run as root, or run against real nodes with --nodes-file FILE --ssh-key KEY");
    }
    Ok(())
}

/// Makes (or repairs) the cluster `spec`, idempotently, and returns it.
pub fn up(spec: Spec) -> anyhow::Result<Cluster> {
    spec.validate()?;
    check_platform()?;
    let existing = Cluster::named(&spec.name);
    if let Some(user) = subnet::user_of(spec.subnet, &spec.name)? {
        let [a, b, c] = spec.subnet;
        bail!(
            "subnet {a}.{b}.{c}.0/24 is in use by {user}: name another with --subnet (or leave \
             it out to take a free one)"
        );
    }
    if let Ok(saved) = existing.saved_spec() {
        if saved.subnet != spec.subnet {
            let [a, b, c] = saved.subnet;
            bail!("cluster {} already exists on {a}.{b}.{c}.0/24: run `stampede cluster down` first to change its subnet", spec.name);
        }
        if saved.nodes > spec.nodes {
            for i in spec.nodes + 1..=saved.nodes {
                remove_node(&existing, i)?;
            }
        }
    }
    packages::ensure(packages::NODE_IMAGE)?;
    let cluster = Cluster::for_spec(spec);
    std::fs::create_dir_all(&cluster.dir)
        .with_context(|| format!("cannot create {}", cluster.dir.display()))?;
    std::fs::write(
        cluster.dir.join("cluster.json"),
        serde_json::to_vec_pretty(&cluster.spec)?,
    )?;
    ensure_key(&cluster.key_file())?;
    std::fs::copy(
        cluster.dir.join("id_ed25519.pub"),
        cluster.dir.join("authorized_keys"),
    )?;
    ensure_bridge(&cluster)?;
    for i in 1..=cluster.spec.nodes {
        ensure_namespace(&cluster, i)?;
        ensure_sshd(&cluster, i)?;
    }
    write_known_hosts(&cluster)?;
    let nodes: String = (1..=cluster.spec.nodes)
        .map(|i| format!("n{i} root@{}:22\n", cluster.address(i)))
        .collect();
    std::fs::write(cluster.nodes_file(), nodes)?;
    Ok(cluster)
}

fn ensure_key(key: &Path) -> anyhow::Result<()> {
    if key.exists() && key.with_extension("pub").exists() {
        return Ok(());
    }
    let _ = std::fs::remove_file(key);
    let path = key.display().to_string();
    local::run(
        "ssh-keygen",
        &[
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "stampede-cluster",
            "-f",
            &path,
        ],
    )?;
    Ok(())
}

fn ensure_bridge(cluster: &Cluster) -> anyhow::Result<()> {
    local::ensure_bridge(&cluster.bridge(), &format!("{}/24", cluster.address(254)))
}

fn ensure_namespace(cluster: &Cluster, i: usize) -> anyhow::Result<()> {
    let ns = cluster.namespace(i);
    let veth = cluster.veth(i);
    if !local::succeeds("ip", &["netns", "exec", &ns, "true"]) {
        local::run("ip", &["netns", "add", &ns])?;
    }
    let in_ns = |args: &[&str]| {
        let mut all = vec!["-n", ns.as_str()];
        all.extend_from_slice(args);
        local::run("ip", &all)
    };
    if !local::succeeds("ip", &["-n", &ns, "link", "show", "eth0"]) {
        let _ = local::run("ip", &["link", "del", &veth]);
        local::run(
            "ip",
            &[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &ns,
            ],
        )?;
    }
    local::run("ip", &["link", "set", &veth, "master", &cluster.bridge()])?;
    local::run("ip", &["link", "set", &veth, "up"])?;
    let addr = format!("{}/24", cluster.address(i));
    if !in_ns(&["-4", "addr", "show", "dev", "eth0"])?.contains(&addr) {
        in_ns(&["addr", "add", &addr, "dev", "eth0"])?;
    }
    in_ns(&["link", "set", "lo", "up"])?;
    in_ns(&["link", "set", "eth0", "up"])?;
    Ok(())
}

fn ensure_sshd(cluster: &Cluster, i: usize) -> anyhow::Result<()> {
    let dir = cluster.node_dir(i);
    std::fs::create_dir_all(&dir)?;
    let host_key = dir.join("ssh_host_ed25519_key");
    if !host_key.exists() {
        let path = host_key.display().to_string();
        local::run(
            "ssh-keygen",
            &[
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                &format!("n{i}"),
                "-f",
                &path,
            ],
        )?;
    }
    let config = dir.join("sshd_config");
    std::fs::write(&config, sshd_config(cluster, i))?;
    std::fs::create_dir_all("/run/sshd")?;
    if cluster.sshd_pid(i).is_none() {
        let _ = std::fs::remove_file(dir.join("sshd.pid"));
        let config_path = config.display().to_string();
        local::run(
            "ip",
            &[
                "netns",
                "exec",
                &cluster.namespace(i),
                "/usr/sbin/sshd",
                "-f",
                &config_path,
            ],
        )
        .with_context(|| format!("cannot start sshd for n{i}"))?;
    }
    wait_for_ssh(cluster, i)
}

/// The node's sshd settings. `SetEnv SHLVL=1` makes bash, the shell every command runs in,
/// skip `~/.bashrc`: the nodes share the controller's home, and an interactive setup there
/// (a pyenv init costs 150 ms of CPU in each of a run's hundreds of commands) is no part of a
/// node.
fn sshd_config(cluster: &Cluster, i: usize) -> String {
    let dir = cluster.node_dir(i);
    format!(
        "# Written by `stampede cluster up` for node n{i}.\n\
         ListenAddress {addr}:22\n\
         HostKey {dir}/ssh_host_ed25519_key\n\
         PidFile {dir}/sshd.pid\n\
         AuthorizedKeysFile {auth}\n\
         PermitRootLogin prohibit-password\n\
         PasswordAuthentication no\n\
         KbdInteractiveAuthentication no\n\
         UsePAM no\n\
         StrictModes no\n\
         PrintMotd no\n\
         MaxStartups 100:30:200\n\
         MaxSessions 64\n\
         Subsystem sftp internal-sftp\n\
         SetEnv SHLVL=1\n",
        addr = cluster.address(i),
        dir = dir.display(),
        auth = cluster.dir.join("authorized_keys").display(),
    )
}

fn wait_for_ssh(cluster: &Cluster, i: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = SocketAddr::from((cluster.address(i), 22));
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!(
        "sshd of n{i} does not answer on {addr} after 10 s (see {})",
        cluster.node_dir(i).display()
    )
}

fn write_known_hosts(cluster: &Cluster) -> anyhow::Result<()> {
    let mut lines = String::new();
    for i in 1..=cluster.spec.nodes {
        let public = std::fs::read_to_string(cluster.node_dir(i).join("ssh_host_ed25519_key.pub"))?;
        let mut words = public.split_whitespace();
        let (kind, key) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        lines.push_str(&format!("{} {kind} {key}\n", cluster.address(i)));
    }
    std::fs::write(cluster.known_hosts_file(), lines)?;
    Ok(())
}

/// What is up of the cluster called `name`, node by node.
pub fn status(name: &str) -> anyhow::Result<Vec<NodeStatus>> {
    let cluster = Cluster::named(name);
    if cluster.saved_spec().is_err() {
        return Ok(Vec::new());
    }
    Ok((1..=cluster.spec.nodes)
        .map(|i| {
            let address = cluster.address(i);
            NodeStatus {
                name: format!("n{i}"),
                address,
                namespace: local::succeeds("ip", &["netns", "exec", &cluster.namespace(i), "true"]),
                sshd_pid: cluster.sshd_pid(i),
                ssh_reachable: TcpStream::connect_timeout(
                    &SocketAddr::from((address, 22)),
                    Duration::from_millis(300),
                )
                .is_ok(),
            }
        })
        .collect())
}

/// Removes everything `up` made for the cluster called `name`: every process left in its
/// namespaces (sshd, servers), the namespaces, veths, bridge and state files.
pub fn down(name: &str) -> anyhow::Result<()> {
    check_platform()?;
    let cluster = Cluster::named(name);
    let count = cluster
        .saved_spec()
        .map(|s| s.nodes)
        .unwrap_or(0)
        .max(namespaces_of(name).len());
    for i in 1..=count.max(highest_namespace_index(name)) {
        remove_node(&cluster, i)?;
    }
    local::remove_link(&cluster.bridge())?;
    if cluster.dir.exists() {
        std::fs::remove_dir_all(&cluster.dir)
            .with_context(|| format!("cannot remove {}", cluster.dir.display()))?;
    }
    Ok(())
}

fn remove_node(cluster: &Cluster, i: usize) -> anyhow::Result<()> {
    let ns = cluster.namespace(i);
    if local::succeeds("ip", &["netns", "exec", &ns, "true"]) {
        let pids = local::run("ip", &["netns", "pids", &ns])?;
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // SAFETY: kill with a pid read from our own namespace; no memory is involved.
            unsafe {
                libc::kill(pid, libc::SIGCONT);
                libc::kill(pid, libc::SIGKILL);
            }
        }
        wait_until_empty(&ns)?;
        local::run("ip", &["netns", "del", &ns])?;
    }
    if let Some(pid) = cluster.sshd_pid(i) {
        // SAFETY: as above; the pid was checked to be our sshd.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    }
    // Deleting the namespace removes the veth pair, but not always before we look again.
    if local::succeeds("ip", &["link", "show", &cluster.veth(i)])
        && !local::succeeds("ip", &["link", "del", &cluster.veth(i)])
    {
        std::thread::sleep(Duration::from_millis(200));
        if local::succeeds("ip", &["link", "show", &cluster.veth(i)]) {
            bail!("cannot remove the link {}", cluster.veth(i));
        }
    }
    let dir = cluster.node_dir(i);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}

fn wait_until_empty(ns: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if local::run("ip", &["netns", "pids", ns])?.is_empty() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    bail!("processes in namespace {ns} did not exit after SIGKILL")
}

fn namespaces_of(name: &str) -> Vec<String> {
    let prefix = format!("{name}-n");
    local::run("ip", &["netns", "list"])
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|i| i.parse::<usize>().is_ok())
        })
        .map(str::to_string)
        .collect()
}

fn highest_namespace_index(name: &str) -> usize {
    let prefix = format!("{name}-n");
    namespaces_of(name)
        .iter()
        .filter_map(|n| n.strip_prefix(&prefix)?.parse().ok())
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_parse_in_both_forms() {
        assert_eq!(parse_subnet("10.241.0.0/24").unwrap(), [10, 241, 0]);
        assert_eq!(parse_subnet("10.9.8").unwrap(), [10, 9, 8]);
        assert!(parse_subnet("10.300.0.0/24").is_err());
        assert!(parse_subnet("10.0.0.0/16").is_err());
    }

    #[test]
    fn specs_are_validated() {
        let ok = Spec {
            name: "stampede".into(),
            nodes: 5,
            subnet: [10, 241, 0],
        };
        assert!(ok.validate().is_ok());
        assert!(Spec {
            name: "Has-Dash".into(),
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(Spec {
            name: "muchtoolongname".into(),
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(Spec {
            nodes: 0,
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(Spec {
            subnet: [8, 8, 8],
            ..ok
        }
        .validate()
        .is_err());
    }

    #[test]
    fn names_fit_linux_interface_limits() {
        let c = Cluster::for_spec(Spec {
            name: "abcdefghi".into(),
            nodes: 50,
            subnet: [10, 1, 2],
        });
        assert!(c.veth(50).len() <= 15);
        assert!(c.bridge().len() <= 15);
        assert_eq!(c.address(3), Ipv4Addr::new(10, 1, 2, 3));
    }
}
