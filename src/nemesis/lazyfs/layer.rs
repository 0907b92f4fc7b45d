//! The layer on a node, driven from the controller: mounted over the server's data
//! directory (its files kept in a sibling `<data>.lazyfs`), told to lose or sync, unmounted.

use std::sync::Arc;

use anyhow::Context;
use async_trait::async_trait;

use super::fs::Lost;
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};
use crate::db::Db;
use crate::nemesis::agent;

/// Where a node's layer lives: the mount point (the server's data directory), the backing
/// directory beside it, the file with the agent's control port, and the agent's log.
struct Paths {
    mount: String,
    backing: String,
    port: String,
    log: String,
}

impl Paths {
    fn of(db: &dyn Db, node: &Node) -> Paths {
        let mount = db.data_dir(node).trim_end_matches('/').to_string();
        Paths {
            backing: format!("{mount}.lazyfs"),
            port: format!("{mount}.lazyfs.port"),
            log: format!("{mount}.lazyfs.log"),
            mount,
        }
    }

    /// A shell test that succeeds when the layer is mounted.
    fn mounted(&self) -> String {
        format!(
            "awk -v m={} '$2 == m && $3 ~ /^fuse/ {{f=1}} END {{exit !f}}' /proc/self/mounts",
            quote(&self.mount)
        )
    }
}

/// The file holding the control port of the layer under `db`'s data directory on `node`.
pub fn port_file(db: &dyn Db, node: &Node) -> String {
    Paths::of(db, node).port
}

/// Mounts the layer over `db`'s data directory on `node` (no-op when it is mounted).
pub async fn mount(control: &Control, db: &dyn Db, node: &Node) -> anyhow::Result<()> {
    let agent = agent::install(control, node).await?;
    let p = Paths::of(db, node);
    let cmd = format!(
        "if {mounted}; then exit 0; fi; mkdir -p {mount} {backing} || exit 1; \
         rm -f {port}; setsid nohup {agent} agent-lazyfs --backing {backing} --mount {mount} --port-file {port} \
         >> {log} 2>&1 < /dev/null & \
         for i in $(seq 100); do {mounted} && test -s {port} && exit 0; sleep 0.1; done; \
         echo 'the layer did not mount:' >&2; tail -n 3 {log} >&2; exit 1",
        mounted = p.mounted(),
        mount = quote(&p.mount),
        backing = quote(&p.backing),
        port = quote(&p.port),
        log = quote(&p.log),
    );
    control
        .exec(node, &cmd, Retry::Once)
        .await
        .with_context(|| format!("mounting the lose-unfsynced layer on {}", node.name))
        .map(drop)
}

/// Sends `command` (`lose` or `sync`) to the layer on `node` and returns its answer.
async fn command(
    control: &Control,
    db: &dyn Db,
    node: &Node,
    command: &str,
) -> anyhow::Result<String> {
    let p = Paths::of(db, node);
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/$(cat {port}) && echo {command} >&3 && cat <&3",
        port = quote(&p.port)
    );
    let answer = control
        .exec(node, &format!("bash -c {}", quote(&script)), Retry::Once)
        .await?;
    anyhow::ensure!(
        !answer.is_empty() && !answer.contains("\"error\""),
        "the layer on {}: {command}: {answer:?}",
        node.name
    );
    Ok(answer)
}

/// Throws away the unsynced data of the layer on `node`; returns what was lost.
pub async fn lose(control: &Control, db: &dyn Db, node: &Node) -> anyhow::Result<Lost> {
    let answer = command(control, db, node, "lose").await?;
    serde_json::from_str(&answer)
        .with_context(|| format!("the layer on {} answered {answer:?}", node.name))
}

/// Makes everything written through the layer on `node` durable.
pub async fn sync(control: &Control, db: &dyn Db, node: &Node) -> anyhow::Result<()> {
    command(control, db, node, "sync").await.map(drop)
}

/// A database whose servers keep their data on the layer: it is mounted on every node before
/// the database is set up (so the servers never write outside it), what setup wrote is made
/// durable once the database serves, and teardown unmounts it (see
/// [`remove_servers`](crate::db::remove_servers)). Everything else is the database's own.
pub struct OnLayer {
    inner: Arc<dyn Db>,
}

impl OnLayer {
    /// `inner` on the layer.
    pub fn new(inner: Arc<dyn Db>) -> OnLayer {
        OnLayer { inner }
    }
}

#[async_trait]
impl Db for OnLayer {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn client_address(&self, node: &Node) -> String {
        self.inner.client_address(node)
    }
    fn runs_on(&self, node: &Node) -> bool {
        self.inner.runs_on(node)
    }
    fn process(&self, node: &Node) -> crate::db::ServerProcess {
        self.inner.process(node)
    }
    async fn setup(&self, control: &Control) -> anyhow::Result<()> {
        let servers = crate::db::servers(self.inner.as_ref(), control.nodes());
        let mounts = servers
            .iter()
            .map(|n| mount(control, self.inner.as_ref(), n));
        for result in futures::future::join_all(mounts).await {
            result?;
        }
        self.inner.setup(control).await?;
        // `myid` and the configuration written at setup must not be lost with the servers'
        // own unsynced writes.
        let syncs = servers
            .iter()
            .map(|n| sync(control, self.inner.as_ref(), n));
        for result in futures::future::join_all(syncs).await {
            result?;
        }
        Ok(())
    }
    async fn teardown(&self, control: &Control) -> anyhow::Result<()> {
        self.inner.teardown(control).await
    }
    async fn start(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.inner.start(control, node).await
    }
    async fn stop(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.inner.stop(control, node).await
    }
    async fn kill(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.inner.kill(control, node).await
    }
    async fn pause(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.inner.pause(control, node).await
    }
    async fn resume(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.inner.resume(control, node).await
    }
    async fn is_running(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        self.inner.is_running(control, node).await
    }
    async fn is_set_up(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        self.inner.is_set_up(control, node).await
    }
    async fn wipe(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.inner.wipe(control, node).await
    }
    fn clock_file(&self, node: &Node) -> Option<String> {
        self.inner.clock_file(node)
    }
    fn data_dir(&self, node: &Node) -> String {
        self.inner.data_dir(node)
    }
    fn txn_dir(&self, node: &Node) -> String {
        self.inner.txn_dir(node)
    }
    fn server_files(&self, node: &Node) -> Option<crate::db::ServerFiles> {
        self.inner.server_files(node)
    }
    fn planned_members(&self) -> Vec<(Node, String)> {
        self.inner.planned_members()
    }
    fn superuser(&self) -> Option<&str> {
        self.inner.superuser()
    }
    async fn restore_config(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.inner.restore_config(control, node).await
    }
    async fn collect_logs(
        &self,
        control: &Control,
        node: &Node,
        dir: &std::path::Path,
    ) -> anyhow::Result<()> {
        self.inner.collect_logs(control, node, dir).await
    }
}
