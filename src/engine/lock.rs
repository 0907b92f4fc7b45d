//! One run per cluster: a lock file on every node, held for a run's whole life. A second run on
//! any of the same nodes is refused at once with a line naming the holder; a lock whose holder
//! died (its controller killed, or gone quiet) is taken over.
//!
//! The lock lives on the nodes, not on the controller, so that two controllers on two machines
//! cannot share a cluster either. Whether a holder lives is judged by its process when it ran
//! on this machine (same boot id: the pid, and its start time, so that a reused pid is not
//! taken for it), and by its heartbeat otherwise: the holder touches its files every
//! [`HEARTBEAT`], and a lock untouched for [`STALE_AFTER`] is dead.

use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};

/// How often a holder touches its lock files.
const HEARTBEAT: Duration = Duration::from_secs(10);
/// How long a lock held from another machine may go untouched before its holder is dead.
const STALE_AFTER: Duration = Duration::from_secs(60);
/// Where the lock files are on a node: one per node address, so that the namespace nodes of
/// a local cluster, which share one file system, each have their own.
const LOCK_DIR: &str = "/var/lib/stampede/locks";

/// Who holds a lock: the controller's process, as the lock file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Tells this holder's files from any other's.
    pub token: String,
    /// The controller's process.
    pub pid: u32,
    /// The process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`).
    pub started_ticks: u64,
    /// The controller machine's boot id.
    pub boot_id: String,
    /// The controller machine's host name.
    pub host: String,
    /// The command line it runs.
    pub command: String,
    /// When it took the lock (RFC 3339).
    pub since: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} (`{}`) on {} since {}",
            self.pid, self.command, self.host, self.since
        )
    }
}

impl Holder {
    /// This process, as it would hold a lock taken now.
    fn this_process() -> anyhow::Result<Holder> {
        let pid = std::process::id();
        let started_ticks = process_start(pid).context("cannot read this process's start")?;
        let boot_id = boot_id()?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "this machine".into());
        let command: Vec<String> = std::env::args().collect();
        let since = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        Ok(Holder {
            token: format!("{boot_id}-{pid}-{started_ticks}"),
            pid,
            started_ticks,
            boot_id,
            host,
            command: command.join(" "),
            since,
        })
    }

    /// Whether the holder still runs, its lock files untouched for `age`: on this machine its
    /// process tells; from another, its heartbeat.
    fn alive(&self, age: Duration, here_boot_id: &str) -> bool {
        match self.boot_id == here_boot_id {
            true => process_start(self.pid) == Some(self.started_ticks),
            false => age < STALE_AFTER,
        }
    }
}

/// This machine's boot id.
fn boot_id() -> anyhow::Result<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .context("cannot read /proc/sys/kernel/random/boot_id")?;
    Ok(id.trim().to_string())
}

/// The start time (ticks since boot) of process `pid`, if it exists.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces: count fields after its last `)`.
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// The lock file of `node`.
fn lock_file(node: &Node) -> String {
    format!("{LOCK_DIR}/{}.lock", node.host)
}

/// A shell command that takes `node`'s lock for `record` (atomically: a hard link fails when
/// the lock exists) and prints `taken`, or prints `held`, the lock's age in seconds and its
/// record.
fn take_command(node: &Node, record: &str) -> String {
    format!(
        "f={f}; mkdir -p {LOCK_DIR} && t=$(mktemp $f.XXXXXX) && printf '%s\\n' {record} > $t || exit 1; \
         if ln $t $f 2>/dev/null; then rm -f $t; echo taken; \
         else rm -f $t; echo held; echo $(( $(date +%s) - $(stat -c %Y $f 2>/dev/null || date +%s) )); cat $f 2>/dev/null; fi",
        f = quote(&lock_file(node)),
        record = quote(record),
    )
}

/// A shell command that removes `node`'s lock if it holds `token`.
fn remove_command(node: &Node, token: &str) -> String {
    format!(
        "grep -qF {token} {f} 2>/dev/null && rm -f {f}; true",
        token = quote(token),
        f = quote(&lock_file(node)),
    )
}

