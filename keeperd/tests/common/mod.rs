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
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_keeperd"))
            .arg(self.dir.join("zoo.cfg"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn keeperd");
        self.child = Some(child);
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
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return String::new();
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.write_all(word.as_bytes());
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
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

/// Value of `key` in mntr output.
pub fn mntr_value(mntr: &str, key: &str) -> Option<String> {
    mntr.lines().find_map(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix('\t'))
            .map(str::to_string)
    })
}
