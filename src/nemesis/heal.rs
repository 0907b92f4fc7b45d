//! Healing everything, whatever the controller knows: used at the end of every run, on
//! Ctrl-C, SIGTERM, panic or error, and by `stampede heal` after a controller crash.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use anyhow::anyhow;
use futures::FutureExt;

use super::interrupts::Interrupts;
use super::{trigger, HealStage, KINDS};
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// Whether a heal starts again a server that was set up but is not running (a run's heal,
/// `stampede heal`), or leaves it stopped (the heal before a teardown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Start every set-up server that is not running.
    Servers,
    /// Leave servers as they are, and forget an unfinished membership change instead of
    /// restoring it: the servers are about to be removed.
    Nothing,
}

/// Heals one node: the machine-stage heals of the kinds (a guest booted), then a log trigger
/// disarmed, then each kind's own heal by stage (network rules, clocks, a paused server, data
/// files), and with [`Restart::Servers`] a server that was set up but is not running is
/// started again, unless a kind holds it (a membership change pending there). Returns what
/// it did.
async fn heal_node(
    control: &Control,
    db: &dyn Db,
    node: &Node,
    restart: Restart,
) -> anyhow::Result<NodeHealed> {
    let mut done = heal_stages(control, db, node, |s| s == HealStage::Machine).await?;
    // The trigger agent next: a drop it fires must not come after the rules are removed.
    control
        .exec(node, &trigger::heal_command(node), Retry::Idempotent)
        .await?;
    done.extend(heal_stages(control, db, node, |s| s > HealStage::Machine).await?);
    let mut held = Vec::new();
    if restart == Restart::Servers {
        for kind in KINDS {
            if kind.holds_server(control, node).await? {
                held.push(kind.name());
            }
        }
    }
    if restart == Restart::Servers
        && held.is_empty()
        && db.is_set_up(control, node).await?
        && !db.is_running(control, node).await?
    {
        db.start(control, node).await?;
        done.push("restarted server");
    }
    Ok(NodeHealed { done, held })
}

/// Runs the node heals of the kinds whose stage `stages` picks, stage by stage; says what they
/// did.
pub(super) async fn heal_stages(
    control: &Control,
    db: &dyn Db,
    node: &Node,
    stages: impl Fn(HealStage) -> bool,
) -> anyhow::Result<Vec<&'static str>> {
    let mut healing: Vec<_> = KINDS
        .iter()
        .filter_map(|k| k.heal_stage().filter(|s| stages(*s)).map(|s| (s, *k)))
        .collect();
    healing.sort_by_key(|(stage, _)| *stage);
    let mut done = Vec::new();
    for (_, kind) in healing {
        done.extend(kind.heal_node(control, db, node).await?);
    }
    Ok(done)
}

/// What healing one node did, and the kinds that hold its server stopped (looked for only
/// with [`Restart::Servers`]).
struct NodeHealed {
    done: Vec<&'static str>,
    held: Vec<&'static str>,
}

/// Heals every node at once, once every command already sent (a fault action whose caller
/// was interrupted included) has finished, so that none lands after the heal; an error lists
/// each node that could not be healed.
pub async fn heal_all(control: &Control, db: &dyn Db) -> anyhow::Result<()> {
    heal(control, db, Restart::Servers).await
}

