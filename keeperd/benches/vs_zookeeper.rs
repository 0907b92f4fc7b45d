//! keeperd against Apache ZooKeeper standalone (Debian's package) on this
//! machine: the same client (zookeeper-client), the same load. Throughput of
//! create, setData and getData with 1, 10 and 100 concurrent sessions,
//! p50/p99 latency, and the resident memory of both servers.
//!
//! Run: `cargo bench -p keeperd --bench vs_zookeeper [-- --seconds 3] [--op create] [--only keeperd]`
//! Both servers listen on 127.0.0.1 ports picked free; both fsync their log.
//!
//! Within a cell both servers have their sessions open at once and take
//! turns: after a 1 s warm-up each, the measured seconds are run as slices
//! of about half a second, alternating between the servers, so that on a
//! shared machine both see the same background load.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use zookeeper_client::{Acls, Client, CreateMode};

const ZK_JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "netty-handler.jar",
    "netty-transport.jar",
    "netty-buffer.jar",
    "netty-common.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
    "metrics-core.jar",
    "commons-cli.jar",
    "snappy-java.jar",
];

const SESSIONS: &[usize] = &[1, 10, 100];
/// Length of one measured turn of a server within a cell.
const SLICE: Duration = Duration::from_millis(500);
/// Unmeasured load each server runs before its first turn.
const WARM_UP: Duration = Duration::from_secs(1);
const OPS: &[&str] = &["create", "setData", "getData"];
const DATA: &[u8] = &[b'x'; 100];

