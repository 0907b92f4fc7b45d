//! Test harness for ensembles: real `keeperd` processes on loopback, each
//! with its own data directory and `myid`, their server-to-server traffic
//! (quorum and election ports) passing through small TCP relays the test
//! can cut, so a partition stalls the traffic as a dropping firewall would
//! (connections hang; nothing is refused). Processes are killed by pid.

use super::{four, free_port, mntr_value, spawn_keeperd};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::AtomicU16;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A port nothing listens on, below the range the kernel hands out for
/// port 0 (where the relays and clients get theirs), so a server's port is
/// not taken by a relay between choosing it and binding it.
fn server_port() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let _ = NEXT.compare_exchange(
        0,
        20000 + (std::process::id() % 500) as u16 * 20,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    loop {
        let p = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = 20000 + (p - 20000) % 12000;
        if TcpListener::bind(("127.0.0.1", p)).is_ok() && TcpListener::bind(("0.0.0.0", p)).is_ok()
        {
            return p;
        }
    }
}

/// The tick every ensemble test runs with (ms).
pub const TICK_MS: u64 = 200;

/// One member's process and files.
pub struct Member {
    child: Option<Child>,
    /// Server id (1-based).
    pub id: usize,
    /// Client port on 127.0.0.1.
    pub port: u16,
    /// Directory of zoo.cfg, data/ and server.log.
    pub dir: PathBuf,
}

/// Links that are cut: (from, to) server ids.
type Cuts = Arc<Mutex<Vec<(usize, usize)>>>;

/// A running ensemble; dropping it kills every member and removes the files.
pub struct Ensemble {
    /// Members by id - 1.
    pub members: Vec<Member>,
    cuts: Cuts,
    stop: Arc<AtomicBool>,
}

