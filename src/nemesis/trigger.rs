//! Faults aimed by the server's own log (`trigger:` on a kill, pause, partition or
//! lose-unfsynced): the start arms an agent on each targeted node (`stampede agent-trigger`)
//! that follows the server's log and, on a matching line, acts on its own node within a
//! millisecond or two (see [`trigger_action`](super::trigger_action)): SIGKILL or SIGSTOP to
//! the server, iptables DROP rules cutting the node off from the other servers, or a power
//! loss. The stop disarms it, collects its firings and heals what it did.
//!
//! A start's value lists the nodes `armed` (not `nodes`: nothing was done yet); the stop's
//! value lists the firings (`fired`, each with `ago_ns`, how long before the collection it
//! acted, by the node's own clock), the nodes healed (`nodes`), and a `shortfall` for a
//! firing whose action failed. An armed trigger that never fired did not take effect (see
//! `checker::exposure`).

use std::sync::{Arc, Mutex};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::target::SeededTarget;
use super::trigger_agent::Fired;
use super::Nemesis;
use super::{agent, lazyfs, partition};
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// What a triggered fault does on the node whose log matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Triggered {
    /// SIGKILL of the server, healed by starting it.
    Kill,
    /// SIGSTOP of the server, healed by SIGCONT.
    Pause,
    /// The node cut off from every other server (kind `partition`), healed by removing
    /// stampede's partition rules.
    Isolate,
    /// A power loss (kind `lose-unfsynced`), healed by starting the server.
    PowerLoss,
}

impl Triggered {
    /// The triggered fault of `kind`, if that kind takes a trigger.
    pub fn of(kind: &str) -> Option<Triggered> {
        super::kind(kind)?.triggered()
    }

    /// The fault kind.
    pub fn kind(self) -> &'static str {
        let entry = super::KINDS.iter().find(|k| k.triggered() == Some(self));
        entry.expect("every trigger action has its kind").name()
    }
}

/// When a fault fires: on a line of the server's log matching `pattern`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TriggerConfig {
    /// A regular expression (Rust `regex` syntax) matched against each new log line.
    pub pattern: String,
    /// Wait between seeing the line and signalling, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// A random extra wait, uniform from 0 to this many milliseconds (to sweep a window).
    #[serde(default)]
    pub jitter_ms: u64,
    /// Signals sent at most per node while armed.
    #[serde(default = "one")]
    pub count: u32,
    /// Chance that a matching line fires, above 0 and at most 1.
    #[serde(default = "certain")]
    pub probability: f64,
}

fn one() -> u32 {
    1
}

fn certain() -> f64 {
    1.0
}

impl TriggerConfig {
    /// Checks the trigger for a fault of `kind`; the error is a sentence.
    pub fn check(&self, kind: &str) -> Result<regex::Regex, String> {
        let Some(action) = Triggered::of(kind) else {
            let takers: Vec<&str> = super::KINDS
                .iter()
                .filter(|k| k.triggered().is_some())
                .map(|k| k.name())
                .collect();
            let (last, others) = takers.split_last().expect("some kinds take a trigger");
            return Err(format!(
                "only {} and {last} faults take a trigger, not {kind}",
                others.join(", ")
            ));
        };
        if self.count == 0 {
            return Err("count 0 never fires; give at least 1".into());
        }
        if action == Triggered::Isolate && self.count != 1 {
            return Err(format!(
                "count {}: a triggered partition cuts its node off once; give 1",
                self.count
            ));
        }
        if !(self.probability > 0.0 && self.probability <= 1.0) {
            return Err(format!(
                "probability {} is not above 0 and at most 1",
                self.probability
            ));
        }
        regex::Regex::new(&self.pattern).map_err(|e| {
            let why = e.to_string();
            let last = why.lines().last().unwrap_or_default().trim().to_string();
            format!(
                "pattern {:?} is not a regular expression: {last}",
                self.pattern
            )
        })
    }
}

