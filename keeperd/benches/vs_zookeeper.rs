//! keeperd against Apache ZooKeeper (Debian's package) on this machine,
//! standalone or as ensembles of N servers: the same client
//! (zookeeper-client), the same load. Throughput of create, setData and
//! getData with 1, 10 and 100 concurrent sessions (spread over the servers
//! of an ensemble), p50/p99 latency, the resident memory of every server,
//! and for ensembles the failover time: the leader killed (kill -9) until
//! the first write is acknowledged by the others.
//!
//! Run: `cargo bench -p keeperd --bench vs_zookeeper [-- --servers 3] [--seconds 3]
//! [--op create] [--only keeperd] [--failovers 3] [--keep] [--lazyfs STAMPEDE]`
//! `--lazyfs` runs each database a second time with its data directories on
//! stampede's lose-unfsynced FUSE layer (`STAMPEDE agent-lazyfs`, as root),
//! all four taking turns, and prints the layer's overhead.
//! Every server listens on 127.0.0.1 ports picked free; all fsync their log.
//! `--keep` leaves the servers' folders (data, zoo.cfg, server.log) in the
//! temp dir, with keeperd logging at info level (elections, syncs, timings).
//!
//! Within a cell both databases have their sessions open at once and take
//! turns: after a 1 s warm-up each, the measured seconds are run as slices
//! of about half a second, alternating between them, so that on a shared
//! machine both see the same background load.

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
/// `--keep`: leave the servers' folders, keeperd logging at info level.
static KEEP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn keep() -> bool {
    KEEP.load(std::sync::atomic::Ordering::Relaxed)
}

struct ServerProcess {
    name: &'static str,
    child: Option<Child>,
    /// The lazyfs agent serving the data directory, if it is on the layer.
    layer: Option<Child>,
    port: u16,
    dir: PathBuf,
    cfg: PathBuf,
}

