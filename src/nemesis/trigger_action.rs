//! What a log-trigger agent does on its node when a line matches: signal the server (SIGKILL,
//! SIGSTOP), cut the node off from the other servers with iptables DROP rules (the partition
//! nemesis's own chain, so its heal removes them), or a power loss (SIGKILL, then the
//! lose-unfsynced layer throws away what the server had not fsync'd).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::trigger_agent::{realtime_ns, Server};

/// An action of the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send this signal (`libc::SIGKILL`, `libc::SIGSTOP`) to the server.
    Signal(i32),
    /// Drop every packet from these hosts (the other servers): the node is cut off.
    Drop(Vec<String>),
    /// A power loss: SIGKILL the server, wait until it is dead, then tell the layer whose
    /// control port is in this file to throw away the unsynced data.
    PowerLoss(PathBuf),
}

/// What one action did, as recorded with its firing.
#[derive(Debug, Default)]
pub struct Outcome {
    /// When it took effect, `None` when it could not be taken.
    pub acted_ns: Option<u64>,
    /// The server process signalled.
    pub pid: Option<u32>,
    /// The layer's account of a power loss (`{bytes, files}`).
    pub lost: Option<serde_json::Value>,
    /// Why it could not be taken.
    pub error: Option<String>,
}

/// An action ready to be taken. A drop keeps an `iptables-restore --noflush` started and
/// waiting for its rules on stdin: starting the program takes 2-5 ms on a loaded box (most of
/// it loading the binary), feeding one that waits well under one.
pub struct Armed<'a> {
    action: &'a Action,
    restore: Option<Child>,
}

/// How long a power loss waits for the killed server to be dead before losing its data.
const DEATH_TIMEOUT: Duration = Duration::from_secs(10);

impl<'a> Armed<'a> {
    /// Prepares `action` (starts the waiting `iptables-restore` of a drop).
    pub fn new(action: &'a Action) -> anyhow::Result<Armed<'a>> {
        let restore = match action {
            Action::Drop(_) => Some(waiting_restore()?),
            _ => None,
        };
        Ok(Armed { action, restore })
    }

    /// Takes the action on `server`'s node, and prepares the next one.
    pub fn act(&mut self, server: &Server) -> anyhow::Result<Outcome> {
        Ok(match self.action {
            Action::Signal(signal) => {
                let pid = server.pid();
                Outcome {
                    acted_ns: pid.and_then(|pid| send(pid, *signal)),
                    pid,
                    ..Outcome::default()
                }
            }
            Action::Drop(hosts) => {
                let child = match self.restore.take() {
                    Some(child) => child,
                    None => waiting_restore()?,
                };
                let outcome = drop_from(child, hosts);
                self.restore = Some(waiting_restore()?);
                outcome
            }
            Action::PowerLoss(port_file) => power_loss(server, port_file),
        })
    }
}

/// Sends `signal` to `pid`; when it was sent.
fn send(pid: u32, signal: i32) -> Option<u64> {
    // SAFETY: kill(2) with a pid checked against the server's command line.
    let sent = unsafe { libc::kill(pid as i32, signal) } == 0;
    sent.then(realtime_ns)
}

/// An `iptables-restore --noflush` waiting for rules on its stdin, killed if the agent dies
/// (so a disarmed agent leaves no rules to come after the heal).
fn waiting_restore() -> anyhow::Result<Child> {
    let mut cmd = Command::new("iptables-restore");
    cmd.arg("--noflush")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    cmd.spawn()
        .map_err(|e| anyhow::anyhow!("cannot start iptables-restore: {e}"))
}

/// Feeds `child` the rules dropping packets from `hosts`; in effect once it exits cleanly.
fn drop_from(mut child: Child, hosts: &[String]) -> Outcome {
    let rules = super::partition::restore_rules(hosts);
    let fed = child
        .stdin
        .take()
        .map(|mut stdin| stdin.write_all(rules.as_bytes()));
    let status = child.wait();
    let mut why = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut stderr, &mut why);
    }
    match (fed, status) {
        (Some(Ok(())), Ok(status)) if status.success() => Outcome {
            acted_ns: Some(realtime_ns()),
            ..Outcome::default()
        },
        (_, status) => Outcome {
            error: Some(format!(
                "iptables-restore failed ({status:?}): {}",
                why.trim()
            )),
            ..Outcome::default()
        },
    }
}

/// Whether process `pid` has exited (gone, or a zombie not reaped yet).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// Kills the server and, once it is dead, throws away what it had not fsync'd. A dead server
/// writes nothing more, so its files are then what they were at the kill: losing the unsynced
/// data after the kill is a power loss at the moment of the kill, which is when it is
/// recorded as having acted.
fn power_loss(server: &Server, port_file: &std::path::Path) -> Outcome {
    let Some(pid) = server.pid() else {
        return Outcome::default();
    };
    let Some(killed_ns) = send(pid, libc::SIGKILL) else {
        return Outcome::default();
    };
    let began = Instant::now();
    while !dead(pid) {
        if began.elapsed() > DEATH_TIMEOUT {
            return Outcome {
                pid: Some(pid),
                error: Some(format!("server {pid} still alive 10 s after SIGKILL")),
                ..Outcome::default()
            };
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    match ask_layer(port_file, "lose") {
        Ok(lost) => Outcome {
            acted_ns: Some(killed_ns),
            pid: Some(pid),
            lost: Some(lost),
            error: None,
        },
        Err(e) => Outcome {
            pid: Some(pid),
            error: Some(format!("killed, but the layer did not lose: {e:#}")),
            ..Outcome::default()
        },
    }
}

/// Sends `command` to the layer whose control port is in `port_file`; its JSON answer.
fn ask_layer(port_file: &std::path::Path, command: &str) -> anyhow::Result<serde_json::Value> {
    let reply = super::lazyfs::serve::command(port_file, command)
        .map_err(|e| anyhow::anyhow!("{}: {e:#}", port_file.display()))?;
    let value: serde_json::Value = serde_json::from_str(&reply)?;
    anyhow::ensure!(value.get("error").is_none(), "the layer answered {value}");
    Ok(value)
}
