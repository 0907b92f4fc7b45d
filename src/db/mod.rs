//! The database under test on the nodes: install, configure, start, stop, kill, pause,
//! find the leader, wipe, collect logs. A trait, so that other ZooKeeper-compatible servers
//! can stand beside Apache ZooKeeper without touching workloads or nemeses; the commands,
//! suites and the clearing of earlier runs know no particular database: they find one by
//! name in [`DATABASES`], the registry below.
//!
//! Adding a database: a file `src/db/<name>.rs` with an [`Entry`] named `ENTRY` and an
//! `impl Db`, and one line in the registry (walked through in `docs/extending.md`).

#[cfg(test)]
pub mod fake;
mod four_letter;
mod members;
pub mod mntr;
mod process;
mod registry;
pub mod replicas;
mod settings;

use std::path::Path;

use async_trait::async_trait;

use crate::control::{Control, Node};

pub use four_letter::{four_letter_word, standing, Mode};
pub use members::{member_line, MemberPorts, SUPERUSER, SUPER_DIGEST};
use process::faketime_env;
pub use process::{ServerFiles, ServerProcess};
pub use registry::{build, entry, every_kind, DbOptions, Entry};
pub use settings::DbSettings;

// The registry: one line per database file (`registry!` declares it as a module).
registry! {
    /// Every database stampede runs, in the order an unknown `--db` lists them.
    DATABASES: Entry {
        zookeeper,
        keeperd,
    }
}

/// The database `--db` and a suite's `dbs:` mean when they name none.
pub const DEFAULT: &str = zookeeper::ENTRY.name;

/// A ZooKeeper-compatible database on a set of nodes.
#[async_trait]
pub trait Db: Send + Sync {
    /// A short name: `zookeeper`.
    fn name(&self) -> &str;
    /// The `host:port` clients use to reach `node`.
    fn client_address(&self, node: &Node) -> String;
    /// Whether a server of this database runs on `node`. Faults are aimed at these nodes
    /// only: a fault on any other touches nothing under test.
    fn runs_on(&self, _node: &Node) -> bool {
        true
    }
    /// Installs, configures and starts the database on every node, then waits until it serves.
    async fn setup(&self, control: &Control) -> anyhow::Result<()>;
    /// Stops the servers and removes their data and configuration.
    async fn teardown(&self, control: &Control) -> anyhow::Result<()>;
    /// The server's process on `node`: its directory, configuration file, command line and
    /// logs, which the defaults of `start`, `stop`, `kill`, `pause`, `resume`, `is_running`,
    /// `is_set_up`, `server_files` and `collect_logs` act on.
    fn process(&self, node: &Node) -> ServerProcess;
    /// Starts the server on `node` (no-op when it runs), under libfaketime when it has a
    /// `clock_file`.
    async fn start(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        let env = self.clock_file(node).map(|f| faketime_env(&f));
        let env = env.unwrap_or_default();
        self.process(node).start(control, node, &env).await
    }
    /// Stops the server on `node` gracefully (SIGTERM, then SIGKILL).
    async fn stop(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.process(node).stop(control, node).await
    }
    /// Kills the server on `node` with SIGKILL.
    async fn kill(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.process(node).kill(control, node).await
    }
    /// Pauses the server on `node` with SIGSTOP.
    async fn pause(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.process(node).pause(control, node).await
    }
    /// Resumes the server on `node` with SIGCONT (no-op when it is not paused).
    async fn resume(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.process(node).resume(control, node).await
    }
    /// Whether the server process on `node` exists (paused or not).
    async fn is_running(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        self.process(node).is_running(control, node).await
    }
    /// Whether `node` has been set up (configured), so that healing should restart it.
    async fn is_set_up(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        self.process(node).is_set_up(control, node).await
    }
    /// The directory on `node` holding the server's transaction logs (`log.<zxid>`) and
    /// snapshots (`snapshot.<zxid>`), zxids in hex.
    fn txn_dir(&self, node: &Node) -> String;
    /// Removes the server's data on `node` (the server must be stopped).
    async fn wipe(&self, control: &Control, node: &Node) -> anyhow::Result<()>;
    /// The servers of the planned membership with their lines in ZooKeeper's dynamic
    /// configuration (`host:quorum:election:participant;host:client`), server ids from 1 in
    /// this order; empty when the database cannot be reconfigured (a lone server).
    fn planned_members(&self) -> Vec<(Node, String)> {
        Vec::new()
    }
    /// The `user:password` of a `digest` superuser the servers accept, allowed to reconfigure.
    fn superuser(&self) -> Option<&str> {
        None
    }
    /// Puts the planned membership back into the configuration of `node`'s server (stopped),
    /// which a reconfiguration that removed it left out: ZooKeeper will not start a server
    /// missing from its own membership.
    async fn restore_config(&self, _control: &Control, _node: &Node) -> anyhow::Result<()> {
        Ok(())
    }
    /// The libfaketime control file of `node`'s server when it runs under a fake clock (the
    /// local cluster), `None` when it uses the node's system clock.
    fn clock_file(&self, node: &Node) -> Option<String>;
    /// Where the server on `node` logs and how its process is found, for agents that act on
    /// the node itself (log triggers): its `process`'s by default; `None` when the database
    /// cannot say.
    fn server_files(&self, node: &Node) -> Option<ServerFiles> {
        Some(self.process(node).files())
    }

