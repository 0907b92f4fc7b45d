//! A database server process on a node, found by the pid file in its home directory and
//! checked against its configuration file's path in its command line (so a reused pid is never
//! signalled), and started detached under `setsid`, optionally under libfaketime. The `Db`
//! trait's default `start`, `stop`, `kill`, `pause`, `resume`, `is_running`, `is_set_up`,
//! `server_files` and `collect_logs` act through it.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};

/// One server's process on one node: where it lives, how it starts, where it logs.
pub struct ServerProcess {
    /// The server's directory on the node; holds `server.pid`.
    pub home: String,
    /// The server's configuration file: the node is set up while it exists, and the server's
    /// command line names it (the marker that tells the server from a process reusing its pid).
    pub config: String,
    /// The shell command line that starts the server, run in the home directory.
    pub command: String,
    /// The server's own log, relative to the home: log triggers follow it.
    pub log: String,
    /// The file the server's standard output and error are appended to, relative to the home
    /// (the same as `log` for a server that logs there).
    pub output: String,
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
    /// This server's files, for an agent acting on the node itself.
    pub fn files(&self) -> ServerFiles {
        ServerFiles {
            log: format!("{}/{}", self.home, self.log),
            pidfile: format!("{}/server.pid", self.home),
            marker: self.config.clone(),
        }
    }

    /// A shell test that sets `pid` to the server's pid, or fails when it does not run.
    fn find_pid(&self) -> String {
        format!(
            "pid=$(cat {pidfile} 2>/dev/null) && [ -n \"$pid\" ] && grep -qF {marker} /proc/$pid/cmdline 2>/dev/null",
            pidfile = quote(&format!("{}/server.pid", self.home)),
            marker = quote(&self.config),
        )
    }

    /// The shell command that starts the server's command detached in the home, its output
    /// appended to `output`, unless it already runs; `env` prefixes it.
    fn start_line(&self, env: &str) -> String {
        format!(
            "if {running}; then exit 0; fi; cd {h} || exit 1; \
             {env}setsid nohup {command} >> {log} 2>&1 < /dev/null & echo $! > {h}/server.pid",
            running = self.find_pid(),
            h = quote(&self.home),
            command = self.command,
            log = quote(&format!("{}/{}", self.home, self.output)),
        )
    }

    /// Starts the server detached unless it already runs; `env` prefixes its command (e.g.
    /// faketime).
    pub async fn start(&self, control: &Control, node: &Node, env: &str) -> anyhow::Result<()> {
        let cmd = self.start_line(env);
        control.exec(node, &cmd, Retry::Once).await.map(drop)
    }

    /// Sends `signal` to the server; returns whether one ran to receive it.
    async fn signal(&self, control: &Control, node: &Node, signal: &str) -> anyhow::Result<bool> {
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

    /// SIGCONT (no-op when it is not paused or does not run).
    pub async fn resume(&self, control: &Control, node: &Node) -> anyhow::Result<()> {
        self.signal(control, node, "CONT").await.map(drop)
    }

    /// A shell command that says `yes` when the server's configuration file exists.
    fn set_up_probe(&self) -> String {
        format!("test -f {} && echo yes || true", quote(&self.config))
    }

    /// Whether the server's configuration file exists.
    pub async fn is_set_up(&self, control: &Control, node: &Node) -> anyhow::Result<bool> {
        let probe = self.set_up_probe();
        Ok(control.exec(node, &probe, Retry::Idempotent).await? == "yes")
    }

    /// Copies the server's log and output that exist, and a listing of `data` (its data
    /// directory), into `dir`.
    pub async fn collect(
        &self,
        control: &Control,
        node: &Node,
        data: &str,
        dir: &Path,
    ) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut logs = vec![&self.log];
        if self.output != self.log {
            logs.push(&self.output);
        }
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
        let list = format!("ls -laR {} 2>&1 || true", quote(data));
        let listing = control.exec(node, &list, Retry::Idempotent).await?;
        std::fs::write(dir.join("data-dir.txt"), listing + "\n")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::db::keeperd::{Keeperd, KeeperdConfig};
    use crate::db::zookeeper::{ZkConfig, ZooKeeper};
    use crate::db::Db;

    /// The shell commands each database's server is started and probed with, to the byte.
    #[test]
    fn each_database_starts_and_finds_its_server_with_its_own_command() {
        let nodes = crate::control::test_nodes(1);
        let node = &nodes[0];
        let zk = ZooKeeper::new(ZkConfig::default(), nodes.clone());
        let keeperd = Keeperd::new(KeeperdConfig::default(), &nodes).unwrap();
        let z = "/var/lib/stampede/db/10.0.0.1";
        let k = "/var/lib/stampede/keeperd/10.0.0.1";
        let java = format!(
            "java -Xmx256m -Dzookeeper.DigestAuthenticationProvider.superDigest=stampede:eDe4kmqjwu6mF9gxDXhYED3R44s= \
             -Dzookeeper.log.dir={z}/logs -Dlog4j.configuration=file:{z}/conf/log4j.properties \
             -cp {z}/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar \
             org.apache.zookeeper.server.quorum.QuorumPeerMain {z}/conf/zoo.cfg"
        );
        let cases: [(&dyn Db, &str, &str, String, &str, &str); 2] = [
            (
                &zk,
                z,
                "conf/zoo.cfg",
                java,
                "logs/stdout.log",
                "logs/zookeeper.log",
            ),
            (
                &keeperd,
                k,
                "keeperd.cfg",
                format!("{k}/keeperd {k}/keeperd.cfg"),
                "keeperd.log",
                "keeperd.log",
            ),
        ];
        for (db, h, config, command, output, log) in cases {
            let process = db.process(node);
            let running = format!(
                "pid=$(cat {h}/server.pid 2>/dev/null) && [ -n \"$pid\" ] && grep -qF {h}/{config} /proc/$pid/cmdline 2>/dev/null"
            );
            assert_eq!(
                process.start_line("ENV=1 "),
                format!(
                    "if {running}; then exit 0; fi; cd {h} || exit 1; ENV=1 setsid nohup {command} \
                     >> {h}/{output} 2>&1 < /dev/null & echo $! > {h}/server.pid"
                ),
                "{}",
                db.name()
            );
            let probe = format!("test -f {h}/{config} && echo yes || true");
            assert_eq!(process.set_up_probe(), probe, "{}", db.name());
            let files = db.server_files(node).unwrap();
            assert_eq!(files.log, format!("{h}/{log}"));
            assert_eq!(files.pidfile, format!("{h}/server.pid"));
            assert_eq!(files.marker, format!("{h}/{config}"));
        }
    }
}
