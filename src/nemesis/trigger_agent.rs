//! The log-trigger agent's work on a node: follow a server's log from a given offset and, on
//! each line matching a pattern, act right there (no controller round trip): signal the
//! server's process, cut the node off with iptables DROP rules, or kill the server and tell
//! its lose-unfsynced layer to throw away what it had not fsync'd. Each firing is recorded as
//! a JSON line.
//!
//! The log is polled: a `stat` and a read from the last offset every poll interval (1 ms by
//! default). `benches/trigger.rs` measured this against shorter intervals; see
//! `docs/performance.md` (Log triggers).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::trigger_action::{Action, Armed};

/// When and how often the agent acts.
#[derive(Debug, Clone)]
pub struct Firing {
    /// The pattern a line must match.
    pub pattern: regex::Regex,
    /// What is done.
    pub action: Action,
    /// Wait after seeing the line, before signalling.
    pub delay: Duration,
    /// A random extra wait, uniform from 0 to this.
    pub jitter: Duration,
    /// Actions taken at most; the agent exits after the last.
    pub count: u32,
    /// Chance that a matching line fires, from 0 to 1.
    pub probability: f64,
}

/// How the server's process is found: its pid file, checked against a marker in
/// `/proc/<pid>/cmdline`.
#[derive(Debug, Clone)]
pub struct Server {
    /// The file holding the pid.
    pub pidfile: PathBuf,
    /// A string the process's command line contains.
    pub marker: String,
}

/// One firing as recorded on the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fired {
    /// The line that matched (without its newline).
    pub line: String,
    /// When the agent read the line (CLOCK_REALTIME, ns since the epoch).
    pub seen_ns: u64,
    /// How long the agent waited between seeing the line and signalling (delay and jitter).
    #[serde(default)]
    pub waited_ns: u64,
    /// When the action took effect (the signal sent; the DROP rules in place; the server
    /// killed and its unsynced data thrown away), `None` when it could not be taken.
    pub acted_ns: Option<u64>,
    /// The server process signalled, if any.
    #[serde(default)]
    pub pid: Option<u32>,
    /// What a power loss threw away (the layer's answer: `{bytes, files}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<serde_json::Value>,
    /// Why the action could not be taken (or only partly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The wall clock in nanoseconds since the epoch.
pub fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl Server {
    /// The server's pid when its process runs with the marker in its command line.
    pub fn pid(&self) -> Option<u32> {
        let pid: u32 = std::fs::read_to_string(&self.pidfile)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let marker = self.marker.as_bytes();
        cmdline
            .windows(marker.len().max(1))
            .any(|w| w == marker)
            .then_some(pid)
    }
}

/// A log file read from an offset, reopened when it is rotated (another inode at its path) or
/// truncated.
struct Follower {
    path: PathBuf,
    file: Option<(File, u64)>,
    offset: u64,
    partial: Vec<u8>,
}

impl Follower {
    fn new(path: &Path, from: u64) -> Follower {
        Follower {
            path: path.to_path_buf(),
            file: None,
            offset: from,
            partial: Vec::new(),
        }
    }