struct ServerProcess {
    name: &'static str,
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn four(port: u16, word: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(word.as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn start(name: &'static str) -> ServerProcess {
    let dir = std::env::temp_dir().join(format!("keeperd-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "tickTime=2000\nclientPort={port}\nclientPortAddress=127.0.0.1\ndataDir={}\n4lw.commands.whitelist=*\nadmin.enableServer=false\nmaxClientCnxns=0\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    let mut cmd = if name == "keeperd" {
        let mut c = Command::new(env!("CARGO_BIN_EXE_keeperd"));
        c.env("RUST_LOG", "warn").arg(&cfg);
        c
    } else {
        let cp: Vec<String> = ZK_JARS
            .iter()
            .map(|j| format!("/usr/share/java/{j}"))
            .collect();
        for j in &cp {
            assert!(
                Path::new(j).exists(),
                "{j} missing: apt-get install -y zookeeper"
            );
        }
        let mut c = Command::new("java");
        c.arg("-cp")
            .arg(cp.join(":"))
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(&cfg);
        c
    };
    let child = cmd
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start server");
    let server = ServerProcess {
        name,
        child,
        port,
        dir,
    };
    let t = Instant::now();
    while four(port, "ruok") != "imok" {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{name} did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |k: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct CellResult {
    ops: usize,
    secs: f64,
    p50: Duration,
    p99: Duration,
}

/// A turn of load: run until `end`, keeping latencies if `measured`.
#[derive(Clone, Copy)]
struct Turn {
    end: Instant,
    measured: bool,
}

/// One session: connects, creates its node, then runs the op in every turn
/// it is given and reports the latencies of the ops it started in the turn.
async fn session(
    addr: String,
    op: &'static str,
    node: String,
    mut turns: watch::Receiver<Option<Turn>>,
    done: mpsc::UnboundedSender<Vec<Duration>>,
) {
    let c = Client::connector()
        .with_session_timeout(Duration::from_secs(20))
        .connect(&addr)
        .await
        .expect("connect");
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    c.create(&node, DATA, &opts).await.expect("setup node");
    let _ = done.send(Vec::new());
    let mut k = 0u64;
    while turns.changed().await.is_ok() {
        let Some(turn) = *turns.borrow_and_update() else {
            break;
        };
        let mut lat = Vec::with_capacity(1 << 14);
        loop {
            let t = Instant::now();
            if t >= turn.end {
                break;
            }
            match op {
                "create" => {
                    c.create(&format!("{node}/c{k}"), DATA, &opts)
                        .await
                        .expect("create");
                }
                "setData" => {
                    c.set_data(&node, DATA, None).await.expect("setData");
                }
                _ => {
                    c.get_data(&node).await.expect("getData");
                }
            }
            k += 1;
            if turn.measured {
                lat.push(t.elapsed());
            }
        }
        let _ = done.send(lat);
    }
}

/// One server's sessions in a cell.
struct Load {
    turns: watch::Sender<Option<Turn>>,
    done: mpsc::UnboundedReceiver<Vec<Duration>>,
    sessions: usize,
    latencies: Vec<Duration>,
    measured: Duration,
}

impl Load {
    async fn start(port: u16, op: &'static str, sessions: usize) -> Load {
        let addr = format!("127.0.0.1:{port}");
        let dir = format!("/bench-{op}-{sessions}");
        let setup = Client::connect(&addr).await.unwrap();
        setup
            .create(
                &dir,
                b"",
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            )
            .await
            .unwrap();
        let (turns, rx) = watch::channel(None);
        let (tx, mut done) = mpsc::unbounded_channel();
        for i in 0..sessions {
            let node = format!("{dir}/s{i}");
            tokio::spawn(session(addr.clone(), op, node, rx.clone(), tx.clone()));
        }
        for _ in 0..sessions {
            done.recv().await.expect("a session failed to start");
        }
        Load {
            turns,
            done,
            sessions,
            latencies: Vec::new(),
            measured: Duration::ZERO,
        }
    }

    /// Runs every session for `len`, keeping the latencies if `measured`.
    async fn turn(&mut self, len: Duration, measured: bool) {
        let end = Instant::now() + len;
        self.turns.send_replace(Some(Turn { end, measured }));
        for _ in 0..self.sessions {
            let lat = self.done.recv().await.expect("a session failed");
            self.latencies.extend(lat);
        }
        if measured {
            self.measured += len;
        }
    }

    fn result(mut self) -> CellResult {
        self.turns.send_replace(None);
        let all = &mut self.latencies;
        all.sort_unstable();
        let pct = |p: f64| {
            all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
                .copied()
                .unwrap_or_default()
        };
        CellResult {
            ops: all.len(),
            secs: self.measured.as_secs_f64(),
            p50: pct(0.50),
            p99: pct(0.99),
        }
    }
}

/// One cell: every server's sessions open at once, then turns in alternation.
async fn cell(ports: &[u16], op: &'static str, sessions: usize, secs: f64) -> Vec<CellResult> {
    let mut loads = Vec::new();
    for &port in ports {
        loads.push(Load::start(port, op, sessions).await);
    }
    for load in &mut loads {
        load.turn(WARM_UP, false).await;
    }
    let turns = (secs / SLICE.as_secs_f64()).ceil().max(1.0);
    let len = Duration::from_secs_f64(secs / turns);
    for _ in 0..turns as usize {
        for load in &mut loads {
            load.turn(len, true).await;
        }
    }
    loads.into_iter().map(Load::result).collect()
}

fn main() {
    let mut secs = 3.0;
    let mut servers = vec!["keeperd", "zookeeper"];
    let mut ops = OPS.to_vec();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                secs = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seconds takes a number")
            }
            "--op" => {
                let op = args.next().expect("--op takes create, setData or getData");
                ops.retain(|o| *o == op);
                assert!(!ops.is_empty(), "--op takes create, setData or getData");
            }
            "--only" => {
                let only = args.next().expect("--only takes keeperd or zookeeper");
                servers.retain(|s| *s == only);
                assert!(!servers.is_empty(), "--only takes keeperd or zookeeper");
            }
            _ => {}
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut rows = Vec::new();
    let mut memory = Vec::new();
    // Both servers run side by side and take turns within each cell, so
    // both see the same background load on this shared machine.
    let running: Vec<ServerProcess> = servers.iter().map(|name| start(name)).collect();
    let ports: Vec<u16> = running.iter().map(|s| s.port).collect();
    for &op in &ops {
        for &n in SESSIONS {
            let results = runtime.block_on(cell(&ports, op, n, secs));
            for (server, r) in running.iter().zip(results) {
                eprintln!(
                    "{:9} {:8} {:3} sessions: {:8.0} ops/s  p50 {:7.3} ms  p99 {:7.3} ms",
                    server.name,
                    op,
                    n,
                    r.ops as f64 / r.secs,
                    r.p50.as_secs_f64() * 1e3,
                    r.p99.as_secs_f64() * 1e3
                );
                rows.push((server.name, op, n, r));
            }
        }
    }
    for server in &running {
        let nodes = four(server.port, "srvr")
            .lines()
            .find(|l| l.starts_with("Node count"))
            .unwrap_or("")
            .to_string();
        memory.push((server.name, rss_kib(server.child.id()), nodes));
    }
    if servers.len() < 2 {
        return;
    }
    println!("| op | sessions | keeperd ops/s | ZooKeeper ops/s | keeperd p50 / p99 ms | ZooKeeper p50 / p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    for &op in &ops {
        for &n in SESSIONS {
            let find = |s: &str| {
                rows.iter()
                    .find(|r| r.0 == s && r.1 == op && r.2 == n)
                    .map(|r| &r.3)
                    .unwrap()
            };
            let (k, z) = (find("keeperd"), find("zookeeper"));
            println!(
                "| {op} | {n} | {:.0} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} |",
                k.ops as f64 / k.secs,
                z.ops as f64 / z.secs,
                k.p50.as_secs_f64() * 1e3,
                k.p99.as_secs_f64() * 1e3,
                z.p50.as_secs_f64() * 1e3,
                z.p99.as_secs_f64() * 1e3
            );
        }
    }
    println!();
    for (name, (rss, hwm), nodes) in memory {
        println!(
            "{name}: resident {} MiB (peak {} MiB), {nodes}",
            rss / 1024,
            hwm / 1024
        );
    }
}
