//! A real ZooKeeper standalone server on loopback for tests, from Debian's `zookeeper`
//! package: started on a free port in a temporary directory, killed by pid when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::NodeEndpoint;
use crate::nemesis::Nemesis;

/// The jars a standalone server needs (the netty and log4j ones are not).
const CLASSPATH: &[&str] = &[
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/zookeeper-jute.jar",
    "/usr/share/java/slf4j-api.jar",
    "/usr/share/java/slf4j-nop.jar",
];
const MAIN_CLASS: &str = "org.apache.zookeeper.server.ZooKeeperServerMain";

/// A running (or killed) ZooKeeper server with its data directory.
pub struct ZkServer {
    dir: tempfile::TempDir,
    port: u16,
    child: Option<Child>,
}

impl ZkServer {
    /// Starts a server on a free loopback port and waits until it serves clients.
    pub fn start() -> ZkServer {
        for jar in CLASSPATH {
            assert!(
                Path::new(jar).exists(),
                "{jar} is missing: install Debian's zookeeper package"
            );
        }
        // The free port is only free when looked at: another test's server or connection may
        // take it before this JVM binds it, and the server exits. A fresh port then.
        let mut exited = String::new();
        for _ in 0..3 {
            let mut server = ZkServer::configured();
            match server.launch() {
                Ok(()) => return server,
                Err(why) => exited = why,
            }
        }
        panic!("ZooKeeper exited three times on fresh ports: {exited}");
    }

    /// A server configured on a port free now, in a temporary directory, not started.
    fn configured() -> ZkServer {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("data directory");
        // forceSync=no: the log is written but not fsynced. The tests kill the process, never
        // the machine, so written data survives in the page cache, and a disk busy writing
        // back a build cannot stall every write for seconds.
        let cfg = format!(
            "tickTime=500\ndataDir={}\nclientPort={port}\nclientPortAddress=127.0.0.1\n\
             4lw.commands.whitelist=*\nadmin.enableServer=false\nforceSync=no\n",
            data.display()
        );
        std::fs::write(dir.path().join("zoo.cfg"), cfg).expect("zoo.cfg");
        ZkServer {
            dir,
            port,
            child: None,
        }
    }

    /// The server as a node endpoint named `zk`.
    pub fn endpoint(&self) -> NodeEndpoint {
        NodeEndpoint {
            name: "zk".into(),
            host: "127.0.0.1".into(),
            port: self.port,
        }
    }

    /// Kills the server (SIGKILL by pid) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and data directory (a no-op when running).
    pub fn restart(&mut self) {
        if let Err(why) = self.launch() {
            panic!("{why}");
        }
    }

    /// Starts the server unless it runs and waits until it serves; says why when it exited
    /// first.
    fn launch(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        let log = std::fs::File::create(self.dir.path().join("server.log")).expect("server log");
        let child = Command::new("java")
            .arg("-cp")
            .arg(CLASSPATH.join(":"))
            .arg(MAIN_CLASS)
            .arg(self.dir.path().join("zoo.cfg"))
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("server log"))
            .stderr(log)
            .spawn()
            .expect("starting java (install Debian's zookeeper package)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.is_serving() {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                let log =
                    std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
                return Err(format!(
                    "ZooKeeper on port {} exited with {status}: {log}",
                    self.port
                ));
            }
            assert!(
                Instant::now() < deadline,
                "ZooKeeper did not serve on port {} within 20 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Whether `srvr` reports a mode: `ruok` answers before the server takes sessions.
    fn is_serving(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
        let mut answer = String::new();
        conn.write_all(b"srvr").is_ok()
            && conn.read_to_string(&mut answer).is_ok()
            && answer.contains("Mode: standalone")
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A nemesis that kills the server (SIGKILL) on start and starts it again on stop.
pub struct KillServer(pub Arc<Mutex<ZkServer>>);

#[async_trait::async_trait]
impl Nemesis for KillServer {
    fn kind(&self) -> &str {
        "kill"
    }
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let server = self.0.clone();
        tokio::task::spawn_blocking(move || server.lock().unwrap().kill()).await?;
        Ok(serde_json::json!("killed"))
    }
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let server = self.0.clone();
        tokio::task::spawn_blocking(move || server.lock().unwrap().restart()).await?;
        Ok(serde_json::json!("restarted"))
    }
}
