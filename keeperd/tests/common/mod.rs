//! Test harness: runs the real `keeperd` binary on a free loopback port with
//! its own temporary data directory, and kills it by pid when dropped.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running keeperd process.
pub struct Server {
    child: Option<Child>,
    /// Client port on 127.0.0.1.
    pub port: u16,
    /// Temporary directory holding zoo.cfg, data/ and server.log.
    pub dir: PathBuf,
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Server {
    /// Starts keeperd with `extra` lines appended to a minimal zoo.cfg.
    pub fn start(name: &str, extra: &str) -> Server {
        let dir = std::env::temp_dir().join(format!(
            "keeperd-test-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let port = free_port();
        let cfg = format!(
            "tickTime=200\nclientPort={port}\nclientPortAddress=127.0.0.1\ndataDir={}\n4lw.commands.whitelist=*\nminSessionTimeout=1000\nmaxSessionTimeout=30000\n{extra}\n",
            dir.join("data").display()
        );
        std::fs::write(dir.join("zoo.cfg"), cfg).unwrap();
        let mut s = Server {
            child: None,
            port,
            dir,
        };
        s.spawn();
        s
    }

    /// Starts the process again on the same port and data.
    pub fn spawn(&mut self) {
        self.child = Some(spawn_keeperd(&self.dir));
        let start = Instant::now();
        while self.four("ruok") != "imok" {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("keeperd exited with {status}: {}", self.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "keeperd did not come up: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// "127.0.0.1:port".
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The server's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Sends a four-letter word and returns the reply ("" if none).
    pub fn four(&self, word: &str) -> String {
        four(self.port, word)
    }

    /// Sends SIGKILL to the process and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Runs keeperd on this server's config and waits for it to exit (for startup failures).
    pub fn run_to_exit(&self) -> (i32, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_keeperd"))
            .arg(self.dir.join("zoo.cfg"))
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs keeperd on `dir/zoo.cfg`, its stderr appended to `dir/server.log`.
pub fn spawn_keeperd(dir: &std::path::Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    Command::new(env!("CARGO_BIN_EXE_keeperd"))
        .arg(dir.join("zoo.cfg"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn keeperd")
}

/// Sends a four-letter word to a port on 127.0.0.1 and returns the reply ("" if none).
pub fn four(port: u16, word: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(word.as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// Value of `key` in mntr output.
pub fn mntr_value(mntr: &str, key: &str) -> Option<String> {
    mntr.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix('\t'))
            .map(str::to_string)
    })
}
pub mod ensemble;

/// What a client test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One standalone server.
    Standalone,
    /// A 3-server ensemble, reached through a follower.
    Ensemble,
}

impl Kind {
    /// The mode the server clients talk to reports.
    pub fn mode(self) -> &'static str {
        match self {
            Kind::Standalone => "standalone",
            Kind::Ensemble => "follower",
        }
    }
}

/// A standalone server, or an ensemble with the member clients talk to.
pub enum Deployment {
    /// One server.
    Single(Server),
    /// An ensemble and the id of the follower clients use.
    Ensemble(ensemble::Ensemble, usize),
}

impl Deployment {
    /// Starts one of `kind` with `extra` config lines.
    pub fn start(kind: Kind, name: &str, extra: &str) -> Deployment {
        match kind {
            Kind::Standalone => Deployment::Single(Server::start(name, extra)),
            Kind::Ensemble => {
                let e = ensemble::Ensemble::start(name, 3, 0, extra);
                let leader = e.wait_serving(Duration::from_secs(20));
                let follower = (1..=3).find(|i| *i != leader).unwrap();
                Deployment::Ensemble(e, follower)
            }
        }
    }

    /// The client port clients use.
    pub fn port(&self) -> u16 {
        match self {
            Deployment::Single(s) => s.port,
            Deployment::Ensemble(e, m) => e.member(*m).port,
        }
    }

    /// "127.0.0.1:port" of the server clients use.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port())
    }

    /// A four-letter word's answer from the server clients use.
    pub fn four(&self, word: &str) -> String {
        four(self.port(), word)
    }

    /// kill -9 of the server clients use, and a restart on the same data.
    pub fn restart(&mut self) {
        match self {
            Deployment::Single(s) => {
                s.kill9();
                s.spawn();
            }
            Deployment::Ensemble(e, m) => {
                e.kill9(*m);
                e.spawn(*m);
                e.wait_serving(Duration::from_secs(20));
            }
        }
    }
}
