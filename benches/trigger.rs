//! Trigger latency: a line written to a log → the signal delivered to the process the agent
//! aims at. Runs the real `stampede agent-trigger` on a temporary log; for each sample, starts
//! a target process (`sleep`), appends a line stamped with CLOCK_REALTIME, and waits for the
//! target to die (waitpid). Reports the median and p99 of the stamp → waitpid return, and of
//! the agent's own record (stamp → kill(2) sent), for poll intervals side by side, with the
//! agent's CPU use.
//!
//! Then the drop action (as root, in a network namespace of its own made by `unshare -n`): a
//! stamped line → the agent's DROP rules committed (its record: `iptables-restore` exited),
//! each sample's rules checked in the namespace's ruleset and removed before the next.
//!
//!   cargo bench --bench trigger [-- SAMPLES]

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// CPU time (user + system) of process `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| {
        f.iter().map(|t| t.parse::<f64>().unwrap_or(0.0)).sum()
    });
    ticks / 100.0
}

/// How long after each stamp (in ms) the agent's record says it acted, sorted; one firing per
/// stamp.
fn acted_after(record: &std::path::Path, stamps: &[u64]) -> Vec<f64> {
    let text = std::fs::read_to_string(record).unwrap();
    let mut after: Vec<f64> = text
        .lines()
        .zip(stamps)
        .filter_map(|(l, stamp)| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((v["acted_ns"].as_u64()? as f64 - *stamp as f64) / 1e6)
        })
        .collect();
    assert_eq!(after.len(), stamps.len(), "every line fired once");
    after.sort_by(f64::total_cmp);
    after
}

fn run(poll_us: u64, samples: usize) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let pidfile = dir.path().join("server.pid");
    let record = dir.path().join("fired.jsonl");
    std::fs::write(&log, "").unwrap();
    let marker = "3600.777";
    let mut agent = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["agent-trigger", "--log"])
        .arg(&log)
        .arg("--pidfile")
        .arg(&pidfile)
        .args([
            "--marker",
            marker,
            "--pattern",
            "^TRIGGER ",
            "--action",
            "KILL",
        ])
        .args([
            "--count",
            &samples.to_string(),
            "--poll-us",
            &poll_us.to_string(),
        ])
        .arg("--record")
        .arg(&record)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let began = Instant::now();
    let mut out = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let mut waited = Vec::new();
    let mut stamps = Vec::new();
    for i in 0..samples {
        let mut target = Command::new("sleep").arg(marker).spawn().unwrap();
        std::fs::write(&pidfile, target.id().to_string()).unwrap();
        writeln!(out, "noise {i}").unwrap();
        std::thread::sleep(Duration::from_millis(15));
        let stamp = realtime_ns();
        let t0 = Instant::now();
        writeln!(out, "TRIGGER {stamp}").unwrap();
        target.wait().unwrap();
        waited.push(t0.elapsed().as_secs_f64() * 1e3);
        stamps.push(stamp);
    }
    let cpu = cpu_seconds(agent.id());
    let wall = began.elapsed().as_secs_f64();
    agent.wait().unwrap();
    let sent = acted_after(&record, &stamps);
    waited.sort_by(f64::total_cmp);
    println!(
        "poll {poll_us:>5} µs, {samples} samples: line → target reaped median {:.3} ms, p99 {:.3} ms; \
         line → kill sent (agent's record) median {:.3} ms, p99 {:.3} ms; agent CPU {:.1}% of one core",
        quantile(&waited, 0.5),
        quantile(&waited, 0.99),
        quantile(&sent, 0.5),
        quantile(&sent, 0.99),
        100.0 * cpu / wall
    );
}

/// Runs `script` in the network namespace of process `pid`; its output.
fn in_netns(pid: u32, script: &str) -> String {
    let out = Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-n", "sh", "-c", script])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_drop(samples: usize) {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let record = dir.path().join("fired.jsonl");
    std::fs::write(&log, "").unwrap();
    let mut agent = Command::new("unshare")
        .args([
            "-n",
            env!("CARGO_BIN_EXE_stampede"),
            "agent-trigger",
            "--log",
        ])
        .arg(&log)
        .arg("--pidfile")
        .arg(dir.path().join("none.pid"))
        .args([
            "--marker",
            "none",
            "--pattern",
            "^TRIGGER ",
            "--action",
            "DROP",
        ])
        .args(["--drop-from", "192.0.2.1,192.0.2.2"])
        // One more than fired, so that the agent (and its namespace) outlives the last sample.
        .args(["--count", &(samples + 1).to_string(), "--record"])
        .arg(&record)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = agent.id();
    let mut out = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let mut stamps = Vec::new();
    for i in 0..samples {
        writeln!(out, "noise {i}").unwrap();
        std::thread::sleep(Duration::from_millis(15));
        let stamp = realtime_ns();
        writeln!(out, "TRIGGER {stamp}").unwrap();
        stamps.push(stamp);
        let began = Instant::now();
        while std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .count()
            <= i
        {
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "sample {i} fired"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let rules = in_netns(
            pid,
            "iptables -w -S STAMPEDE | grep -c DROP; while iptables -w -D INPUT -j STAMPEDE 2>/dev/null; do :; done; \
             iptables -w -F STAMPEDE; iptables -w -X STAMPEDE",
        );
        assert_eq!(rules.trim(), "2", "sample {i}: both DROP rules in place");
    }
    agent.kill().unwrap();
    agent.wait().unwrap();
    let in_place = acted_after(&record, &stamps);
    println!(
        "drop, poll 1000 µs, {samples} samples: line → DROP rules in place (agent's record) median {:.3} ms, p99 {:.3} ms",
        quantile(&in_place, 0.5),
        quantile(&in_place, 0.99),
    );
}

fn main() {
    let samples = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    for poll_us in [1000, 200] {
        run(poll_us, samples);
    }
    run_drop(samples);
}