/// How asking for one node's lock went.
enum Asked {
    Taken,
    /// Another holds it; its files were last touched this long ago.
    Held(Holder, Duration),
}

/// Asks for `node`'s lock once; a lock that vanished while it was read is asked for again.
async fn ask(control: &Control, node: &Node, record: &str) -> anyhow::Result<Asked> {
    for _ in 0..3 {
        let said = control
            .exec(node, &take_command(node, record), Retry::Idempotent)
            .await?;
        let mut lines = said.lines();
        match lines.next() {
            Some("taken") => return Ok(Asked::Taken),
            Some("held") => {
                let age = lines.next().and_then(|a| a.trim().parse::<u64>().ok());
                let json: String = lines.collect::<Vec<_>>().join("\n");
                if json.trim().is_empty() {
                    continue; // released between the link and the read
                }
                let holder: Holder = serde_json::from_str(json.trim()).with_context(|| {
                    format!(
                        "{}: {} is not a stampede run lock: remove it if no run uses the node",
                        node.name,
                        lock_file(node)
                    )
                })?;
                return Ok(Asked::Held(
                    holder,
                    Duration::from_secs(age.unwrap_or_default()),
                ));
            }
            _ => anyhow::bail!("{}: the run lock's command said {said:?}", node.name),
        }
    }
    anyhow::bail!("{}: its run lock keeps changing hands", node.name)
}