    /// The server's data directory on `node` (its log, snapshots and `myid`).
    fn data_dir(&self, node: &Node) -> String;
    /// Copies the server's logs and a listing of its data directory into `dir`.
    async fn collect_logs(&self, control: &Control, node: &Node, dir: &Path) -> anyhow::Result<()> {
        let data = self.data_dir(node);
        self.process(node).collect(control, node, &data, dir).await
    }
}

/// Stops the servers on `nodes` (resuming paused ones first), unmounts what is mounted under
/// each server's directory (its `process`'s home; a layer under its data), and removes the
/// directory: the teardown of every database here.
pub async fn remove_servers(db: &dyn Db, control: &Control, nodes: &[Node]) -> anyhow::Result<()> {
    let steps = nodes.iter().map(|node| {
        let home = db.process(node).home;
        async move {
            db.resume(control, node).await?;
            db.stop(control, node).await?;
            let rm = format!(
                "awk -v h={home}/ 'index($2, h) == 1 {{print $2}}' /proc/self/mounts | \
                 while read -r m; do umount \"$m\" 2>/dev/null || umount -l \"$m\"; done; rm -rf {home}",
                home = crate::control::shell::quote(&home)
            );
            control
                .exec(node, &rm, crate::control::Retry::Idempotent)
                .await?;
            anyhow::Ok(())
        }
    });
    for result in futures::future::join_all(steps).await {
        result?;
    }
    Ok(())
}

/// What of `db`'s servers an earlier run left on `node`, one phrase each: a server running,
/// or its files; a fake clock moved; a layer mounted over its data. Empty when nothing is
/// there.
pub async fn leftovers(db: &dyn Db, control: &Control, node: &Node) -> anyhow::Result<Vec<String>> {
    let name = db.name();
    let mut found = Vec::new();
    if db.is_running(control, node).await? {
        let paused = match db.server_files(node) {
            Some(files) => {
                let state = format!(
                    "ps -o stat= -p $(cat {}) 2>/dev/null || true",
                    crate::control::shell::quote(&files.pidfile)
                );
                let said = control.exec(node, &state, crate::control::Retry::Idempotent);
                said.await?.starts_with('T')
            }
            None => false,
        };
        found.push(match paused {
            true => format!("{name} server paused"),
            false => format!("{name} server running"),
        });
    } else if db.is_set_up(control, node).await? {
        found.push(format!("{name} server's files"));
    }
    let data = crate::control::shell::quote(&db.data_dir(node));
    let mut probe = format!(
        "awk -v m={data} '$2 == m && $3 ~ /^fuse/ {{print \"FUSE layer mounted over the {name} data\"}}' /proc/self/mounts"
    );
    if let Some(file) = db.clock_file(node) {
        probe.push_str(&format!(
            "; c=$(cat {} 2>/dev/null); case \"$c\" in ''|+0|+0.000) ;; *) echo \"{name} clock faked at $c\";; esac",
            crate::control::shell::quote(&file)
        ));
    }
    let said = control
        .exec(node, &probe, crate::control::Retry::Idempotent)
        .await?;
    found.extend(said.lines().filter(|l| !l.is_empty()).map(str::to_string));
    Ok(found)
}

/// What each node says it is, in node order (`None` when it does not answer or serve).
pub async fn modes(db: &dyn Db, nodes: &[Node]) -> Vec<Option<Mode>> {
    let asks = nodes
        .iter()
        .map(|n| async move { four_letter::mode(&db.client_address(n)).await.ok() });
    futures::future::join_all(asks).await
}

/// The nodes among `nodes` that run a server of `db`, in order.
pub fn servers(db: &dyn Db, nodes: &[Node]) -> Vec<Node> {
    nodes.iter().filter(|n| db.runs_on(n)).cloned().collect()
}

/// The current leader among the servers of `db` on `nodes`: the one server that says it
/// leads, or a lone server that serves standalone (it takes every write).
pub async fn leader(db: &dyn Db, nodes: &[Node]) -> Option<Node> {
    let servers = servers(db, nodes);
    let modes = modes(db, &servers).await;
    let leads = |m: &Option<Mode>| match m {
        Some(Mode::Leader) => true,
        Some(Mode::Standalone) => servers.len() == 1,
        _ => false,
    };
    let leaders: Vec<&Node> = servers
        .iter()
        .zip(&modes)
        .filter(|(_, m)| leads(m))
        .map(|(n, _)| n)
        .collect();
    match leaders.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    }
}

/// Waits until every node in `nodes` serves and, for an ensemble, exactly one leads.
pub async fn wait_until_serving(
    db: &dyn Db,
    nodes: &[Node],
    limit: std::time::Duration,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let modes = modes(db, nodes).await;
        let leaders = modes.iter().filter(|m| **m == Some(Mode::Leader)).count();
        let serving = modes.iter().all(|m| m.is_some());
        let standalone = nodes.len() == 1 && modes[0] == Some(Mode::Standalone);
        if serving && (leaders == 1 || standalone) {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            let said: Vec<String> = nodes
                .iter()
                .zip(&modes)
                .map(|(n, m)| {
                    format!(
                        "{}: {}",
                        n.name,
                        m.map(|m| m.to_string())
                            .unwrap_or_else(|| "not serving".into())
                    )
                })
                .collect();
            anyhow::bail!(
                "{} did not form an ensemble within {limit:?} ({})",
                db.name(),
                said.join(", ")
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
