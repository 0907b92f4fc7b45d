//! Control: running commands on nodes over SSH.
//!
//! Every action on a node goes through here, for real VMs and for the local cluster alike.
//! Sessions are pooled per node and reused; a connection that drops before a command was sent
//! is re-established and the command sent again, and commands marked idempotent are retried
//! after a drop mid-command too. Every error names the node and the command.

#[cfg(test)]
pub mod fake;
mod inventory;
mod node;
mod session;
pub mod shell;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use ssh2::Session;

#[cfg(test)]
pub use node::test_nodes;
pub use node::{parse_list, read_file as read_nodes_file, Node};
use session::Failure;
pub use session::{check_key_file, HostKeyPolicy, Output, SshOptions};

/// Whether a command may be sent again after the connection dropped while it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Sending it twice is harmless (reads, `mkdir -p`, kill by pid file).
    Idempotent,
    /// Send it at most once after it may have started.
    Once,
}

/// Runs commands on a set of nodes over pooled SSH sessions.
#[derive(Clone)]
pub struct Control {
    opts: Arc<SshOptions>,
    nodes: Arc<Vec<Node>>,
    idle: Arc<Mutex<HashMap<String, Vec<Session>>>>,
    /// Commands sent and not finished, across every clone. A command runs on a blocking
    /// thread to its end even when its caller is gone (a dropped future cannot unsend it), so
    /// healing first waits for this to reach 0 ([`Control::settle`]).
    in_flight: Arc<tokio::sync::watch::Sender<usize>>,
    /// Machines that answer in place of SSH: the fakes the harness's own rules run on.
    #[cfg(test)]
    machines: Option<Arc<dyn fake::Machines>>,
}

/// One command in flight; counted from its creation to its drop, on the thread that runs it.
struct InFlight(Arc<tokio::sync::watch::Sender<usize>>);

