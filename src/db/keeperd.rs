//! keeperd, the project's own ZooKeeper-compatible server, as a database under test. On one
//! node it runs standalone; on N nodes every node runs a member of an N-server ensemble
//! (`server.N` lines and `myid` as for ZooKeeper; the last `observers` nodes observe). The
//! binary is built on the controller (or given), uploaded to the nodes, and run with a
//! `zoo.cfg`-style config of its own.
//!
//! Membership changes (the reconfig nemesis) go through keeperd's `reconfig` as stampede's
//! superuser ([`SUPERUSER`], accepted through the config's `superDigest`). keeperd keeps the
//! membership in its data directory, which wins over the config file, and runs a removed
//! server as a non-voting observer: a removed server restarts with its config as it is, so
//! there is no configuration to restore before starting it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use async_trait::async_trait;

use super::{
    member_line, Db, DbOptions, Entry, MemberPorts, ServerProcess, SUPERUSER, SUPER_DIGEST,
};
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};

/// keeperd in the registry: the binary `--keeperd-binary` names (or one built with cargo),
/// with `--keeperd-observers` and `--keeperd-failpoints`.
pub const ENTRY: Entry = Entry {
    name: "keeperd",
    build: |options, nodes| {
        let cfg = KeeperdConfig::from_options(options);
        Ok(Box::new(Keeperd::new(cfg, nodes)?))
    },
};

/// How keeperd is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperdConfig {
    /// A keeperd binary to upload; `None` builds it from this checkout with cargo.
    pub binary: Option<PathBuf>,
    /// Client port.
    pub client_port: u16,
    /// Quorum (learner to leader) port.
    pub quorum_port: u16,
    /// Leader election port.
    pub election_port: u16,
    /// keeperd's basic time unit, in milliseconds (session timeouts are 2 to 20 ticks).
    pub tick_time_ms: u32,
    /// Ticks a learner may take to connect and sync to a leader.
    pub init_limit: u32,
    /// Ticks a learner and its leader may go without hearing each other.
    pub sync_limit: u32,
    /// How many of the nodes (the last ones) are observers rather than voters.
    pub observers: usize,
    /// Failpoints to switch on (needs a binary built with the `failpoints` feature).
    pub failpoints: Vec<String>,
    /// The directory under which the node keeps the server's files (`<dir>/<host>/…`).
    pub dir: String,
    /// Run the server under libfaketime (the local cluster), as for ZooKeeper.
    pub faketime: bool,
    /// The workload file's `db:` settings (the snapshot interval).
    pub settings: super::DbSettings,
}

impl Default for KeeperdConfig {
    fn default() -> Self {
        KeeperdConfig {
            binary: None,
            client_port: 2181,
            quorum_port: 2888,
            election_port: 3888,
            tick_time_ms: 1000,
            init_limit: 10,
            sync_limit: 5,
            observers: 0,
            failpoints: Vec::new(),
            dir: "/var/lib/stampede/keeperd".into(),
            faketime: false,
            settings: super::DbSettings::default(),
        }
    }
}

impl KeeperdConfig {
    /// The defaults, with what `options` says of keeperd, the fake clock and the settings.
    fn from_options(options: &DbOptions) -> KeeperdConfig {
        KeeperdConfig {
            binary: options.keeperd_binary.clone(),
            observers: options.keeperd_observers,
            failpoints: options.keeperd_failpoints.clone(),
            faketime: options.faketime,
            settings: options.settings.clone(),
            ..Default::default()
        }
    }
}

/// Renders keeperd's config for the server on `node` in an ensemble of `nodes` (standalone
/// for one node).
pub fn render_config(cfg: &KeeperdConfig, nodes: &[Node], node: &Node, data_dir: &str) -> String {
    let mut out = format!(
        "# Written by stampede for {name}.\nclientPort={port}\nclientPortAddress={host}\ndataDir={data_dir}\ntickTime={tick}\ninitLimit={init}\nsyncLimit={sync}\n4lw.commands.whitelist=*\n",
        name = node.name,
        port = cfg.client_port,
        host = node.host,
        tick = cfg.tick_time_ms,
        init = cfg.init_limit,
        sync = cfg.sync_limit,
    );
    out.push_str(&cfg.settings.config_lines());
    if nodes.len() > 1 {
        for (i, (_, spec)) in member_specs(cfg, nodes).iter().enumerate() {
            out.push_str(&format!("server.{}={spec}\n", i + 1));
        }
        out.push_str(&format!("superDigest={SUPER_DIGEST}\n"));
    }
    if !cfg.failpoints.is_empty() {
        out.push_str(&format!("failpoints={}\n", cfg.failpoints.join(",")));
    }
    out
}

