//! Apache ZooKeeper as the database under test: Debian's `zookeeper` package (or an Apache
//! release tarball), one server per node in its own directory, started under `setsid` with a
//! pid file so that every later action (kill, pause, stop) targets exactly that process.

use std::time::Duration;

use anyhow::{bail, Context};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{
    member_line, Db, DbOptions, Entry, MemberPorts, ServerProcess, SUPERUSER, SUPER_DIGEST,
};
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};

/// Where ZooKeeper comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Install {
    /// The distribution's ZooKeeper jars (Debian's `libzookeeper-java`, with a headless Java
    /// runtime), installed with apt-get when missing.
    Package,
    /// An Apache release tarball (`apache-zookeeper-X-bin.tar.gz`), a local path uploaded to
    /// the nodes or an `http(s)://` URL the nodes download.
    Tarball(String),
}

/// ZooKeeper in the registry: Debian's package, or the release `--zookeeper-tarball` names.
pub const ENTRY: Entry = Entry {
    name: "zookeeper",
    build: |options, nodes| {
        let cfg = ZkConfig::from_options(options);
        Ok(Box::new(ZooKeeper::new(cfg, nodes.to_vec())))
    },
};

/// How ZooKeeper is installed and configured on the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZkConfig {
    /// Where the server comes from.
    pub install: Install,
    /// Client port.
    pub client_port: u16,
    /// Quorum (follower to leader) port.
    pub quorum_port: u16,
    /// Leader election port.
    pub election_port: u16,
    /// ZooKeeper's basic time unit, in milliseconds.
    pub tick_time_ms: u32,
    /// Ticks a follower may take to connect and sync to a leader.
    pub init_limit: u32,
    /// Ticks a follower may lag behind the leader.
    pub sync_limit: u32,
    /// Java heap limit, in MiB.
    pub heap_mb: u32,
    /// The directory under which each node keeps its server's files (`<dir>/<host>/…`).
    pub dir: String,
    /// Run each server under libfaketime with a clock control file of its own, so that clock
    /// faults skew the server's view of time without touching the node's clock (the local
    /// cluster's nodes share one kernel clock).
    pub faketime: bool,
    /// The workload file's `db:` settings (the snapshot interval).
    pub settings: super::DbSettings,
}

impl Default for ZkConfig {
    fn default() -> Self {
        ZkConfig {
            install: Install::Package,
            client_port: 2181,
            quorum_port: 2888,
            election_port: 3888,
            tick_time_ms: 1000,
            init_limit: 10,
            sync_limit: 5,
            heap_mb: 256,
            dir: "/var/lib/stampede/db".into(),
            faketime: false,
            settings: super::DbSettings::default(),
        }
    }
}

impl ZkConfig {
    /// The defaults, with what `options` says of ZooKeeper, the fake clock and the settings.
    fn from_options(options: &DbOptions) -> ZkConfig {
        let install = match &options.zookeeper_tarball {
            Some(tarball) => Install::Tarball(tarball.clone()),
            None => Install::Package,
        };
        ZkConfig {
            install,
            faketime: options.faketime,
            settings: options.settings.clone(),
            ..Default::default()
        }
    }
}

/// The four-letter words every server allows (stampede's checks and herd measurements use them).
pub const FOUR_LETTER_WORDS: &str = "srvr,mntr,ruok,wchs,cons,stat,conf";

/// One server's line in ZooKeeper's dynamic configuration (every planned server a voting
/// participant), without the `server.N=` prefix.
pub fn member_spec(cfg: &ZkConfig, node: &Node) -> String {
    let ports = MemberPorts {
        quorum: cfg.quorum_port,
        election: cfg.election_port,
        client: cfg.client_port,
    };
    member_line(&node.host, ports, false)
}

/// Renders the dynamic configuration (`zoo.cfg.dynamic`) of an ensemble of `nodes`: every
/// server a voting participant, server ids from 1 in node order.
pub fn render_dynamic_cfg(cfg: &ZkConfig, nodes: &[Node]) -> String {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("server.{}={}\n", i + 1, member_spec(cfg, n)))
        .collect()
}