impl InFlight {
    fn enter(count: &Arc<tokio::sync::watch::Sender<usize>>) -> InFlight {
        count.send_modify(|n| *n += 1);
        InFlight(count.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// How long a command may take unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One reading of a node's clock against the controller's ([`Control::read_clock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// The node's clock minus the controller's, in nanoseconds.
    pub offset_ns: i128,
    /// From the probe's byte sent to its answer received, in nanoseconds: the offset is off
    /// by at most half of it.
    pub round_trip_ns: i128,
}

impl Control {
    /// A controller for `nodes`, connecting with `opts`.
    pub fn new(nodes: Vec<Node>, opts: SshOptions) -> Control {
        Control {
            opts: Arc::new(opts),
            nodes: Arc::new(nodes),
            idle: Arc::default(),
            in_flight: Arc::new(tokio::sync::watch::channel(0).0),
            #[cfg(test)]
            machines: None,
        }
    }

    /// A controller for `nodes` whose commands `machines` answer, without SSH.
    #[cfg(test)]
    pub fn on_machines(nodes: Vec<Node>, machines: Arc<dyn fake::Machines>) -> Control {
        Control {
            machines: Some(machines),
            ..Control::new(
                nodes,
                SshOptions {
                    key: None,
                    known_hosts: "/dev/null".into(),
                    policy: HostKeyPolicy::AcceptNew,
                    connect_timeout: Duration::from_secs(1),
                },
            )
        }
    }

    /// A controller for the same nodes with sessions and a count of commands in flight of its
    /// own: for background work (the run lock's heartbeat) that a heal must not wait for.
    pub fn detached(&self) -> Control {
        Control {
            #[cfg(test)]
            machines: self.machines.clone(),
            ..Control::new(self.nodes.to_vec(), (*self.opts).clone())
        }
    }

    /// Commands sent through this controller (or a clone) that have not finished.
    pub fn in_flight(&self) -> usize {
        *self.in_flight.borrow()
    }

    /// Waits until every command sent so far has finished, including those whose callers were
    /// dropped: a fault action already sent lands before whatever comes after this (a heal).
    pub async fn settle(&self) {
        let mut count = self.in_flight.subscribe();
        let _ = count.wait_for(|n| *n == 0).await;
    }

    /// Drops the pooled sessions to `node`: after its machine rebooted they are dead, and the
    /// next command connects afresh.
    pub fn forget_sessions(&self, node: &Node) {
        self.idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&node.name);
    }

    /// The nodes under control, in the order they were given.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Runs `command` as root on `node`; a non-zero exit is not an error here.
    pub async fn run(
        &self,
        node: &Node,
        command: &str,
        timeout: Duration,
        retry: Retry,
    ) -> anyhow::Result<Output> {
        self.run_with_input(node, command, Vec::new(), false, timeout, retry)
            .await
    }

    /// Reads `node`'s clock with `probe`, a command that prints a first line once it runs,
    /// waits for one byte of input, and then at once prints the time in nanoseconds since the
    /// epoch. The byte is sent once the first line has arrived, so the reading falls between
    /// that send and the answer's arrival, however slowly the probe started. Returns how far
    /// the reading is from the midpoint of the two, and how long they were apart (the
    /// reading's error is at most half of it).
    pub async fn read_clock(&self, node: &Node, probe: &str) -> anyhow::Result<ClockReading> {
        let command = probe.to_string();
        let input = b"x".to_vec();
        let out = self
            .run_with_input(
                node,
                &command,
                input,
                true,
                DEFAULT_TIMEOUT,
                Retry::Idempotent,
            )
            .await?;
        let received = out.answered.unwrap_or_else(std::time::SystemTime::now);
        check_status(node, &command, &out)?;
        let text = out.stdout_text();
        let last = text.lines().last().unwrap_or_default();
        let reading: i128 = last
            .parse()
            .with_context(|| format!("on {}: `{probe}` printed {text:?}", node.name))?;
        let ns = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as i128)
                .unwrap_or(0)
        };
        let (sent, received) = (ns(out.input_sent.unwrap_or(received)), ns(received));
        Ok(ClockReading {
            offset_ns: reading - (sent + received) / 2,
            round_trip_ns: received - sent,
        })
    }

    /// Runs `command` as root on `node` and returns its trimmed standard output; a non-zero
    /// exit is an error carrying the node, the command and its standard error.
    pub async fn exec(&self, node: &Node, command: &str, retry: Retry) -> anyhow::Result<String> {
        self.run_checked(node, command, DEFAULT_TIMEOUT, retry)
            .await
    }

    /// Like [`Control::exec`], with a time limit of its own.
    pub async fn run_checked(
        &self,
        node: &Node,
        command: &str,
        timeout: Duration,
        retry: Retry,
    ) -> anyhow::Result<String> {
        let out = self.run(node, command, timeout, retry).await?;
        check_status(node, command, &out)?;
        Ok(out.stdout_text())
    }

    /// Writes `data` to `remote_path` on `node` (as root), replacing the file atomically.
    pub async fn upload(
        &self,
        node: &Node,
        data: Vec<u8>,
        remote_path: &str,
        mode: u32,
    ) -> anyhow::Result<()> {
        // A name of its own per upload, so that nodes sharing a disk can upload at once.
        let tmp = format!("{remote_path}.{:016x}.upload", rand::random::<u64>());
        let command = format!(
            "cat > {tmp} && chmod {mode:o} {tmp} && mv -f {tmp} {dst}",
            tmp = shell::quote(&tmp),
            dst = shell::quote(remote_path)
        );
        let out = self
            .run_with_input(
                node,
                &command,
                data,
                false,
                DEFAULT_TIMEOUT,
                Retry::Idempotent,
            )
            .await?;
        check_status(node, &format!("upload to {remote_path}"), &out)
    }

    /// Reads `remote_path` from `node` into `local_path`.
    pub async fn download(
        &self,
        node: &Node,
        remote_path: &str,
        local_path: &Path,
    ) -> anyhow::Result<()> {
        let command = format!("cat {}", shell::quote(remote_path));
        let out = self
            .run(node, &command, DEFAULT_TIMEOUT, Retry::Idempotent)
            .await?;
        check_status(node, &command, &out)?;
        std::fs::write(local_path, &out.stdout)
            .with_context(|| format!("cannot write {}", local_path.display()))
    }

    async fn run_with_input(
        &self,
        node: &Node,
        command: &str,
        stdin: Vec<u8>,
        await_ready: bool,
        timeout: Duration,
        retry: Retry,
    ) -> anyhow::Result<Output> {
        let counted = InFlight::enter(&self.in_flight);
        #[cfg(test)]
        if let Some(machines) = &self.machines {
            let answer = machines.answer(node, command, &stdin).await;
            drop(counted);
            return Ok(answer);
        }
        let this = self.clone();
        let node_owned = node.clone();
        let wrapped = shell::as_root(&node.user, command);
        let result = tokio::task::spawn_blocking(move || {
            let _counted = counted;
            this.run_blocking(&node_owned, &wrapped, &stdin, await_ready, timeout, retry)
        })
        .await
        .map_err(|e| anyhow!("SSH task failed: {e}"))?;
        result.with_context(|| format!("on {}: `{}`", node.name, abbreviate(command)))
    }

    fn run_blocking(
        &self,
        node: &Node,
        command: &str,
        stdin: &[u8],
        await_ready: bool,
        timeout: Duration,
        retry: Retry,
    ) -> anyhow::Result<Output> {
        let deadline = Instant::now() + timeout;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let session = match self.take_session(node) {
                Ok(s) => s,
                Err(e) if attempts < 3 && Instant::now() < deadline => {
                    tracing::debug!(node = %node.name, "connect failed, retrying: {e:#}");
                    std::thread::sleep(Duration::from_millis(300));
                    continue;
                }
                Err(e) => return Err(e),
            };
            match session::run(&session, command, stdin, await_ready, deadline) {
                Ok(out) => {
                    self.put_session(node, session);
                    return Ok(out);
                }
                Err(Failure::BeforeSend(e)) if attempts < 3 && Instant::now() < deadline => {
                    tracing::debug!(node = %node.name, "session dropped before sending, retrying: {e:#}");
                }
                Err(Failure::AfterSend(e))
                    if retry == Retry::Idempotent && attempts < 3 && Instant::now() < deadline =>
                {
                    tracing::debug!(node = %node.name, "session dropped mid-command, retrying: {e:#}");
                }
                Err(Failure::BeforeSend(e) | Failure::AfterSend(e)) => {
                    let limit = if Instant::now() >= deadline {
                        format!(" (limit {timeout:?})")
                    } else {
                        String::new()
                    };
                    return Err(e.context(format!("command failed{limit}")));
                }
            }
        }
    }

    fn take_session(&self, node: &Node) -> anyhow::Result<Session> {
        let pooled = self
            .idle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&node.name)
            .and_then(Vec::pop);
        match pooled {
            Some(s) => Ok(s),
            None => session::connect(node, &self.opts)
                .with_context(|| format!("{}@{}:{}", node.user, node.host, node.port)),
        }
    }

    fn put_session(&self, node: &Node, session: Session) {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let sessions = idle.entry(node.name.clone()).or_default();
        if sessions.len() < 4 {
            sessions.push(session);
        }
    }
}

fn check_status(node: &Node, command: &str, out: &Output) -> anyhow::Result<()> {
    if out.status != 0 {
        let stderr = out.stderr_text();
        let detail = stderr.lines().last().unwrap_or("").to_string();
        bail!(
            "on {}: `{}` exited with status {}: {}",
            node.name,
            abbreviate(command),
            out.status,
            detail
        );
    }
    Ok(())
}

/// The first line of a command, shortened for error messages.
fn abbreviate(command: &str) -> String {
    let first = command.lines().next().unwrap_or("");
    if first.len() > 120 || command.contains('\n') {
        let cut: String = first.chars().take(117).collect();
        format!("{cut}...")
    } else {
        first.to_string()
    }
}