    /// Reads what was appended since the last call and returns the complete lines.
    fn poll(&mut self) -> std::io::Result<Vec<String>> {
        let mut data = Vec::new();
        let Ok(meta) = std::fs::metadata(&self.path) else {
            return Ok(Vec::new());
        };
        let rotated = match &self.file {
            Some((_, inode)) => *inode != meta.ino(),
            None => false,
        };
        if rotated {
            // Finish the old file, then start the new one from its beginning.
            if let Some((mut old, _)) = self.file.take() {
                old.read_to_end(&mut data)?;
            }
            self.offset = 0;
        } else if meta.len() < self.offset {
            self.offset = 0;
            self.file = None;
        }
        if self.file.is_none() {
            let mut file = File::open(&self.path)?;
            file.seek(SeekFrom::Start(self.offset))?;
            self.file = Some((file, meta.ino()));
        }
        if meta.len() > self.offset || rotated {
            let (file, _) = self.file.as_mut().expect("opened above");
            let before = data.len();
            file.read_to_end(&mut data)?;
            self.offset += (data.len() - before) as u64;
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        self.partial.extend_from_slice(&data);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return Ok(Vec::new());
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        Ok(String::from_utf8_lossy(&complete)
            .lines()
            .map(str::to_string)
            .collect())
    }
}

/// The file that exists while the agent writing `record` acts and records a firing: the
/// disarm lets an action under way end and be recorded before it kills the agent, so no
/// server is killed, paused, cut off or powered off without a record to heal it from.
pub fn acting_file(record: &Path) -> std::path::PathBuf {
    record.with_extension("acting")
}

/// Follows `log` from byte `from`, acting as `firing` says on `server`, appending each firing
/// to `record` (with [`acting_file`] present from the action to the record); polls every
/// `poll`. Returns after `firing.count` firings that took effect.
pub fn run(
    log: &Path,
    from: u64,
    server: &Server,
    firing: &Firing,
    record: &Path,
    poll: Duration,
) -> anyhow::Result<()> {
    let mut follower = Follower::new(log, from);
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(record)?;
    let mut fired = 0;
    let mut rng = rand::thread_rng();
    let mut armed = Armed::new(&firing.action)?;
    loop {
        for line in follower.poll()? {
            if !firing.pattern.is_match(&line) {
                continue;
            }
            let seen_ns = realtime_ns();
            if firing.probability < 1.0 && !rng.gen_bool(firing.probability) {
                continue;
            }
            let wait = firing.delay + firing.jitter.mul_f64(rng.gen::<f64>());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            let acting = acting_file(record);
            std::fs::write(&acting, b"")?;
            let outcome = armed.act(server)?;
            let entry = Fired {
                line,
                seen_ns,
                waited_ns: wait.as_nanos() as u64,
                acted_ns: outcome.acted_ns,
                pid: outcome.pid,
                lost: outcome.lost,
                error: outcome.error,
            };
            writeln!(out, "{}", serde_json::to_string(&entry)?)?;
            out.flush()?;
            std::fs::remove_file(&acting)?;
            if entry.acted_ns.is_some() {
                fired += 1;
                if fired >= firing.count {
                    return Ok(());
                }
            }
        }
        std::thread::sleep(poll);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_follower_reads_whole_lines_from_its_offset_across_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        std::fs::write(&log, "old line\n").unwrap();
        let mut f = Follower::new(&log, 9);
        assert!(f.poll().unwrap().is_empty());
        let mut w = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        write!(w, "first\nsec").unwrap();
        assert_eq!(f.poll().unwrap(), ["first"]);
        writeln!(w, "ond").unwrap();
        assert_eq!(f.poll().unwrap(), ["second"]);
        writeln!(w, "tail of the old file").unwrap();
        std::fs::rename(&log, dir.path().join("server.log.1")).unwrap();
        std::fs::write(&log, "new file\n").unwrap();
        assert_eq!(f.poll().unwrap(), ["tail of the old file", "new file"]);
        std::fs::write(&log, "x\n").unwrap();
        assert_eq!(f.poll().unwrap(), ["x"], "a truncated file is read again");
    }

    #[test]
    fn a_matching_line_signals_the_marked_process_and_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        std::fs::write(&log, "Learner received NEWLEADER message (before arming)\n").unwrap();
        let from = std::fs::metadata(&log).unwrap().len();
        let mut child = std::process::Command::new("sleep")
            .arg("3600.5")
            .spawn()
            .unwrap();
        let pidfile = dir.path().join("server.pid");
        std::fs::write(&pidfile, child.id().to_string()).unwrap();
        let server = Server {
            pidfile,
            marker: "3600.5".into(),
        };
        let firing = Firing {
            pattern: regex::Regex::new("NEWLEADER").unwrap(),
            action: Action::Signal(libc::SIGKILL),
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            count: 1,
            probability: 1.0,
        };
        let record = dir.path().join("fired.jsonl");
        let writer = {
            let log = log.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let mut w = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
                writeln!(w, "other line\nLearner received NEWLEADER message").unwrap();
            })
        };
        run(
            &log,
            from,
            &server,
            &firing,
            &record,
            Duration::from_millis(1),
        )
        .unwrap();
        writer.join().unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        let text = std::fs::read_to_string(&record).unwrap();
        let fired: Vec<Fired> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(fired.len(), 1, "{text}");
        assert_eq!(fired[0].line, "Learner received NEWLEADER message");
        assert_eq!(fired[0].pid, Some(child.id()));
        assert!(fired[0].acted_ns.unwrap() >= fired[0].seen_ns);
        assert!(
            !acting_file(&record).exists(),
            "recorded: no action under way"
        );
        // A pid file naming a process without the marker is never signalled.
        let other = Server {
            pidfile: dir.path().join("server.pid"),
            marker: "not-this-process".into(),
        };
        std::fs::write(&other.pidfile, std::process::id().to_string()).unwrap();
        assert_eq!(other.pid(), None);
    }
}
