//! A database server process on a node, found by the pid file in its home directory and
//! checked against a marker in its command line (so a reused pid is never signalled), and
//! started detached under `setsid`, optionally under libfaketime.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};

/// One server's process on one node.
pub struct ServerProcess {
    /// The server's directory on the node; holds `server.pid`.
    pub home: String,
    /// A string that the server's command line contains, e.g. its config file's path.
    pub marker: String,
}

/// The environment that runs a process under libfaketime with the control file `clock_file`.
pub fn faketime_env(clock_file: &str) -> String {
    format!(
        "LD_PRELOAD=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 | head -1) FAKETIME_TIMESTAMP_FILE={} FAKETIME_CACHE_DURATION=1 ",
        quote(clock_file)
    )
}

/// Where a server logs and how its process is found, for an agent acting on the node itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFiles {
    /// The server's log file, followed by log triggers.
    pub log: String,
    /// The file holding the server's pid.
    pub pidfile: String,
    /// A string the server's command line contains (a reused pid is never signalled).
    pub marker: String,
}

impl ServerProcess {
    /// This server's files, with `log` (a path relative to the home) as its log.
    pub fn files(&self, log: &str) -> ServerFiles {
        ServerFiles {
            log: format!("{}/{log}", self.home),
            pidfile: format!("{}/server.pid", self.home),
            marker: self.marker.clone(),
        }
    }

    /// A shell test that sets `pid` to the server's pid, or fails when it does not run.
    fn find_pid(&self) -> String {
        format!(
            "pid=$(cat {pidfile} 2>/dev/null) && [ -n \"$pid\" ] && grep -qF {marker} /proc/$pid/cmdline 2>/dev/null",
            pidfile = quote(&format!("{}/server.pid", self.home)),
            marker = quote(&self.marker),
        )
    }

    /// Starts `command` (a shell command line, run in the home directory, output appended to
    /// `log`) detached, unless the server already runs; `env` prefixes it (e.g. faketime).
    pub async fn start(
        &self,
        control: &Control,
        node: &Node,
        env: &str,
        command: &str,
        log: &str,
    ) -> anyhow::Result<()> {
        let cmd = format!(
            "if {running}; then exit 0; fi; cd {h} || exit 1; \
             {env}setsid nohup {command} >> {log} 2>&1 < /dev/null & echo $! > {h}/server.pid",
            running = self.find_pid(),
            h = quote(&self.home),
            log = quote(log),
        );
        control.exec(node, &cmd, Retry::Once).await.map(drop)
    }

    /// Sends `signal` to the server; returns whether one ran to receive it.
    pub async fn signal(
        &self,
        control: &Control,
        node: &Node,
        signal: &str,
    ) -> anyhow::Result<bool> {
        let cmd = format!(
            "if {}; then kill -{signal} $pid && echo signalled; fi",
            self.find_pid()
        );
        Ok(control.exec(node, &cmd, Retry::Idempotent).await? == "signalled")
    }

    /// Whether the server's process exists (paused or not).
    pub async fn is_running(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        let cmd = format!("if {}; then echo yes; fi", self.find_pid());
        Ok(control.exec(node, &cmd, Retry::Idempotent).await? == "yes")
    }

    /// Waits up to 10 s for the server's process to be gone.
    async fn wait_gone(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        let cmd = format!(
            "for i in $(seq 100); do {} || exit 0; sleep 0.1; done; exit 1",
            self.find_pid()
        );
        let out = control
            .run(node, &cmd, Duration::from_secs(20), Retry::Idempotent)
            .await?;
        if out.status != 0 {
            bail!("on {}: the server in {} did not exit", node.name, self.home);
        }
        Ok(())
    }

    /// SIGKILL, then waits until it is gone.
    pub async fn kill(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if self.signal(control, node, "KILL").await? {
            self.wait_gone(control, node).await?;
        }
        Ok(())
    }

    /// SIGCONT, SIGTERM, and SIGKILL if it has not exited within 10 s.
    pub async fn stop(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.signal(control, node, "CONT").await?;
        if self.signal(control, node, "TERM").await? && self.wait_gone(control, node).await.is_err()
        {
            self.kill(control, node).await?;
        }
        Ok(())
    }

    /// SIGSTOP; an error when no server runs.
    pub async fn pause(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        if !self.signal(control, node, "STOP").await? {
            bail!("on {}: no server runs in {} to pause", node.name, self.home);
        }
        Ok(())
    }

    /// Copies `logs` (paths relative to the home) that exist, and a listing of `data`, into `dir`.
    pub async fn collect(
        &self,
        control: &Control,
        node: &Node,
        logs: &[&str],
        data: &str,
        dir: &Path,
    ) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for log in logs {
            let remote = format!("{}/{log}", self.home);
            let probe = format!("test -f {} && echo yes || true", quote(&remote));
            if control.exec(node, &probe, Retry::Idempotent).await? == "yes" {
                let name = Path::new(log)
                    .file_name()
                    .map(|n| n.to_os_string())
                    .unwrap_or_default();
                control.download(node, &remote, &dir.join(name)).await?;
            }
        }
        let list = format!(
            "ls -laR {} 2>&1 || true",
            quote(&format!("{}/{data}", self.home))
        );
        let listing = control.exec(node, &list, Retry::Idempotent).await?;
        std::fs::write(dir.join("data-dir.txt"), listing + "\n")?;
        Ok(())
    }
}