/// Heals every node as [`heal_all`] does, starting stopped servers again and restoring the
/// planned membership only with [`Restart::Servers`].
pub async fn heal(control: &Control, db: &dyn Db, restart: Restart) -> anyhow::Result<()> {
    let in_flight = control.in_flight();
    if in_flight > 0 {
        tracing::info!("waiting for {in_flight} commands in flight before healing");
    }
    control.settle().await;
    let heals = control
        .nodes()
        .iter()
        .map(|n| heal_node(control, db, n, restart));
    let results = futures::future::join_all(heals).await;
    let mut failures = Vec::new();
    let mut held: Vec<&str> = Vec::new();
    for (node, result) in control.nodes().iter().zip(results) {
        match result {
            Ok(healed) => {
                held.extend(healed.held);
                tracing::debug!(node = %node.name, "healed: {}", healed.done.join(", "));
            }
            Err(e) => failures.push(format!("{}: {e:#}", node.name)),
        }
    }
    for kind in KINDS {
        let held = held.contains(&kind.name());
        if let Err(e) = kind.heal_cluster(control, db, restart, held).await {
            failures.push(format!("{}: {e:#}", kind.name()));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(anyhow!(
            "could not heal every node: {}",
            failures.join("; ")
        ))
    }
}

/// How a guarded piece of work ended.
#[derive(Debug)]
pub enum Ending<T> {
    /// It finished (with success or an error).
    Finished(anyhow::Result<T>),
    /// SIGINT or SIGTERM arrived first: the work was asked to stop (or dropped).
    Interrupted(&'static str),
}

/// How guarded work is stopped when a signal arrives: `true` is sent on the channel and the
/// work gets this long to wind down (finish a fault action, heal, record) before it is
/// dropped; the heal that follows still waits for the commands it had sent.
pub struct OnSignal(
    pub tokio::sync::watch::Sender<bool>,
    pub std::time::Duration,
);

/// Runs `work` and then heals every node, whether `work` succeeded, failed, panicked or was
/// interrupted by SIGINT/SIGTERM (caught by `interrupts`).
pub async fn guarded<T>(
    control: &Control,
    db: &dyn Db,
    interrupts: &Interrupts,
    on_signal: OnSignal,
    work: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<Ending<T>> {
    let work = AssertUnwindSafe(work).catch_unwind();
    tokio::pin!(work);
    let ending = match interrupts.unless(&mut work).await {
        Ok(outcome) => Ending::Finished(outcome.unwrap_or_else(|panic| Err(panicked(panic)))),
        Err(signal) => {
            eprintln!("{signal}: stopping the run, then healing every node");
            let OnSignal(cancel, grace) = on_signal;
            let _ = cancel.send(true);
            let _ = tokio::time::timeout(grace, &mut work).await;
            Ending::Interrupted(signal)
        }
    };
    heal_all(control, db).await?;
    Ok(ending)
}

/// A caught panic as an error carrying its message.
pub fn panicked(panic: Box<dyn std::any::Any + Send>) -> anyhow::Error {
    let what = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
    anyhow!("panicked: {}", what.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::control::{HostKeyPolicy, Retry, SshOptions};
    use crate::db::zookeeper::{ZkConfig, ZooKeeper};

    /// A node whose "sshd" accepts connections and closes each 300 ms later without a word,
    /// so that every command to it stays in flight for a while and then fails; returns the
    /// node and the times connections were accepted.
    fn stalling_node() -> (Node, Arc<Mutex<Vec<Instant>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let log = accepted.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                log.lock().unwrap().push(Instant::now());
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(300));
                    drop(conn);
                });
            }
        });
        let node = Node {
            name: "n1".into(),
            host: "127.0.0.1".into(),
            port,
            user: "root".into(),
        };
        (node, accepted)
    }

    /// The race of a `nemesis run` interrupted mid-start: the start's command was sent, its
    /// caller dropped, and the heal must not reach the node before that command is over.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_heal_waits_for_a_fault_command_whose_caller_is_gone() {
        let (node, accepted) = stalling_node();
        let opts = SshOptions {
            key: None,
            known_hosts: "/dev/null".into(),
            policy: HostKeyPolicy::Strict,
            connect_timeout: Duration::from_secs(2),
        };
        let control = Control::new(vec![node.clone()], opts);
        let start = control.exec(&node, "iptables -A STAMPEDE ...", Retry::Once);
        let dropped = tokio::time::timeout(Duration::from_millis(100), start).await;
        assert!(dropped.is_err(), "the start was cut off mid-command");
        assert_eq!(control.in_flight(), 1, "its command still runs");
        let db = ZooKeeper::new(ZkConfig::default(), vec![node]);
        assert!(
            heal_all(&control, &db).await.is_err(),
            "the node cannot be healed"
        );
        assert_eq!(control.in_flight(), 0);
        // Each command tries to connect three times, each try closed 300 ms after it was
        // accepted; the heal's first try comes only after the start's third was closed
        // (interleaved, it would come 100 ms after the start's first).
        let accepted = accepted.lock().unwrap().clone();
        assert_eq!(accepted.len(), 6, "{accepted:?}");
        assert!(
            accepted[3] - accepted[2] >= Duration::from_millis(280),
            "the heal connected before the start's command was over: {accepted:?}"
        );
    }
}