/// Every node's line in the membership, without the `server.N=` prefix, as keeperd shows
/// it in `/zookeeper/config`: `host:quorum:election:participant|observer;host:client` (the
/// last `observers` nodes observe).
fn member_specs(cfg: &KeeperdConfig, nodes: &[Node]) -> Vec<(Node, String)> {
    let voters = nodes.len() - cfg.observers.min(nodes.len().saturating_sub(1));
    let ports = MemberPorts {
        quorum: cfg.quorum_port,
        election: cfg.election_port,
        client: cfg.client_port,
    };
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.clone(), member_line(&n.host, ports, i >= voters)))
        .collect()
}

/// Builds keeperd in release mode from the checkout stampede was built from and returns the
/// binary's path, as cargo reports it.
fn build_binary() -> anyhow::Result<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    eprintln!("building keeperd (cargo build --release -p keeperd)");
    let out = std::process::Command::new("cargo")
        .args([
            "build",
            "--release",
            "-p",
            "keeperd",
            "--message-format=json",
            "--manifest-path",
        ])
        .arg(&manifest)
        .output()
        .context("cannot run cargo to build keeperd (pass --keeperd-binary PATH)")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "cargo build -p keeperd failed: {}",
            stderr.lines().last().unwrap_or("")
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "keeperd")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("cargo built no keeperd executable")
}

/// keeperd on a set of nodes: one server each.
pub struct Keeperd {
    cfg: KeeperdConfig,
    nodes: Vec<Node>,
}

impl Keeperd {
    /// keeperd configured by `cfg` on `nodes` (an ensemble when there are several).
    pub fn new(cfg: KeeperdConfig, nodes: &[Node]) -> anyhow::Result<Keeperd> {
        if nodes.is_empty() {
            bail!("keeperd needs a node");
        }
        if nodes.len() > 1 && cfg.observers >= nodes.len() {
            bail!(
                "keeperd observers: {} of {} nodes leaves no voter",
                cfg.observers,
                nodes.len()
            );
        }
        if nodes.len() > 255 {
            bail!("keeperd: at most 255 servers, got {}", nodes.len());
        }
        Ok(Keeperd {
            cfg,
            nodes: nodes.to_vec(),
        })
    }

    fn myid(&self, node: &Node) -> anyhow::Result<usize> {
        let i = self.nodes.iter().position(|n| n.name == node.name);
        i.map(|i| i + 1)
            .with_context(|| format!("{} is not a node of this keeperd ensemble", node.name))
    }

    /// The directory of `node`'s server: `<dir>/<node host>`.
    fn home(&self, node: &Node) -> String {
        format!("{}/{}", self.cfg.dir.trim_end_matches('/'), node.host)
    }