/// Renders `zoo.cfg` for the server with id `myid` on `node` in an ensemble of `nodes`; an
/// ensemble's servers are listed in `dynamic_file` (see [`render_dynamic_cfg`]), with dynamic
/// reconfiguration enabled.
pub fn render_zoo_cfg(
    cfg: &ZkConfig,
    nodes: &[Node],
    node: &Node,
    data_dir: &str,
    dynamic_file: &str,
) -> String {
    let mut out = format!(
        "# Written by stampede for {name}.\n\
         tickTime={tick}\n\
         initLimit={init}\n\
         syncLimit={sync}\n\
         dataDir={data_dir}\n\
         clientPort={port}\n\
         clientPortAddress={host}\n\
         maxClientCnxns=0\n\
         admin.enableServer=false\n\
         4lw.commands.whitelist={words}\n",
        name = node.name,
        tick = cfg.tick_time_ms,
        init = cfg.init_limit,
        sync = cfg.sync_limit,
        port = cfg.client_port,
        host = node.host,
        words = FOUR_LETTER_WORDS,
    );
    out.push_str(&cfg.settings.config_lines());
    if nodes.len() > 1 {
        out.push_str(&format!(
            "reconfigEnabled=true\ndynamicConfigFile={dynamic_file}\n"
        ));
    }
    out
}

const LOG4J: &str = "\
log4j.rootLogger=INFO, ROLLINGFILE
log4j.appender.ROLLINGFILE=org.apache.log4j.RollingFileAppender
log4j.appender.ROLLINGFILE.File=${zookeeper.log.dir}/zookeeper.log
log4j.appender.ROLLINGFILE.MaxFileSize=10MB
log4j.appender.ROLLINGFILE.MaxBackupIndex=5
log4j.appender.ROLLINGFILE.layout=org.apache.log4j.PatternLayout
log4j.appender.ROLLINGFILE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n
";

/// Apache ZooKeeper on the nodes of a [`Control`].
pub struct ZooKeeper {
    cfg: ZkConfig,
    nodes: Vec<Node>,
}

impl ZooKeeper {
    /// ZooKeeper configured by `cfg` for an ensemble of `nodes`.
    pub fn new(cfg: ZkConfig, nodes: Vec<Node>) -> ZooKeeper {
        ZooKeeper { cfg, nodes }
    }

    /// The directory of `node`'s server: `<dir>/<node host>`, unique per machine even when
    /// several local clusters share one file system.
    fn home(&self, node: &Node) -> String {
        format!("{}/{}", self.cfg.dir.trim_end_matches('/'), node.host)
    }

    fn myid(&self, node: &Node) -> anyhow::Result<usize> {
        let i = self.nodes.iter().position(|n| n.name == node.name);
        i.map(|i| i + 1)
            .with_context(|| format!("{} is not a node of this ensemble", node.name))
    }

    /// Where the installed ZooKeeper lives and the class path to run it.
    fn class_path(&self, home: &str) -> String {
        match self.cfg.install {
            Install::Package => format!(
                "{home}/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"
            ),
            Install::Tarball(_) => format!("{home}/conf:{home}/dist/lib/*"),
        }
    }

    async fn install(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        match &self.cfg.install {
            Install::Package => {
                let cmd = "test -f /usr/share/java/zookeeper.jar || \
                     (export DEBIAN_FRONTEND=noninteractive; apt-get update -q && \
                      apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 \
                      libzookeeper-java default-jre-headless)";
                control
                    .run_checked(node, cmd, Duration::from_secs(600), Retry::Idempotent)
                    .await?;
            }
            Install::Tarball(source) => self.install_tarball(control, node, source).await?,
        }
        Ok(())
    }

