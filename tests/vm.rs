//! The nightly VM path end to end on one machine: `stampede vm up` boots three fresh Debian
//! guests under qemu, the playbook in `ansible/` provisions them over SSH as it would cloud
//! VMs, and a register test against ZooKeeper on them runs under a follower's partition, a
//! system-clock jump, tc netem (delay, loss, duplication, reordering) and a power loss at the
//! emulator, and must be judged valid, each fault having taken effect as a real kernel shows
//! it; then `stampede vm down` leaves nothing behind. Runs as root only (taps, bridge, qemu);
//! says so when skipped.

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
    common::ensure_ansible();
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
    let provision = Command::new("ansible-playbook")
        .arg("-i")
        .arg(&inventory)
        .arg("ansible/stampede.yml")
        .arg("-e")
        .arg(format!("stampede_ssh_public_key={}.pub", key.display()))
        .arg(format!(
            "--ssh-common-args=-o UserKnownHostsFile={}",
            known_hosts.display()
        ))
        .current_dir(root)
        .env("ANSIBLE_NOCOLOR", "1")
        .output()
        .expect("cannot run ansible-playbook");
    let played = text(&provision);
    assert!(provision.status.success(), "the playbook failed:\n{played}");
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
        "--workload",
        "register",
        "--nemesis",
        &nemesis,
        "--time-limit",
        "80s",
        "--set",
        "generator.nemesis_interval=4s",
        "--set",
        "generator.nemesis_duration=8s",
    ]);
    let said = text(&out);
    eprintln!("the register test: {} s", started.elapsed().as_secs());
    assert!(
        out.status.success(),
        "the register test was not valid:\n{said}"
    );
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
}