/// Where the agent keeps its pid file, output and firings on a node (by host: local nodes
/// share a disk).
fn agent_file(node: &Node, ext: &str) -> String {
    format!("/var/lib/stampede/trigger/{}.{ext}", node.host)
}

/// The shell command that kills `node`'s trigger agent (by pid, its command line checked),
/// waits until it is dead (a zombie's command line is empty), and prints the node's clock
/// (`now=<ns>`) then the firings it recorded; it removes the agent's files. The agent is
/// stopped (SIGSTOP) first and killed only while no action of its is under way (its acting
/// file absent; up to 10 s), so an action it began is recorded, and healed, before it dies.
fn disarm_command(node: &Node) -> String {
    format!(
        "f={pid}; a={acting}; if [ -f $f ]; then p=$(cat $f); \
         if grep -q agent-trigger /proc/$p/cmdline 2>/dev/null; then \
         for i in $(seq 500); do kill -STOP $p 2>/dev/null && [ -f $a ] || break; kill -CONT $p; sleep 0.02; done; \
         kill -9 $p; fi; \
         while grep -q agent-trigger /proc/$p/cmdline 2>/dev/null; do sleep 0.02; done; rm -f $f; fi; \
         echo now=$(date +%s%N); cat {rec} 2>/dev/null; rm -f {rec} {out} $a; true",
        pid = quote(&agent_file(node, "pid")),
        acting = quote(&agent_file(node, "acting")),
        rec = quote(&agent_file(node, "jsonl")),
        out = quote(&agent_file(node, "out")),
    )
}

/// A shell command that prints `log-trigger agent` when `node`'s trigger agent runs.
pub(super) fn leftover_probe(node: &Node) -> String {
    format!(
        "f={}; [ -f $f ] && grep -q agent-trigger /proc/$(cat $f)/cmdline 2>/dev/null && echo 'log-trigger agent'; true",
        quote(&agent_file(node, "pid"))
    )
}

/// The shell command `stampede heal` runs: disarms `node`'s trigger agent, if any (before the
/// partition rules are removed, so that a drop cannot land after them).
pub fn heal_command(node: &Node) -> String {
    disarm_command(node)
}

/// A kill, pause, partition or power loss that fires on a line of the targeted servers' logs.
pub struct TriggeredNemesis {
    control: Control,
    db: Arc<dyn Db>,
    /// What is done, and to which servers.
    aim: (Triggered, SeededTarget),
    trigger: TriggerConfig,
    armed: Mutex<Vec<Node>>,
}