impl Ensemble {
    /// Starts `voters` voting members and `observers` observers with
    /// `extra` config lines, and waits until they serve with one leader.
    pub fn start(name: &str, voters: usize, observers: usize, extra: &str) -> Ensemble {
        let n = voters + observers;
        let root = std::env::temp_dir().join(format!(
            "keeperd-ens-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let _ = std::fs::remove_dir_all(&root);
        let real: Vec<(u16, u16)> = (0..n).map(|_| (server_port(), server_port())).collect();
        let cuts: Cuts = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut members = Vec::new();
        for i in 1..=n {
            let dir = root.join(format!("s{i}"));
            std::fs::create_dir_all(dir.join("data")).unwrap();
            std::fs::write(dir.join("data/myid"), format!("{i}\n")).unwrap();
            let port = server_port();
            let mut servers = String::new();
            for j in 1..=n {
                let (q, e) = if i == j {
                    real[j - 1]
                } else {
                    // i reaches j through relays the test can cut.
                    (
                        relay(i, j, real[j - 1].0, &cuts, &stop),
                        relay(i, j, real[j - 1].1, &cuts, &stop),
                    )
                };
                let kind = if j > voters { ":observer" } else { "" };
                servers.push_str(&format!("server.{j}=127.0.0.1:{q}:{e}{kind}\n"));
            }
            let cfg = format!(
                "tickTime={TICK_MS}\ninitLimit=10\nsyncLimit=5\nclientPort={port}\nclientPortAddress=127.0.0.1\ndataDir={}\n4lw.commands.whitelist=*\nminSessionTimeout=1000\nmaxSessionTimeout=30000\n{servers}{extra}\n",
                dir.join("data").display()
            );
            std::fs::write(dir.join("zoo.cfg"), cfg).unwrap();
            members.push(Member {
                child: None,
                id: i,
                port,
                dir,
            });
        }
        let mut e = Ensemble {
            members,
            cuts,
            stop,
        };
        for i in 1..=n {
            e.spawn(i);
        }
        e.wait_serving(Duration::from_secs(20));
        e
    }

    /// Member `id`.
    pub fn member(&self, id: usize) -> &Member {
        &self.members[id - 1]
    }

    /// "127.0.0.1:port" of member `id`.
    pub fn addr(&self, id: usize) -> String {
        format!("127.0.0.1:{}", self.member(id).port)
    }

    /// Every member's client address, comma-separated (a connect string).
    pub fn connect_string(&self) -> String {
        let all: Vec<String> = (1..=self.members.len()).map(|i| self.addr(i)).collect();
        all.join(",")
    }

    /// Starts member `id`'s process (again).
    pub fn spawn(&mut self, id: usize) {
        let m = &mut self.members[id - 1];
        m.child = Some(spawn_keeperd(&m.dir));
    }

    /// kill -9 of member `id`.
    pub fn kill9(&mut self, id: usize) {
        if let Some(mut c) = self.members[id - 1].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Cuts (or with `cut` false, heals) the links both ways between `a` and `b`.
    pub fn cut(&self, a: usize, b: usize, cut: bool) {
        let mut cuts = self.cuts.lock().unwrap();
        cuts.retain(|l| *l != (a, b) && *l != (b, a));
        if cut {
            cuts.push((a, b));
            cuts.push((b, a));
        }
    }

    /// Cuts `id` off from every other member.
    pub fn isolate(&self, id: usize) {
        for other in 1..=self.members.len() {
            if other != id {
                self.cut(id, other, true);
            }
        }
    }

    /// Heals every cut link.
    pub fn heal(&self) {
        self.cuts.lock().unwrap().clear();
    }

    /// A four-letter word's answer from member `id` ("" if it does not answer).
    pub fn four(&self, id: usize, word: &str) -> String {
        four(self.member(id).port, word)
    }

    /// The mode member `id` reports in `srvr`, if it serves.
    pub fn mode(&self, id: usize) -> Option<String> {
        let srvr = self.four(id, "srvr");
        srvr.lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(str::to_string)
    }

    /// Members reporting themselves leader.
    pub fn leaders(&self) -> Vec<usize> {
        (1..=self.members.len())
            .filter(|i| self.mode(*i).as_deref() == Some("leader"))
            .collect()
    }

    /// Waits until every running member serves and exactly one leads; returns the leader.
    pub fn wait_serving(&self, limit: Duration) -> usize {
        let start = Instant::now();
        loop {
            let running: Vec<usize> = self
                .members
                .iter()
                .filter(|m| m.child.is_some())
                .map(|m| m.id)
                .collect();
            let modes: Vec<Option<String>> = running.iter().map(|i| self.mode(*i)).collect();
            let leaders: Vec<usize> = running
                .iter()
                .zip(&modes)
                .filter(|(_, m)| m.as_deref() == Some("leader"))
                .map(|(i, _)| *i)
                .collect();
            if leaders.len() == 1 && modes.iter().all(Option::is_some) {
                return leaders[0];
            }
            assert!(
                start.elapsed() < limit,
                "no ensemble within {limit:?}: modes {modes:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until one of `ids` leads and serves; returns it.
    pub fn wait_leader_among(&self, ids: &[usize], limit: Duration) -> usize {
        let start = Instant::now();
        loop {
            if let Some(l) = ids
                .iter()
                .find(|i| self.mode(**i).as_deref() == Some("leader"))
            {
                return *l;
            }
            assert!(
                start.elapsed() < limit,
                "none of {ids:?} leads within {limit:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A value of member `id`'s `mntr`.
    pub fn mntr(&self, id: usize, key: &str) -> Option<String> {
        mntr_value(&self.four(id, "mntr"), key)
    }

    /// Member `id`'s log.
    pub fn log(&self, id: usize) -> String {
        std::fs::read_to_string(self.member(id).dir.join("server.log")).unwrap_or_default()
    }

    /// Every member's log, for failure messages.
    pub fn logs(&self) -> String {
        (1..=self.members.len())
            .map(|i| format!("---- server {i} ----\n{}", tail(&self.log(i), 40)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for i in 1..=self.members.len() {
            self.kill9(i);
        }
        if let Some(root) = self.members.first().and_then(|m| m.dir.parent()) {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A relay from server `from` to server `to`'s port `target`; returns its port.
fn relay(from: usize, to: usize, target: u16, cuts: &Cuts, stop: &Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (cuts, stop) = (cuts.clone(), stop.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let Ok(inbound) = stream else { continue };
            let (cuts, stop) = (cuts.clone(), stop.clone());
            std::thread::spawn(move || {
                let is_cut = || cuts.lock().unwrap().contains(&(from, to));
                // A new connection across a cut waits, like a dropped SYN.
                while is_cut() {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                // A server not listening yet: try again for a while, as TCP retries a SYN.
                let mut tries = 0;
                let outbound = loop {
                    match TcpStream::connect(("127.0.0.1", target)) {
                        Ok(s) => break s,
                        Err(_) if tries < 60 && !stop.load(Ordering::Relaxed) => {
                            tries += 1;
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        Err(_) => return,
                    }
                };
                let pairs = [
                    (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                    (outbound, inbound),
                ];
                for (mut src, mut dst) in pairs {
                    let (cuts, stop) = (cuts.clone(), stop.clone());
                    std::thread::spawn(move || {
                        let _ = src.set_read_timeout(Some(Duration::from_millis(20)));
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                            // Across a cut nothing moves; the bytes wait in the socket.
                            if cuts.lock().unwrap().contains(&(from, to))
                                || cuts.lock().unwrap().contains(&(to, from))
                            {
                                std::thread::sleep(Duration::from_millis(20));
                                continue;
                            }
                            match src.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) => {
                                    if dst.write_all(&buf[..n]).is_err() {
                                        break;
                                    }
                                }
                                Err(e)
                                    if e.kind() == std::io::ErrorKind::WouldBlock
                                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                                Err(_) => break,
                            }
                        }
                        let _ = src.shutdown(std::net::Shutdown::Both);
                        let _ = dst.shutdown(std::net::Shutdown::Both);
                    });
                }
            });
        }
    });
    port
}