    /// Uploads the binary, config, `myid` and clock file to `node`.
    async fn configure(&self, control: &Control, node: &Node, binary: &[u8]) -> anyhow::Result<()> {
        let home = self.home(node);
        control
            .exec(
                node,
                &format!("mkdir -p {h}/data", h = quote(&home)),
                Retry::Idempotent,
            )
            .await?;
        control
            .upload(node, binary.to_vec(), &format!("{home}/keeperd"), 0o755)
            .await?;
        let data = self.data_dir(node);
        let config = render_config(&self.cfg, &self.nodes, node, &data);
        control
            .upload(
                node,
                config.into_bytes(),
                &format!("{home}/keeperd.cfg"),
                0o644,
            )
            .await?;
        let myid = format!("{}\n", self.myid(node)?);
        control
            .upload(node, myid.into_bytes(), &format!("{data}/myid"), 0o644)
            .await?;
        if let Some(file) = self.clock_file(node) {
            control
                .upload(node, b"+0.000\n".to_vec(), &file, 0o644)
                .await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Db for Keeperd {
    fn name(&self) -> &str {
        ENTRY.name
    }

    fn client_address(&self, node: &Node) -> String {
        format!("{}:{}", node.host, self.cfg.client_port)
    }

    fn runs_on(&self, node: &Node) -> bool {
        self.nodes.iter().any(|n| n.name == node.name)
    }

    async fn setup(&self, control: &Control) -> anyhow::Result<()> {
        let binary = match &self.cfg.binary {
            Some(path) => path.clone(),
            None => build_binary()?,
        };
        let data = std::fs::read(&binary)
            .with_context(|| format!("cannot read keeperd binary {}", binary.display()))?;
        let steps = self.nodes.iter().map(|node| {
            let data = &data;
            async move {
                self.configure(control, node, data).await?;
                self.start(control, node).await
            }
        });
        for result in futures::future::join_all(steps).await {
            result?;
        }
        super::wait_until_serving(self, &self.nodes, Duration::from_secs(60)).await
    }

    async fn teardown(&self, control: &Control) -> anyhow::Result<()> {
        super::remove_servers(self, control, &self.nodes).await
    }

    fn process(&self, node: &Node) -> ServerProcess {
        let home = self.home(node);
        ServerProcess {
            config: format!("{home}/keeperd.cfg"),
            command: format!("{h}/keeperd {h}/keeperd.cfg", h = quote(&home)),
            log: "keeperd.log".into(),
            output: "keeperd.log".into(),
            home,
        }
    }

    async fn wipe(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if self.is_running(control, node).await? {
            bail!("on {}: stop the server before wiping its data", node.name);
        }
        // The data goes; the server's id stays.
        let data = quote(&format!("{}/data", self.home(node)));
        control
            .exec(
                node,
                &format!("find {data} -mindepth 1 ! -name myid -delete"),
                Retry::Idempotent,
            )
            .await
            .map(drop)
    }

    fn txn_dir(&self, node: &Node) -> String {
        format!("{}/data", self.home(node))
    }

    fn planned_members(&self) -> Vec<(Node, String)> {
        if self.nodes.len() < 2 {
            return Vec::new();
        }
        member_specs(&self.cfg, &self.nodes)
    }

    fn superuser(&self) -> Option<&str> {
        Some(SUPERUSER)
    }

    fn clock_file(&self, node: &Node) -> Option<String> {
        self.cfg
            .faketime
            .then(|| format!("{}/faketime", self.home(node)))
    }

    fn data_dir(&self, node: &Node) -> String {
        format!("{}/data", self.home(node))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<Node> {
        crate::control::test_nodes(n)
    }

    #[test]
    fn one_node_is_standalone_and_binds_its_address() {
        let nodes = nodes(1);
        let text = render_config(&KeeperdConfig::default(), &nodes, &nodes[0], "/d/data");
        for line in [
            "clientPort=2181",
            "clientPortAddress=10.0.0.1",
            "dataDir=/d/data",
            "tickTime=1000",
            "4lw.commands.whitelist=*",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in {text}");
        }
        assert!(!text.contains("server."));
    }

    #[test]
    fn several_nodes_make_an_ensemble_with_observers_last() {
        let nodes = nodes(5);
        let cfg = KeeperdConfig {
            observers: 2,
            failpoints: vec!["skip-trunc".into()],
            ..Default::default()
        };
        let text = render_config(&cfg, &nodes, &nodes[1], "/d/data");
        for line in [
            "clientPortAddress=10.0.0.2",
            "initLimit=10",
            "syncLimit=5",
            "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181",
            "server.3=10.0.0.3:2888:3888:participant;10.0.0.3:2181",
            "server.4=10.0.0.4:2888:3888:observer;10.0.0.4:2181",
            "server.5=10.0.0.5:2888:3888:observer;10.0.0.5:2181",
            "superDigest=stampede:eDe4kmqjwu6mF9gxDXhYED3R44s=",
            "failpoints=skip-trunc",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        let db = Keeperd::new(KeeperdConfig::default(), &nodes).unwrap();
        assert_eq!(db.myid(&nodes[4]).unwrap(), 5);
        assert!(nodes
            .iter()
            .all(|n| db.client_address(n) == format!("{}:2181", n.host)));
        let servers = crate::db::servers(&db, &nodes);
        assert_eq!(servers.len(), 5, "faults aim at every member");
        let planned = db.planned_members();
        assert_eq!(planned.len(), 5);
        assert_eq!(
            planned[0].1, "10.0.0.1:2888:3888:participant;10.0.0.1:2181",
            "the membership line as keeperd shows it"
        );
        assert_eq!(db.superuser(), Some(SUPERUSER));
        let one = Keeperd::new(KeeperdConfig::default(), &nodes[..1]).unwrap();
        assert!(one.planned_members().is_empty(), "standalone");
    }

    #[test]
    fn observers_must_leave_a_voter() {
        let cfg = KeeperdConfig {
            observers: 3,
            ..Default::default()
        };
        let err = Keeperd::new(cfg, &nodes(3)).err().unwrap().to_string();
        assert!(err.contains("leaves no voter"), "{err}");
    }
}