impl TriggeredNemesis {
    /// `fault` on the servers `target` picks, fired by `trigger`.
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        aim: (Triggered, SeededTarget),
        trigger: TriggerConfig,
    ) -> anyhow::Result<TriggeredNemesis> {
        let check = trigger.check(aim.0.kind());
        check.map_err(|e| anyhow::anyhow!("trigger: {e}"))?;
        let armed = Mutex::default();
        #[rustfmt::skip]
        let nemesis = TriggeredNemesis { control, db, aim, trigger, armed };
        Ok(nemesis)
    }

    /// The command that starts the agent on `node`, reading its log from the end it has now.
    /// An agent gone 0.2 s later failed to arm, unless it already fired its count (a
    /// restarted server logging the line as it came up) and recorded it: then it is armed, and
    /// the stop collects and heals that firing.
    fn arm_command(&self, agent: &str, node: &Node) -> anyhow::Result<String> {
        let files = self.db.server_files(node).with_context(|| {
            format!(
                "trigger: {} does not say where its server logs",
                self.db.name()
            )
        })?;
        let (action, ready) = self.action_args(node)?;
        Ok(format!(
            "{ready}mkdir -p /var/lib/stampede/trigger || exit 1; rm -f {rec} {acting}; \
             from=$(stat -c %s {log} 2>/dev/null || echo 0); \
             setsid nohup {agent} agent-trigger --log {log} --from $from --pidfile {pidfile} --marker {marker} \
             --pattern {pattern} {action} --delay-ms {delay} --jitter-ms {jitter} --count {count} --probability {probability} --record {rec} \
             > {out} 2>&1 < /dev/null & echo $! > {pid}; sleep 0.2; kill -0 $(cat {pid}) 2>/dev/null || [ -s {rec} ] || {{ cat {out}; exit 1; }}",
            rec = quote(&agent_file(node, "jsonl")),
            acting = quote(&agent_file(node, "acting")),
            log = quote(&files.log),
            pidfile = quote(&files.pidfile),
            marker = quote(&files.marker),
            pattern = quote(&self.trigger.pattern),
            delay = self.trigger.delay_ms,
            jitter = self.trigger.jitter_ms,
            count = self.trigger.count,
            probability = self.trigger.probability,
            out = quote(&agent_file(node, "out")),
            pid = quote(&agent_file(node, "pid")),
        ))
    }

    /// The agent's action arguments for `node`, and a shell check that must pass before it
    /// is armed (empty when none).
    fn action_args(&self, node: &Node) -> anyhow::Result<(String, String)> {
        Ok(match self.aim.0 {
            Triggered::Kill => ("--action KILL".into(), String::new()),
            Triggered::Pause => ("--action STOP".into(), String::new()),
            Triggered::Isolate => {
                let others: Vec<String> =
                    crate::db::servers(self.db.as_ref(), self.control.nodes())
                        .into_iter()
                        .filter(|n| n.name != node.name)
                        .map(|n| n.host)
                        .collect();
                anyhow::ensure!(
                    !others.is_empty(),
                    "trigger: {} has no other {} server to be cut off from",
                    node.name,
                    self.db.name()
                );
                let from = quote(&others.join(","));
                (format!("--action DROP --drop-from {from}"), String::new())
            }
            Triggered::PowerLoss => {
                let port = quote(&lazyfs::port_file(self.db.as_ref(), node));
                let ready = format!(
                    "test -s {port} || {{ echo 'no lose-unfsynced layer serves the data directory ({port} is missing)'; exit 1; }}; "
                );
                (format!("--action LOSE --layer-port-file {port}"), ready)
            }
        })
    }

    /// Disarms the agent on `node` and returns its firings.
    async fn disarm(&self, node: &Node) -> anyhow::Result<Firings> {
        let out = self
            .control
            .exec(node, &disarm_command(node), Retry::Idempotent)
            .await?;
        Ok(parse_firings(&node.name, &out))
    }

    /// Undoes on `node` what the firings there did.
    async fn heal(&self, node: &Node) -> anyhow::Result<()> {
        match self.aim.0 {
            Triggered::Kill | Triggered::PowerLoss => self.db.start(&self.control, node).await,
            Triggered::Pause => self.db.resume(&self.control, node).await,
            Triggered::Isolate => self
                .control
                .exec(node, partition::HEAL_COMMAND, Retry::Idempotent)
                .await
                .map(drop),
        }
    }
}

/// A node's firings as read at the disarm.
#[derive(Debug, Default, PartialEq)]
struct Firings {
    /// The firings that acted, as recorded in the stop's value.
    acted: Vec<serde_json::Value>,
    /// The actions that failed, a sentence each.
    failed: Vec<String>,
}

impl Firings {
    /// Whether anything was done on the node (an action that failed may have done part).
    fn touched(&self) -> bool {
        !self.acted.is_empty() || !self.failed.is_empty()
    }
}

