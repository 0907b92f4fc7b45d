//! Trigger latency: a line written to a log → the signal delivered to the process the agent
//! aims at. Runs the real `stampede agent-trigger` on a temporary log; for each sample, starts
//! a target process (`sleep`), appends a line stamped with CLOCK_REALTIME, and waits for the
//! target to die (waitpid). Reports the median and p99 of the stamp → waitpid return, and of
//! the agent's own record (stamp → kill(2) sent), for poll intervals side by side, with the
//! agent's CPU use.
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
            "--signal",
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
    let text = std::fs::read_to_string(&record).unwrap();
    let mut sent: Vec<f64> = text
        .lines()
        .zip(&stamps)
        .filter_map(|(l, stamp)| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            Some((v["signalled_ns"].as_u64()? as f64 - *stamp as f64) / 1e6)
        })
        .collect();
    assert_eq!(sent.len(), samples, "every line fired once");
    waited.sort_by(f64::total_cmp);
    sent.sort_by(f64::total_cmp);
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

fn main() {
    let samples = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    for poll_us in [1000, 200] {
        run(poll_us, samples);
    }
}