    /// Unpacks a release tarball into `<home>/dist` (per node: local nodes share a disk).
    async fn install_tarball(
        &self,
        control: &Control,
        node: &Node,
        source: &str,
    ) -> anyhow::Result<()> {
        let home = self.home(node);
        control
            .exec(
                node,
                &format!("mkdir -p {}", quote(&home)),
                Retry::Idempotent,
            )
            .await?;
        let archive = format!("{home}/zookeeper.tar.gz");
        if source.starts_with("http://") || source.starts_with("https://") {
            let cmd = format!(
                "curl -fsSL -o {archive} {url} || wget -q -O {archive} {url}",
                url = quote(source)
            );
            control
                .run_checked(node, &cmd, Duration::from_secs(600), Retry::Idempotent)
                .await?;
        } else {
            let data = std::fs::read(source)
                .with_context(|| format!("cannot read ZooKeeper tarball {source}"))?;
            control.upload(node, data, &archive, 0o644).await?;
        }
        let cmd = format!(
            "rm -rf {dist}.new && mkdir -p {dist}.new && tar -xzf {archive} -C {dist}.new --strip-components=1 && \
             test -d {dist}.new/lib && rm -rf {dist} && mv {dist}.new {dist} && rm -f {archive}",
            dist = quote(&format!("{home}/dist")),
            archive = quote(&archive),
        );
        control
            .run_checked(node, &cmd, Duration::from_secs(300), Retry::Idempotent)
            .await?;
        Ok(())
    }

    /// Writes `node`'s `zoo.cfg` and the planned membership, replacing the files (and the
    /// later versions of the membership) a reconfiguration made the server write.
    async fn write_zoo_cfg(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        let home = self.home(node);
        let dynamic = format!("{home}/conf/zoo.cfg.dynamic");
        let zoo_cfg = render_zoo_cfg(
            &self.cfg,
            &self.nodes,
            node,
            &format!("{home}/data"),
            &dynamic,
        );
        control
            .exec(
                node,
                &format!("rm -f {}/conf/zoo.cfg*", quote(&home)),
                Retry::Idempotent,
            )
            .await?;
        control
            .upload(
                node,
                zoo_cfg.into_bytes(),
                &format!("{home}/conf/zoo.cfg"),
                0o644,
            )
            .await?;
        if self.nodes.len() > 1 {
            let members = render_dynamic_cfg(&self.cfg, &self.nodes);
            control
                .upload(node, members.into_bytes(), &dynamic, 0o644)
                .await?;
        }
        Ok(())
    }