/// The firings in a disarm command's output (`now=<ns>` then JSON lines), each that acted with
/// how long before now (by the node's clock) it acted.
fn parse_firings(node: &str, out: &str) -> Firings {
    let mut lines = out.lines();
    let now: u64 = lines
        .next()
        .and_then(|l| l.strip_prefix("now="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    let mut firings = Firings::default();
    for f in lines.filter_map(|l| serde_json::from_str::<Fired>(l).ok()) {
        if let Some(error) = &f.error {
            firings.failed.push(format!("{node}: {error}"));
        }
        let Some(acted) = f.acted_ns else { continue };
        let mut value = json!({
            "node": node,
            "line": f.line,
            "seen_ns": f.seen_ns,
            "waited_ns": f.waited_ns,
            "acted_ns": acted,
            "ago_ns": now.saturating_sub(acted),
        });
        if let Some(lost) = f.lost {
            value["lost"] = lost;
        }
        firings.acted.push(value);
    }
    firings
}

#[async_trait::async_trait]
impl Nemesis for TriggeredNemesis {
    fn kind(&self) -> &str {
        self.aim.0.kind()
    }

    fn target(&self) -> String {
        format!("{} on /{}/", self.aim.1, self.trigger.pattern)
    }

    /// Arms an agent on each picked node running the database.
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let picked = self
            .aim
            .1
            .pick(self.control.nodes(), self.db.as_ref())
            .await?;
        let arms = picked.iter().map(|node| async move {
            let agent = agent::install(&self.control, node).await?;
            let cmd = self.arm_command(&agent, node)?;
            self.control
                .exec(node, &cmd, Retry::Once)
                .await
                .with_context(|| format!("cannot arm the trigger on {}", node.name))
        });
        let results = futures::future::join_all(arms).await;
        let mut armed = Vec::new();
        let mut first_error = None;
        for (node, result) in picked.iter().zip(results) {
            match result {
                Ok(_) => armed.push(node.clone()),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        self.armed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(armed.iter().cloned());
        if let Some(e) = first_error {
            return Err(e);
        }
        let names: Vec<&str> = armed.iter().map(|n| n.name.as_str()).collect();
        Ok(json!({ "armed": names, "trigger": self.trigger }))
    }

    async fn fired(&self) -> anyhow::Result<bool> {
        let armed = self.armed.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for node in &armed {
            let cmd = format!(
                "grep -c '\"acted_ns\":[0-9]' {} 2>/dev/null || true",
                quote(&agent_file(node, "jsonl"))
            );
            let count = self.control.exec(node, &cmd, Retry::Idempotent).await?;
            if count.trim().parse::<u32>().unwrap_or(0) > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Disarms every agent, collects the firings, and heals the nodes they acted on; an action
    /// that failed is a `shortfall`.
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let armed = std::mem::take(&mut *self.armed.lock().unwrap_or_else(|p| p.into_inner()));
        let disarms = armed.iter().map(|node| self.disarm(node));
        let mut fired = Vec::new();
        let mut shortfall = Vec::new();
        let mut hit = Vec::new();
        for (node, result) in armed.iter().zip(futures::future::join_all(disarms).await) {
            let firings = result?;
            if firings.touched() {
                hit.push(node.clone());
            }
            fired.extend(firings.acted);
            shortfall.extend(firings.failed);
        }
        let heals = hit.iter().map(|node| self.heal(node));
        for result in futures::future::join_all(heals).await {
            result?;
        }
        let names =
            |nodes: &[Node]| -> Vec<String> { nodes.iter().map(|n| n.name.clone()).collect() };
        let mut value = json!({ "armed": names(&armed), "fired": fired, "nodes": names(&hit) });
        if !shortfall.is_empty() {
            value["shortfall"] = json!(shortfall);
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent in the middle of an action when it is disarmed (its acting file present) is
    /// let finish and record it: the disarm's output holds the firing it recorded 300 ms
    /// after the disarm began, and the agent is dead afterwards.
    #[test]
    fn the_disarm_lets_an_action_under_way_be_recorded_before_it_kills_the_agent() {
        let node = Node {
            host: format!("disarm-test-{}", std::process::id()),
            ..crate::control::test_nodes(1).remove(0)
        };
        std::fs::create_dir_all("/var/lib/stampede/trigger").unwrap();
        let (acting, record) = (agent_file(&node, "acting"), agent_file(&node, "jsonl"));
        std::fs::write(&acting, "").unwrap();
        let mut agent = std::process::Command::new("bash")
            .args(["-c", "exec -a agent-trigger-under-test sleep 30"])
            .spawn()
            .unwrap();
        std::fs::write(agent_file(&node, "pid"), agent.id().to_string()).unwrap();
        let finishing = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::fs::write(&record, "{\"line\":\"recorded\"}\n").unwrap();
            std::fs::remove_file(&acting).unwrap();
        });
        let out = std::process::Command::new("sh")
            .args(["-c", &disarm_command(&node)])
            .output()
            .unwrap();
        finishing.join().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains("recorded"), "the firing was read: {said}");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(agent.wait().unwrap().signal(), Some(libc::SIGKILL));
        for ext in ["pid", "jsonl", "acting", "out"] {
            assert!(
                !std::path::Path::new(&agent_file(&node, ext)).exists(),
                "{ext}"
            );
        }
    }

    #[test]
    fn a_trigger_is_checked_for_its_kind_pattern_count_and_probability() {
        let t = |pattern: &str| TriggerConfig {
            pattern: pattern.into(),
            delay_ms: 0,
            jitter_ms: 0,
            count: 1,
            probability: 1.0,
        };
        assert!(t("NEWLEADER").check("kill").is_ok());
        assert!(t("NEWLEADER").check("pause").is_ok());
        assert!(t("NEWLEADER").check("partition").is_ok());
        assert!(t("NEWLEADER").check("lose-unfsynced").is_ok());
        assert_eq!(
            t("x").check("clock").unwrap_err(),
            "only partition, kill, pause and lose-unfsynced faults take a trigger, not clock"
        );
        let mut twice = t("x");
        twice.count = 2;
        assert!(twice.check("kill").is_ok());
        assert_eq!(
            twice.check("partition").unwrap_err(),
            "count 2: a triggered partition cuts its node off once; give 1"
        );
        let bad = t("received (NEWLEADER").check("kill").unwrap_err();
        assert!(
            bad.starts_with("pattern \"received (NEWLEADER\" is not a regular expression: ")
                && !bad.contains('\n'),
            "{bad}"
        );
        let mut never = t("x");
        never.count = 0;
        assert!(never.check("kill").unwrap_err().starts_with("count 0"));
        let mut odds = t("x");
        odds.probability = 1.5;
        assert!(odds
            .check("kill")
            .unwrap_err()
            .starts_with("probability 1.5"));
    }

    #[test]
    fn firings_are_read_with_the_time_since_they_acted_and_failures_named() {
        let out = "now=5000\n\
                   {\"line\":\"a\",\"seen_ns\":1000,\"acted_ns\":1200,\"pid\":7}\n\
                   {\"line\":\"b\",\"seen_ns\":2000,\"acted_ns\":null,\"pid\":null}\n\
                   {\"line\":\"c\",\"seen_ns\":3000,\"acted_ns\":3100,\"pid\":8,\"lost\":{\"bytes\":4096,\"files\":1}}\n\
                   {\"line\":\"d\",\"seen_ns\":4000,\"acted_ns\":null,\"error\":\"iptables-restore failed\"}\n";
        let firings = parse_firings("n2", out);
        assert_eq!(
            firings.acted,
            [
                json!({"node": "n2", "line": "a", "seen_ns": 1000, "waited_ns": 0, "acted_ns": 1200,
                "ago_ns": 3800}),
                json!({"node": "n2", "line": "c", "seen_ns": 3000, "waited_ns": 0, "acted_ns": 3100,
                "ago_ns": 1900, "lost": {"bytes": 4096, "files": 1}})
            ]
        );
        assert_eq!(firings.failed, ["n2: iptables-restore failed"]);
        let none = parse_firings("n2", "now=5000\n");
        assert!(!none.touched());
    }
}
