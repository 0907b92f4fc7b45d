//! The nightly VM path end to end on one machine: `stampede vm up` boots three fresh Debian
//! guests under qemu, `stampede vm provision` runs the playbook in `ansible/` on them over SSH
//! as on cloud VMs (installing ansible first where it is missing), and a set test against
//! ZooKeeper on them runs under a follower's partition, a system-clock jump, tc netem (delay,
//! loss, duplication, reordering) and a power loss at the emulator, and must be judged valid
//! (no acknowledged add lost, none vanished), each fault having taken effect as a real kernel
//! shows it; the guests' time daemon puts a clock moved 5 s back by itself, from the time
//! server `vm up` runs; then `stampede vm down` leaves nothing behind. Runs as root only
//! (taps, bridge, qemu); says so when skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use common::text;

/// The VM cluster of this test: its name and /24 follow `STAMPEDE_TEST_SLOT`.
struct Vms {
    name: String,
    subnet: String,
    work: PathBuf,
}

impl Vms {
    fn new() -> Vms {
        let k = common::test_slot().unwrap_or(0);
        let name = format!("stvm{k}");
        let work = std::env::temp_dir().join(format!("stampede-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        Vms {
            subnet: format!("10.{}.30.0/24", 241 - k),
            name,
            work,
        }
    }

    fn dir(&self) -> PathBuf {
        Path::new("/var/lib/stampede/vms").join(&self.name)
    }

    /// Guest `i`'s address.
    fn guest(&self, i: u8) -> String {
        format!("{}{i}", self.subnet.trim_end_matches("0/24"))
    }

    /// Runs `cmd` on guest 1 as the provisioned user over one shared SSH connection (so that
    /// a clock reading costs a round trip, not a handshake).
    fn on_guest(&self, cmd: &str) -> Output {
        let dir = self.dir();
        Command::new("ssh")
            .arg("-i")
            .arg(dir.join("id_ed25519"))
            .arg(format!(
                "-oUserKnownHostsFile={}",
                dir.join("known_hosts").display()
            ))
            .arg(format!("-oControlPath={}/ssh-%C", self.work.display()))
            .args([
                "-oControlMaster=auto",
                "-oControlPersist=120",
                "-oBatchMode=yes",
            ])
            .arg(format!("debian@{}", self.guest(1)))
            .arg(cmd)
            .output()
            .expect("cannot run ssh")
    }

    /// Guest 1's clock minus this machine's, in seconds, and the round trip that bounds the
    /// error of the reading.
    fn guest_offset(&self) -> (f64, f64) {
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64()
        };
        let before = now();
        let out = self.on_guest("date +%s.%N");
        let after = now();
        let guest: f64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no clock reading: {}", text(&out)));
        (guest - (before + after) / 2.0, after - before)
    }

    fn stampede(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(args)
            .current_dir(&self.work)
            .output()
            .expect("cannot run stampede")
    }
}