/// The run lock on every node of a controller, held until [`RunLock::release`]; a heartbeat
/// keeps it alive meanwhile.
pub struct RunLock {
    control: Control,
    holder: Holder,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl RunLock {
    /// Takes the lock on every node of `control`, taking over each whose holder died (the
    /// returned lines say whose, and on which nodes). Refuses, with one line naming the node and the holder, when
    /// a live run holds any of them; then it holds none.
    pub async fn take(control: &Control) -> anyhow::Result<(RunLock, Vec<String>)> {
        let control = control.detached();
        let holder = Holder::this_process()?;
        let record = serde_json::to_string(&holder)?;
        let asks = control
            .nodes()
            .iter()
            .map(|n| take_one(&control, n, &record));
        let results = futures::future::join_all(asks).await;
        let lock = RunLock {
            heartbeat: tokio::spawn(heartbeat(control.clone(), holder.token.clone())),
            control,
            holder,
        };
        let mut dead: Vec<(Holder, Vec<&str>)> = Vec::new();
        let mut refusal = None;
        for (node, result) in lock.control.nodes().iter().zip(results) {
            match result {
                Ok(Some(holder)) => match dead.iter_mut().find(|(h, _)| h.token == holder.token) {
                    Some((_, nodes)) => nodes.push(&node.name),
                    None => dead.push((holder, vec![&node.name])),
                },
                Ok(None) => {}
                Err(e) => {
                    refusal.get_or_insert(e);
                }
            }
        }
        let taken_over = dead
            .iter()
            .map(|(holder, nodes)| {
                format!(
                    "the run lock of {holder}, which is gone, taken over on {}",
                    nodes.join(", ")
                )
            })
            .collect();
        if let Some(e) = refusal {
            lock.release().await;
            return Err(e);
        }
        Ok((lock, taken_over))
    }

    /// Removes this run's lock from every node (a node that cannot be reached keeps it, to be
    /// taken over as a dead holder's); stops the heartbeat.
    pub async fn release(self) {
        self.heartbeat.abort();
        // A touch already sent must not land after the removal.
        self.control.settle().await;
        let removals = self.control.nodes().iter().map(|node| {
            let cmd = remove_command(node, &self.holder.token);
            let control = &self.control;
            async move { control.exec(node, &cmd, Retry::Idempotent).await }
        });
        for (node, result) in self
            .control
            .nodes()
            .iter()
            .zip(futures::future::join_all(removals).await)
        {
            if let Err(e) = result {
                eprintln!("warning: the run lock on {} stays: {e:#}", node.name);
            }
        }
    }
}

/// Takes `node`'s lock, taking it over when its holder is dead: `Some` is that holder.
async fn take_one(control: &Control, node: &Node, record: &str) -> anyhow::Result<Option<Holder>> {
    let here = boot_id()?;
    let asked = ask(control, node, record).await;
    match asked.map_err(|e| super::unanswered(node, e))? {
        Asked::Taken => Ok(None),
        Asked::Held(holder, age) if holder.alive(age, &here) => anyhow::bail!(
            "{}: another run holds this cluster: {holder}; wait for it to end, or stop it \
             (a run whose controller died is taken over by the next one)",
            node.name
        ),
        Asked::Held(dead, _) => {
            control
                .exec(node, &remove_command(node, &dead.token), Retry::Idempotent)
                .await?;
            match ask(control, node, record).await? {
                Asked::Taken => Ok(Some(dead)),
                Asked::Held(holder, _) => anyhow::bail!(
                    "{}: another run took this cluster over first: {holder}",
                    node.name
                ),
            }
        }
    }
}

/// Touches this run's lock files every [`HEARTBEAT`] (only files that still hold its token).
async fn heartbeat(control: Control, token: String) {
    loop {
        tokio::time::sleep(HEARTBEAT).await;
        for node in control.nodes() {
            let cmd = format!(
                "f={f}; grep -qF {token} $f 2>/dev/null && touch $f; true",
                f = quote(&lock_file(node)),
                token = quote(&token),
            );
            if let Err(e) = control.exec(node, &cmd, Retry::Idempotent).await {
                tracing::debug!(node = %node.name, "run lock heartbeat: {e:#}");
            }
        }
    }
}

/// The live holder of any node's lock (for commands that must not act under a running test,
/// such as `stampede heal`); a dead holder's lock is removed on the way.
pub async fn live_holder(control: &Control) -> anyhow::Result<Option<(String, Holder)>> {
    let here = boot_id()?;
    for node in control.nodes() {
        let cmd = format!(
            "f={f}; [ -f $f ] && echo $(( $(date +%s) - $(stat -c %Y $f) )) && cat $f; true",
            f = quote(&lock_file(node))
        );
        let said = control.exec(node, &cmd, Retry::Idempotent).await?;
        let Some((age, json)) = said.split_once('\n') else {
            continue;
        };
        let Ok(holder) = serde_json::from_str::<Holder>(json.trim()) else {
            continue;
        };
        let age = Duration::from_secs(age.trim().parse().unwrap_or_default());
        if holder.alive(age, &here) {
            return Ok(Some((node.name.clone(), holder)));
        }
        control
            .exec(
                node,
                &remove_command(node, &holder.token),
                Retry::Idempotent,
            )
            .await?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reused_pid_is_not() {
        let me = Holder::this_process().unwrap();
        let here = boot_id().unwrap();
        assert!(me.alive(Duration::from_secs(3600), &here));
        let reused = Holder {
            started_ticks: me.started_ticks + 1,
            ..me.clone()
        };
        assert!(
            !reused.alive(Duration::ZERO, &here),
            "another process's pid"
        );
    }

    #[test]
    fn a_holder_on_another_machine_lives_by_its_heartbeat() {
        let elsewhere = Holder {
            boot_id: "another-machine".into(),
            ..Holder::this_process().unwrap()
        };
        let here = boot_id().unwrap();
        assert!(elsewhere.alive(Duration::from_secs(5), &here));
        assert!(!elsewhere.alive(STALE_AFTER, &here));
    }

    #[test]
    fn the_refusal_names_the_holder() {
        let me = Holder::this_process().unwrap();
        let shown = me.to_string();
        assert!(shown.starts_with(&format!("pid {} (`", std::process::id())));
        assert!(shown.contains(&me.since), "{shown}");
    }
}