impl ServerProcess {
    /// kill -9 of the server.
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server (again) on its config and data.
    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("server.log"))
            .unwrap();
        let mut cmd = if self.name.starts_with("keeperd") {
            let mut c = Command::new(env!("CARGO_BIN_EXE_keeperd"));
            c.env("RUST_LOG", if keep() { "info" } else { "warn" })
                .arg(&self.cfg);
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
                .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
                .arg(&self.cfg);
            c
        };
        let child = cmd
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start server");
        self.child = Some(child);
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, |c| c.id())
    }

    /// The mode `srvr` reports, if the server serves.
    fn mode(&self) -> Option<String> {
        four(self.port, "srvr")
            .lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(str::to_string)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
        if let Some(mut agent) = self.layer.take() {
            // SAFETY: a signal to our own child; no memory is involved. On SIGTERM the
            // agent unmounts its layer and exits.
            unsafe { libc::kill(agent.id() as i32, libc::SIGTERM) };
            let _ = agent.wait();
        }
        if !keep() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
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

/// Starts `name` (keeperd or zookeeper) on `n` servers: standalone for
/// one, else an ensemble (server.N lines, myid), and waits until they serve.
/// Mounts stampede's lazyfs layer (`stampede` is its binary) over `data`, its files in
/// `data.lazyfs`; returns the agent once the layer answers.
fn mount_layer(stampede: &Path, data: &Path) -> Child {
    let backing = data.with_extension("lazyfs");
    let port = data.with_extension("lazyfs.port");
    std::fs::create_dir_all(&backing).unwrap();
    let agent = Command::new(stampede)
        .arg("agent-lazyfs")
        .arg("--backing")
        .arg(&backing)
        .arg("--mount")
        .arg(data)
        .arg("--port-file")
        .arg(&port)
        .stdout(Stdio::null())
        .spawn()
        .expect("start the lazyfs agent");
    let t = Instant::now();
    while !port.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the layer did not mount"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    agent
}

fn start(name: &'static str, n: usize, layer: Option<&Path>) -> Vec<ServerProcess> {
    let root = std::env::temp_dir().join(format!(
        "keeperd-bench-{}-{}",
        name.replace('+', "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    let peers: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
    let mut servers = String::new();
    if n > 1 {
        for (i, (q, e)) in peers.iter().enumerate() {
            servers.push_str(&format!("server.{}=127.0.0.1:{q}:{e}\n", i + 1));
        }
    }
    let mut running = Vec::new();
    for i in 1..=n {
        let dir = root.join(format!("s{i}"));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let agent = layer.map(|stampede| mount_layer(stampede, &dir.join("data")));
        std::fs::write(dir.join("data/myid"), format!("{i}\n")).unwrap();
        let port = free_port();
        let cfg = dir.join("zoo.cfg");
        std::fs::write(
            &cfg,
            format!(
                "tickTime=2000\ninitLimit=10\nsyncLimit=5\nclientPort={port}\nclientPortAddress=127.0.0.1\ndataDir={}\n4lw.commands.whitelist=*\nadmin.enableServer=false\nmaxClientCnxns=0\n{servers}",
                dir.join("data").display()
            ),
        )
        .unwrap();
        let mut server = ServerProcess {
            name,
            child: None,
            layer: agent,
            port,
            dir,
            cfg,
        };
        server.spawn();
        running.push(server);
    }
    wait_serving(&running);
    running
}

/// Waits until every running server serves, one of them leading in an ensemble.
fn wait_serving(servers: &[ServerProcess]) {
    let t = Instant::now();
    loop {
        let modes: Vec<Option<String>> = servers
            .iter()
            .filter(|s| s.child.is_some())
            .map(ServerProcess::mode)
            .collect();
        let leaders = modes
            .iter()
            .filter(|m| m.as_deref() == Some("leader"))
            .count();
        if modes.iter().all(Option::is_some) && (leaders == 1 || servers.len() == 1) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{} did not form: {modes:?}",
            servers[0].name
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
    /// `sessions` sessions running `op`, spread over the servers at `ports`.
    async fn start(ports: &[u16], op: &'static str, sessions: usize) -> Load {
        let addr = |i: usize| format!("127.0.0.1:{}", ports[i % ports.len()]);
        let dir = format!("/bench-{op}-{sessions}");
        let setup = Client::connect(&addr(0)).await.unwrap();
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
            tokio::spawn(session(addr(i), op, node, rx.clone(), tx.clone()));
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

/// One cell: every database's sessions open at once, then turns in alternation.
async fn cell(dbs: &[Vec<u16>], op: &'static str, sessions: usize, secs: f64) -> Vec<CellResult> {
    let mut loads = Vec::new();
    for ports in dbs {
        loads.push(Load::start(ports, op, sessions).await);
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

/// Kills the leader of `servers` and measures until a client already
/// connected to the others has a write acknowledged; restarts the old
/// leader and waits for the ensemble again.
async fn failover(servers: &mut [ServerProcess], round: usize) -> Duration {
    let leader = servers
        .iter()
        .position(|s| s.mode().as_deref() == Some("leader"))
        .expect("a leader");
    let others: Vec<String> = servers
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != leader)
        .map(|(_, s)| format!("127.0.0.1:{}", s.port))
        .collect();
    let opts = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let client = Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(&others.join(","))
        .await
        .expect("connect");
    client
        .create(&format!("/failover-{round}"), b"", &opts)
        .await
        .expect("a write before the failover");
    servers[leader].kill();
    let killed = Instant::now();
    for k in 0.. {
        let path = format!("/failover-{round}/{k}");
        let write = client.create(&path, b"", &opts);
        if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_secs(1), write).await {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "no failover within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = killed.elapsed();
    servers[leader].spawn();
    wait_serving(servers);
    took
}

fn main() {
    let mut secs = 3.0;
    let mut names = vec!["keeperd", "zookeeper"];
    let mut ops = OPS.to_vec();
    let mut n = 1;
    let mut failovers = 3;
    let mut lazyfs: Option<PathBuf> = None;
    let mut args = std::env::args().skip(1);
    let number = |v: Option<String>, what: &str| -> f64 {
        v.and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{what} takes a number"))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => secs = number(args.next(), "--seconds"),
            "--servers" => n = number(args.next(), "--servers") as usize,
            "--failovers" => failovers = number(args.next(), "--failovers") as usize,
            "--op" => {
                let op = args.next().expect("--op takes create, setData or getData");
                ops.retain(|o| *o == op);
                assert!(!ops.is_empty(), "--op takes create, setData or getData");
            }
            "--keep" => KEEP.store(true, std::sync::atomic::Ordering::Relaxed),
            "--lazyfs" => lazyfs = Some(args.next().expect("--lazyfs takes a path").into()),
            "--only" => {
                let only = args.next().expect("--only takes keeperd or zookeeper");
                names.retain(|s| *s == only);
                assert!(!names.is_empty(), "--only takes keeperd or zookeeper");
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
    // Both databases run side by side and take turns within each cell, so
    // both see the same background load on this shared machine.
    let mut dbs: Vec<Vec<ServerProcess>> = names.iter().map(|name| start(name, n, None)).collect();
    if let Some(stampede) = &lazyfs {
        let on_layer: Vec<&'static str> = names
            .iter()
            .map(|name| match *name {
                "keeperd" => "keeperd+lazyfs",
                _ => "zookeeper+lazyfs",
            })
            .collect();
        for name in &on_layer {
            dbs.push(start(name, n, Some(stampede)));
        }
        names.extend(on_layer);
    }
    let ports: Vec<Vec<u16>> = dbs
        .iter()
        .map(|servers| servers.iter().map(|s| s.port).collect())
        .collect();
    for &op in &ops {
        for &sessions in SESSIONS {
            let results = runtime.block_on(cell(&ports, op, sessions, secs));
            for (name, r) in names.iter().zip(results) {
                eprintln!(
                    "{name:9} {op:8} {sessions:3} sessions: {:8.0} ops/s  p50 {:7.3} ms  p99 {:7.3} ms",
                    r.ops as f64 / r.secs,
                    r.p50.as_secs_f64() * 1e3,
                    r.p99.as_secs_f64() * 1e3
                );
                rows.push((*name, op, sessions, r));
            }
        }
    }
    let mut memory = Vec::new();
    for servers in &dbs {
        for server in servers {
            let nodes = four(server.port, "srvr")
                .lines()
                .find(|l| l.starts_with("Node count"))
                .unwrap_or("")
                .to_string();
            memory.push((server.name, rss_kib(server.pid()), nodes));
        }
    }
    // Failovers, the databases taking turns.
    let mut failover_times: Vec<(&str, Duration)> = Vec::new();
    if n > 1 {
        for round in 0..failovers {
            for servers in dbs.iter_mut() {
                let took = runtime.block_on(failover(servers, round));
                eprintln!("{:9} failover {round}: {took:?}", servers[0].name);
                failover_times.push((servers[0].name, took));
            }
        }
    }
    if lazyfs.is_some() {
        print_layer_overhead(&rows, &ops);
    }
    if !(names.contains(&"keeperd") && names.contains(&"zookeeper")) {
        return;
    }
    println!("{n} server(s) each:\n");
    println!("| op | sessions | keeperd ops/s | ZooKeeper ops/s | keeperd p50 / p99 ms | ZooKeeper p50 / p99 ms |");
    println!("|---|---:|---:|---:|---:|---:|");
    for &op in &ops {
        for &sessions in SESSIONS {
            let find = |s: &str| {
                rows.iter()
                    .find(|r| r.0 == s && r.1 == op && r.2 == sessions)
                    .map(|r| &r.3)
                    .unwrap()
            };
            let (k, z) = (find("keeperd"), find("zookeeper"));
            println!(
                "| {op} | {sessions} | {:.0} | {:.0} | {:.2} / {:.2} | {:.2} / {:.2} |",
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
    for name in names.iter().filter(|n| !n.ends_with("+lazyfs")) {
        let mut times: Vec<Duration> = failover_times
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, t)| *t)
            .collect();
        if times.is_empty() {
            continue;
        }
        times.sort();
        let ms: Vec<String> = times.iter().map(|t| format!("{}", t.as_millis())).collect();
        println!(
            "{name}: failover (leader killed -> first write acknowledged) {} ms (median {} ms)",
            ms.join(", "),
            times[times.len() / 2].as_millis()
        );
    }
}

/// The lazyfs layer's cost: each database's throughput and latency on plain disk and on the
/// layer, side by side.
fn print_layer_overhead(rows: &[(&str, &str, usize, CellResult)], ops: &[&str]) {
    println!("| database | op | sessions | plain ops/s | on lazyfs ops/s | change | plain p50 / p99 ms | lazyfs p50 / p99 ms |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for db in ["keeperd", "zookeeper"] {
        let layered = format!("{db}+lazyfs");
        for &op in ops {
            for &sessions in SESSIONS {
                let find = |s: &str| {
                    rows.iter()
                        .find(|r| r.0 == s && r.1 == op && r.2 == sessions)
                        .map(|r| &r.3)
                };
                let (Some(plain), Some(layer)) = (find(db), find(&layered)) else {
                    continue;
                };
                let (p, l) = (plain.ops as f64 / plain.secs, layer.ops as f64 / layer.secs);
                println!(
                    "| {db} | {op} | {sessions} | {p:.0} | {l:.0} | {:+.0}% | {:.2} / {:.2} | {:.2} / {:.2} |",
                    (l / p - 1.0) * 100.0,
                    plain.p50.as_secs_f64() * 1e3,
                    plain.p99.as_secs_f64() * 1e3,
                    layer.p50.as_secs_f64() * 1e3,
                    layer.p99.as_secs_f64() * 1e3
                );
            }
        }
    }
    println!();
}