    async fn configure(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        let home = self.home(node);
        let data = self.data_dir(node);
        control
            .exec(
                node,
                &format!("mkdir -p {h}/conf {h}/data {h}/logs", h = quote(&home)),
                Retry::Idempotent,
            )
            .await?;
        self.write_zoo_cfg(control, node).await?;
        control
            .upload(
                node,
                LOG4J.as_bytes().to_vec(),
                &format!("{home}/conf/log4j.properties"),
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
impl Db for ZooKeeper {
    fn name(&self) -> &str {
        ENTRY.name
    }

    fn client_address(&self, node: &Node) -> String {
        format!("{}:{}", node.host, self.cfg.client_port)
    }

    async fn setup(&self, control: &Control) -> anyhow::Result<()> {
        let steps = self.nodes.iter().map(|node| async move {
            self.install(control, node).await?;
            self.configure(control, node).await?;
            self.start(control, node).await
        });
        for result in futures::future::join_all(steps).await {
            result?;
        }
        super::wait_until_serving(self, &self.nodes, Duration::from_secs(90)).await
    }

    async fn teardown(&self, control: &Control) -> anyhow::Result<()> {
        super::remove_servers(self, control, &self.nodes).await
    }

    fn process(&self, node: &Node) -> ServerProcess {
        let home = self.home(node);
        let command = format!(
            "java -Xmx{heap}m -Dzookeeper.DigestAuthenticationProvider.superDigest={SUPER_DIGEST} -Dzookeeper.log.dir={h}/logs -Dlog4j.configuration=file:{h}/conf/log4j.properties \
             -cp {cp} org.apache.zookeeper.server.quorum.QuorumPeerMain {h}/conf/zoo.cfg",
            h = quote(&home),
            heap = self.cfg.heap_mb,
            cp = quote(&self.class_path(&home)),
        );
        ServerProcess {
            config: format!("{home}/conf/zoo.cfg"),
            command,
            log: "logs/zookeeper.log".into(),
            output: "logs/stdout.log".into(),
            home,
        }
    }

    async fn wipe(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if self.is_running(control, node).await? {
            bail!("on {}: stop the server before wiping its data", node.name);
        }
        let data = quote(&format!("{}/data", self.home(node)));
        control
            .exec(node, &format!("rm -rf {data}/version-2"), Retry::Idempotent)
            .await?;
        Ok(())
    }

    fn txn_dir(&self, node: &Node) -> String {
        format!("{}/data/version-2", self.home(node))
    }

    fn planned_members(&self) -> Vec<(Node, String)> {
        if self.nodes.len() < 2 {
            return Vec::new();
        }
        self.nodes
            .iter()
            .map(|n| (n.clone(), member_spec(&self.cfg, n)))
            .collect()
    }

    fn superuser(&self) -> Option<&str> {
        Some(SUPERUSER)
    }

    async fn restore_config(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.write_zoo_cfg(control, node).await
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
    fn zoo_cfg_lists_every_server_and_binds_the_node() {
        let nodes = nodes(3);
        let cfg = render_zoo_cfg(
            &ZkConfig::default(),
            &nodes,
            &nodes[1],
            "/d/n2/data",
            "/c/d",
        );
        assert!(cfg.contains("clientPortAddress=10.0.0.2\n"));
        assert!(cfg.contains("dataDir=/d/n2/data\n"));
        assert!(cfg.contains("reconfigEnabled=true\ndynamicConfigFile=/c/d\n"));
        assert!(!cfg.contains("server."));
        let members = render_dynamic_cfg(&ZkConfig::default(), &nodes);
        assert_eq!(
            members,
            "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\n\
             server.2=10.0.0.2:2888:3888:participant;10.0.0.2:2181\n\
             server.3=10.0.0.3:2888:3888:participant;10.0.0.3:2181\n"
        );
        let words = cfg
            .lines()
            .find_map(|l| l.strip_prefix("4lw.commands.whitelist="))
            .unwrap();
        for w in ["srvr", "mntr", "ruok", "wchs", "cons", "stat"] {
            assert!(words.split(',').any(|x| x == w), "{w} missing");
        }
    }

    #[test]
    fn zoo_cfg_for_one_node_is_standalone() {
        let nodes = nodes(1);
        let cfg = render_zoo_cfg(&ZkConfig::default(), &nodes, &nodes[0], "/d", "/c/d");
        assert!(!cfg.contains("server."));
        assert!(!cfg.contains("dynamicConfigFile"));
    }

    #[test]
    fn zoo_cfg_uses_configured_timing() {
        let nodes = nodes(5);
        let cfg = ZkConfig {
            tick_time_ms: 500,
            init_limit: 7,
            sync_limit: 3,
            client_port: 2191,
            ..Default::default()
        };
        let text = render_zoo_cfg(&cfg, &nodes, &nodes[4], "/x", "/c/d");
        let text = text + &render_dynamic_cfg(&cfg, &nodes);
        for line in [
            "tickTime=500",
            "initLimit=7",
            "syncLimit=3",
            "clientPort=2191",
            "server.5=10.0.0.5:2888:3888:participant;10.0.0.5:2191",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }

    #[test]
    fn config_rejects_unknown_keys() {
        let err = serde_yaml_ng::from_str::<ZkConfig>("tick_time_ms: 100\nbogus: 1\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `bogus`"), "{err}");
        let cfg: ZkConfig = serde_yaml_ng::from_str("install: !tarball /tmp/zk.tgz\n").unwrap();
        assert_eq!(cfg.install, Install::Tarball("/tmp/zk.tgz".into()));
    }
}