impl Drop for Vms {
    /// The guests go whatever happened (what `down` leaves is checked in the test); the
    /// results stay when the test failed.
    fn drop(&mut self) {
        let _ = self.stampede(&["vm", "down", "--name", &self.name]);
        match std::thread::panicking() {
            true => eprintln!("results kept in {}", self.work.display()),
            false => drop(std::fs::remove_dir_all(&self.work)),
        }
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn history(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("history.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The completed nemesis operations `f`, in order.
fn nemesis_values(ops: &[serde_json::Value], f: &str) -> Vec<serde_json::Value> {
    ops.iter()
        .filter(|o| o["process"] == "nemesis" && o["f"] == f && o["type"] != "invoke")
        .map(|o| o["value"].clone())
        .collect()
}

/// The time window (ns) of each completed start…stop of `kind`.
fn windows(ops: &[serde_json::Value], kind: &str) -> Vec<(u64, u64)> {
    let times = |f: String| -> Vec<u64> {
        ops.iter()
            .filter(|o| o["process"] == "nemesis" && o["f"] == f.as_str() && o["type"] != "invoke")
            .map(|o| o["time"].as_u64().unwrap())
            .collect()
    };
    let (starts, stops) = (
        times(format!("start-{kind}")),
        times(format!("stop-{kind}")),
    );
    starts.into_iter().zip(stops).collect()
}

/// The median latency (ms) of the clients' completed reads and writes inside (or outside)
/// `windows`.
fn median_latency_ms(ops: &[serde_json::Value], windows: &[(u64, u64)], inside: bool) -> f64 {
    let mut invoked = std::collections::HashMap::new();
    let mut latencies = Vec::new();
    for op in ops.iter().filter(|o| o["process"].is_u64()) {
        let (process, time) = (
            op["process"].as_u64().unwrap(),
            op["time"].as_u64().unwrap(),
        );
        if op["type"] == "invoke" {
            invoked.insert(process, time);
        } else if let Some(start) = invoked.remove(&process) {
            let within = windows.iter().any(|&(a, b)| start >= a && time <= b);
            if op["type"] == "ok" && within == inside {
                latencies.push((time - start) as f64 / 1e6);
            }
        }
    }
    assert!(
        !latencies.is_empty(),
        "no completed operations (inside: {inside})"
    );
    latencies.sort_by(f64::total_cmp);
    latencies[latencies.len() / 2]
}

#[test]
fn guests_are_provisioned_by_the_playbook_and_zookeeper_on_them_survives_real_faults() {
    if !is_root() {
        eprintln!("skipped: VM guests need root (taps, bridge, qemu); run the test suite as root");
        return;
    }
    let vms = Vms::new();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));

    let started = Instant::now();
    let up = vms.stampede(&[
        "vm",
        "up",
        "--name",
        &vms.name,
        "--nodes",
        "3",
        "--subnet",
        &vms.subnet,
    ]);
    assert!(up.status.success(), "vm up failed: {}", text(&up));
    eprintln!(
        "vm up (image cached or built, 3 guests answer SSH): {} s",
        started.elapsed().as_secs()
    );
    let inventory = vms.dir().join("inventory.ini");
    let (key, known_hosts) = (vms.dir().join("id_ed25519"), vms.dir().join("known_hosts"));

    let started = Instant::now();
    let playbook = root.join("ansible/stampede.yml").display().to_string();
    let provision = vms.stampede(&[
        "vm",
        "provision",
        "--name",
        &vms.name,
        "--playbook",
        &playbook,
    ]);
    let played = text(&provision);
    assert!(provision.status.success(), "vm provision failed:\n{played}");
    assert!(
        played.contains("failed=0") && !played.contains("unreachable=1"),
        "{played}"
    );
    eprintln!("the playbook: {} s", started.elapsed().as_secs());

    let started = Instant::now();
    let nemesis = root.join("nemeses/vm.yaml").display().to_string();
    let (inventory, key, known_hosts) = (
        inventory.display().to_string(),
        key.display().to_string(),
        known_hosts.display().to_string(),
    );
    let out = vms.stampede(&[
        "test",
        "--nodes-file",
        &inventory,
        "--ssh-key",
        &key,
        "--known-hosts",
        &known_hosts,
        // Not the register: ZooKeeper 3.8's sync + read is not linearizable across a leader
        // change (ZOOKEEPER-1675), which a power loss of the leader brings; CI once judged a
        // register run here INVALID with 1 lost-write. The set holds ZooKeeper to what it
        // promises under power loss: nothing acknowledged is lost.
        "--workload",
        "set",
        "--nemesis",
        &nemesis,
        // The power loss, last, starts 60-90 s in, later on a busy machine (a rehearsal on
        // 2026-11-29 did not reach it in 120 s); its guest's boot ends the run.
        "--time-limit",
        "150s",
        // A few hundred elements, not thousands: the replicas are compared by reading every
        // znode from each emulated guest while nothing changes, which 2,477 took too long for.
        "--set",
        "generator.rate=10",
        "--set",
        "generator.nemesis_interval=3s",
        "--set",
        "generator.nemesis_duration=6s",
    ]);
    let said = text(&out);
    eprintln!("the set test: {} s", started.elapsed().as_secs());
    assert!(out.status.success(), "the set test was not valid:\n{said}");
    let verdict = said.lines().find(|l| l.contains("verdict: ")).unwrap_or("");
    for kind in ["partition", "clock", "packet", "power-loss"] {
        assert!(
            verdict.contains(kind),
            "no {kind} fault took effect: {verdict}"
        );
    }
    let results = vms.work.join(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("results: "))
            .expect("a results line"),
    );
    let ops = history(&results);

    // The clock: the leader's system clock read 5 s ahead, and back after the heal.
    let jumps = nemesis_values(&ops, "start-clock");
    let jumped = jumps.iter().any(|v| {
        v["nodes"].as_array().unwrap().iter().all(|n| {
            let offset = v["offsets_ms"][n.as_str().unwrap()].as_f64().unwrap_or(0.0);
            (4000.0..6000.0).contains(&offset)
        })
    });
    assert!(jumped, "no clock read 5 s ahead: {jumps:?}");
    for back in nemesis_values(&ops, "stop-clock") {
        for (node, offset) in back["offsets_ms"].as_object().unwrap() {
            let offset = offset.as_f64().unwrap();
            assert!(
                offset.abs() < 1000.0,
                "{node}'s clock still {offset} ms off after the heal"
            );
        }
    }

    // netem: the clients saw the 100 ms delay (their requests and the replies both cross it).
    let shaped = windows(&ops, "packet");
    let (during, outside) = (
        median_latency_ms(&ops, &shaped, true),
        median_latency_ms(&ops, &shaped, false),
    );
    eprintln!("median latency under netem {during:.1} ms, outside {outside:.1} ms");
    assert!(
        during >= outside + 90.0,
        "netem delay not seen: {during} ms vs {outside} ms"
    );

    // The power loss: a guest went down at the emulator and its server served again.
    let boots = nemesis_values(&ops, "stop-power-loss");
    assert!(
        boots.iter().any(|v| v["after_boot"]
            .as_object()
            .is_some_and(|a| a.values().all(|s| s == "serving"))),
        "no guest came back serving after its power loss: {boots:?}"
    );

    // The time daemon: with a source (the time server `vm up` runs on the bridge), it puts a
    // clock moved 5 s ahead while it was stopped back by itself once started.
    let moved = vms.on_guest(
        "sudo systemctl stop chrony && t=$(( $(date +%s%N) + 5000000000 )) && \
         sudo date -s @$((t / 1000000000)).$(printf %09d $((t % 1000000000))) >/dev/null",
    );
    assert!(moved.status.success(), "{}", text(&moved));
    let (ahead, _) = vms.guest_offset();
    assert!(
        (4.5..5.5).contains(&ahead),
        "the clock moved 5 s: {ahead:.3} s"
    );
    let started = Instant::now();
    let restarted = vms.on_guest("sudo systemctl start chrony");
    assert!(restarted.status.success(), "{}", text(&restarted));
    let restored = loop {
        let (offset, round_trip) = vms.guest_offset();
        if offset.abs() + round_trip < 0.5 {
            break offset;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "chrony did not restore the clock within 60 s: {offset:.3} s off; sources:\n{}",
            text(&vms.on_guest("chronyc -n sources"))
        );
        std::thread::sleep(std::time::Duration::from_secs(1));
    };
    let sources = text(&vms.on_guest("chronyc -n sources"));
    eprintln!(
        "chrony restored a clock {ahead:.3} s ahead to {restored:+.3} s in {} s:\n{sources}",
        started.elapsed().as_secs()
    );
    let server = format!("^* {}", vms.guest(254));
    assert!(sources.contains(&server), "{server} selected: {sources}");

    let down = vms.stampede(&["vm", "down", "--name", &vms.name]);
    assert!(down.status.success(), "vm down failed: {}", text(&down));
    assert!(!vms.dir().exists(), "vm down left {}", vms.dir().display());
    let links = Command::new("ip").args(["-o", "link"]).output().unwrap();
    let prefix = format!("{}-v", vms.name);
    assert!(
        !String::from_utf8_lossy(&links.stdout).contains(&prefix),
        "vm down left a tap or bridge"
    );
    let emulators = Command::new("pgrep")
        .args(["-f", &format!("stampede-vm-{}-", vms.name)])
        .output()
        .unwrap();
    assert!(
        emulators.stdout.is_empty(),
        "vm down left an emulator running"
    );
    let time_server = Command::new("pgrep")
        .args(["-f", &format!("serve-time --listen {}:123", vms.guest(254))])
        .output()
        .unwrap();
    assert!(
        time_server.stdout.is_empty(),
        "vm down left the time server running"
    );
}
