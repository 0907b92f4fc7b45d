//! keeperd, the project's own ZooKeeper-compatible server, as a database under test. It
//! runs as a single node: the first node of the set serves, and every client, whichever node
//! it is bound to, is sent there. The binary is built on the controller (or given), uploaded
//! to the node, and run with a `zoo.cfg`-style config of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use async_trait::async_trait;

use super::process::{faketime_env, ServerProcess};
use super::Db;
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};

/// How keeperd is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperdConfig {
    /// A keeperd binary to upload; `None` builds it from this checkout with cargo.
    pub binary: Option<PathBuf>,
    /// Client port.
    pub client_port: u16,
    /// keeperd's basic time unit, in milliseconds (session timeouts are 2 to 20 ticks).
    pub tick_time_ms: u32,
    /// The directory under which the node keeps the server's files (`<dir>/<host>/…`).
    pub dir: String,
    /// Run the server under libfaketime (the local cluster), as for ZooKeeper.
    pub faketime: bool,
}

impl Default for KeeperdConfig {
    fn default() -> Self {
        KeeperdConfig {
            binary: None,
            client_port: 2181,
            tick_time_ms: 1000,
            dir: "/var/lib/stampede/keeperd".into(),
            faketime: false,
        }
    }
}

/// Renders keeperd's config for the server on `node`.
pub fn render_config(cfg: &KeeperdConfig, node: &Node, data_dir: &str) -> String {
    format!(
        "# Written by stampede for {name}.\nclientPort={port}\nclientPortAddress={host}\ndataDir={data_dir}\ntickTime={tick}\n4lw.commands.whitelist=*\n",
        name = node.name,
        port = cfg.client_port,
        host = node.host,
        tick = cfg.tick_time_ms,
    )
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

/// keeperd on the first of a set of nodes.
pub struct Keeperd {
    cfg: KeeperdConfig,
    server: Node,
}

impl Keeperd {
    /// keeperd configured by `cfg`, serving on the first of `nodes`.
    pub fn new(cfg: KeeperdConfig, nodes: &[Node]) -> anyhow::Result<Keeperd> {
        let server = nodes.first().context("keeperd needs a node")?.clone();
        Ok(Keeperd { cfg, server })
    }

    fn serves(&self, node: &Node) -> bool {
        node.name == self.server.name
    }

    fn home(&self) -> String {
        format!(
            "{}/{}",
            self.cfg.dir.trim_end_matches('/'),
            self.server.host
        )
    }

    fn process(&self) -> ServerProcess {
        let home = self.home();
        ServerProcess {
            marker: format!("{home}/keeperd.cfg"),
            home,
        }
    }
}

#[async_trait]
impl Db for Keeperd {
    fn name(&self) -> &str {
        "keeperd"
    }

    fn client_address(&self, _node: &Node) -> String {
        format!("{}:{}", self.server.host, self.cfg.client_port)
    }

    fn runs_on(&self, node: &Node) -> bool {
        self.serves(node)
    }

    async fn setup(&self, control: &Control) -> anyhow::Result<()> {
        let binary = match &self.cfg.binary {
            Some(path) => path.clone(),
            None => build_binary()?,
        };
        let data = std::fs::read(&binary)
            .with_context(|| format!("cannot read keeperd binary {}", binary.display()))?;
        let (node, home) = (&self.server, self.home());
        control
            .exec(
                node,
                &format!("mkdir -p {h}/data", h = quote(&home)),
                Retry::Idempotent,
            )
            .await?;
        control
            .upload(node, data, &format!("{home}/keeperd"), 0o755)
            .await?;
        let config = render_config(&self.cfg, node, &format!("{home}/data"));
        control
            .upload(
                node,
                config.into_bytes(),
                &format!("{home}/keeperd.cfg"),
                0o644,
            )
            .await?;
        if let Some(file) = self.clock_file(node) {
            control
                .upload(node, b"+0.000\n".to_vec(), &file, 0o644)
                .await?;
        }
        self.start(control, node).await?;
        super::wait_until_serving(self, std::slice::from_ref(node), Duration::from_secs(30)).await
    }

    async fn teardown(&self, control: &Control) -> anyhow::Result<()> {
        self.stop(control, &self.server).await?;
        control
            .exec(
                &self.server,
                &format!("rm -rf {}", quote(&self.home())),
                Retry::Idempotent,
            )
            .await
            .map(drop)
    }

    async fn start(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if !self.serves(node) {
            return Ok(());
        }
        let home = self.home();
        let env = self
            .clock_file(node)
            .map(|f| faketime_env(&f))
            .unwrap_or_default();
        let command = format!("{h}/keeperd {h}/keeperd.cfg", h = quote(&home));
        self.process()
            .start(
                control,
                node,
                &env,
                &command,
                &format!("{home}/keeperd.log"),
            )
            .await
    }

    async fn stop(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if self.serves(node) {
            self.process().stop(control, node).await?;
        }
        Ok(())
    }

    async fn kill(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if self.serves(node) {
            self.process().kill(control, node).await?;
        }
        Ok(())
    }

    async fn pause(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if self.serves(node) {
            self.process().pause(control, node).await?;
        }
        Ok(())
    }

    async fn resume(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if self.serves(node) {
            self.process().signal(control, node, "CONT").await?;
        }
        Ok(())
    }

    async fn is_running(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        if !self.serves(node) {
            return Ok(false);
        }
        self.process().is_running(control, node).await
    }

    async fn is_set_up(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        if !self.serves(node) {
            return Ok(false);
        }
        let probe = format!(
            "test -f {} && echo yes || true",
            quote(&format!("{}/keeperd.cfg", self.home()))
        );
        Ok(control.exec(node, &probe, Retry::Idempotent).await? == "yes")
    }

    async fn wipe(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if !self.serves(node) {
            return Ok(());
        }
        if self.is_running(control, node).await? {
            bail!("on {}: stop the server before wiping its data", node.name);
        }
        let data = quote(&format!("{}/data", self.home()));
        control
            .exec(
                node,
                &format!("rm -rf {data} && mkdir -p {data}"),
                Retry::Idempotent,
            )
            .await
            .map(drop)
    }

    fn clock_file(&self, node: &Node) -> Option<String> {
        (self.cfg.faketime && self.serves(node)).then(|| format!("{}/faketime", self.home()))
    }

    async fn collect_logs(&self, control: &Control, node: &Node, dir: &Path) -> anyhow::Result<()> {
        if !self.serves(node) {
            return Ok(());
        }
        self.process()
            .collect(control, node, &["keeperd.log"], "data", dir)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_binds_the_node_and_allows_every_four_letter_word() {
        let node = Node {
            name: "n1".into(),
            host: "10.0.0.1".into(),
            port: 22,
            user: "root".into(),
        };
        let text = render_config(&KeeperdConfig::default(), &node, "/d/data");
        for line in [
            "clientPort=2181",
            "clientPortAddress=10.0.0.1",
            "dataDir=/d/data",
            "tickTime=1000",
            "4lw.commands.whitelist=*",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in {text}");
        }
    }

    #[test]
    fn every_client_is_sent_to_the_one_server() {
        let nodes: Vec<Node> = (1..=3)
            .map(|i| Node {
                name: format!("n{i}"),
                host: format!("10.0.0.{i}"),
                port: 22,
                user: "root".into(),
            })
            .collect();
        let db = Keeperd::new(KeeperdConfig::default(), &nodes).unwrap();
        assert!(nodes
            .iter()
            .all(|n| db.client_address(n) == "10.0.0.1:2181"));
        assert!(db.clock_file(&nodes[1]).is_none());
        let servers: Vec<String> = crate::db::servers(&db, &nodes)
            .into_iter()
            .map(|n| n.name)
            .collect();
        assert_eq!(servers, ["n1"], "faults aim at the one server");
    }
}
