//! Clock faults: jump nodes' clocks (`bump`), flip them back and forth (`strobe`), or put
//! them back (`reset`). On real nodes the system clock is set with `date`, the time daemon
//! stopped around it. On the local cluster, whose namespaces share one kernel clock that must
//! never be touched, each server runs under libfaketime with a control file of its own, and
//! the offset written there moves both its wall clock and its monotonic clock.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::task::JoinHandle;

use super::kind::{self, refuse, Checking, FaultKind, HealStage, Healed, Parts, Refusal};
use super::package::FaultConfig;
use super::target::SeededTarget;
use super::Nemesis;
use crate::config::Duration;
use crate::control::shell::quote;
use crate::control::{ClockReading, Control, Node, Retry};
use crate::db::Db;

/// The fault kind `clock`: settings under `clock:` ([`ClockConfig`]).
pub struct ClockKind;

#[async_trait::async_trait]
impl FaultKind for ClockKind {
    fn name(&self) -> &'static str {
        "clock"
    }

    fn colour(&self) -> (u8, u8, u8) {
        (188, 189, 34)
    }

    fn settings_key(&self) -> Option<&'static str> {
        Some("clock")
    }

    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        kind::check_node_target(fault, checking)?;
        let cfg: ClockConfig = kind::settings(fault)?;
        if cfg.mode == ClockMode::Strobe && cfg.period.0.is_zero() {
            return Err(refuse("clock", "a strobe needs a period above 0"));
        }
        if cfg.mode != ClockMode::Reset && cfg.delta_ms == 0 {
            return Err(refuse(
                "clock",
                "delta_ms 0 moves no clock; give the jump in milliseconds",
            ));
        }
        Ok(())
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, |c, db, target, cfg| {
            Ok(ClockNemesis::new(c, db, target, cfg))
        })
    }

    fn heal_stage(&self) -> Option<HealStage> {
        Some(HealStage::Clock)
    }

    /// Puts back a clock the marker (on a real node) or the server's fake-clock file (on the
    /// local cluster) says was moved.
    async fn heal_node(&self, control: &Control, db: &dyn Db, node: &Node) -> Healed {
        let file = db
            .clock_file(node)
            .unwrap_or_else(|| SKEW_MARKER.to_string());
        let probe = format!("test -f {file} && echo yes || true");
        if control.exec(node, &probe, Retry::Idempotent).await? != "yes" {
            return Ok(None);
        }
        set_offset(control, db, node, 0).await?;
        Ok(Some("clock"))
    }

    fn leftover_probe(&self, _node: &Node) -> Option<String> {
        Some(format!(
            "[ -f {SKEW_MARKER} ] && echo 'clock moved (time daemon stopped)'; true"
        ))
    }
}

/// What a clock fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockMode {
    /// Jump the targeted clocks by `delta_ms`.
    Bump,
    /// Flip the targeted clocks between +`delta_ms` and their own time every `period`.
    Strobe,
    /// Put every clock back.
    Reset,
}

/// A clock fault's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClockConfig {
    /// Bump, strobe or reset.
    pub mode: ClockMode,
    /// The jump, in milliseconds (negative: back in time).
    pub delta_ms: i64,
    /// How often a strobe flips.
    pub period: Duration,
}

impl Default for ClockConfig {
    fn default() -> Self {
        ClockConfig {
            mode: ClockMode::Bump,
            delta_ms: 5000,
            period: Duration(std::time::Duration::from_millis(500)),
        }
    }
}

/// A marker left on a real node whose system clock stampede changed, so healing knows to
/// set it back even after a controller crash.
pub const SKEW_MARKER: &str = "/var/lib/stampede/clock-skewed";

/// A probe of the clock as the node's server sees it (under libfaketime with its control file
/// on the local cluster, plainly on real nodes): perl says `ready`, waits for one byte, then
/// prints the wall clock in nanoseconds without starting another process.
fn probe_command(clock_file: Option<&str>) -> String {
    let probe = "perl -MTime::HiRes=clock_gettime,CLOCK_REALTIME -e '$| = 1; print \"ready\\n\"; sysread STDIN, my $b, 1; printf \"%.0f\\n\", clock_gettime(CLOCK_REALTIME) * 1e9'";
    match clock_file {
        Some(file) => format!(
            "LD_PRELOAD=$(ls /usr/lib/*/faketime/libfaketimeMT.so.1 | head -1) FAKETIME_TIMESTAMP_FILE={} FAKETIME_NO_CACHE=1 {probe}",
            quote(file)
        ),
        None => probe.to_string(),
    }
}

/// The controller's wall clock in nanoseconds since the epoch.
fn controller_now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// Sets `node`'s clock, as its server sees it, to the controller's clock plus `offset_ms`. A
/// real node's clock is measured first and moved by the difference, computed on the node
/// from its own clock, so that the time a command takes to arrive (a second on an emulated
/// guest) does not end up in the offset.
pub async fn set_offset(
    control: &Control,
    db: &dyn Db,
    node: &Node,
    offset_ms: i64,
) -> anyhow::Result<()> {
    if let Some(file) = db.clock_file(node) {
        let text = format!("{:+.3}\n", offset_ms as f64 / 1000.0);
        return control.upload(node, text.into_bytes(), &file, 0o644).await;
    }
    let daemons = "chrony systemd-timesyncd ntp";
    if offset_ms != 0 {
        let stop = format!(
            "(systemctl stop {daemons} || true) 2>/dev/null; mkdir -p $(dirname {SKEW_MARKER}) && touch {SKEW_MARKER}"
        );
        control.exec(node, &stop, Retry::Idempotent).await?;
    }
    let mut cmd = match measure(control, db, node).await {
        Ok(now_ms) => {
            let shift_ns = ((offset_ms as f64 - now_ms) * 1e6).round() as i128;
            format!("t=$(( $(date +%s%N) + {shift_ns} ))")
        }
        Err(e) => {
            tracing::warn!(
                "cannot measure the clock of {}, setting it from the controller's: {e:#}",
                node.name
            );
            format!("t={}", controller_now_ns() + offset_ms as i128 * 1_000_000)
        }
    };
    cmd.push_str(" && date -s @$((t / 1000000000)).$(printf %09d $((t % 1000000000))) >/dev/null");
    if offset_ms == 0 {
        cmd.push_str(&format!(
            " && rm -f {SKEW_MARKER} && (systemctl start chrony || systemctl start systemd-timesyncd || systemctl start ntp || true) 2>/dev/null"
        ));
    }
    control.exec(node, &cmd, Retry::Once).await.map(drop)
}

/// How far `node`'s clock (as its server sees it) is from the controller's, in milliseconds:
/// of three readings over SSH, the one with the shortest round trip, whose error bound is the
/// smallest (on a loaded node one answer may come late, and the midpoint of a long round trip
/// says little).
pub async fn measure(control: &Control, db: &dyn Db, node: &Node) -> anyhow::Result<f64> {
    let cmd = probe_command(db.clock_file(node).as_deref());
    let mut readings = Vec::new();
    for _ in 0..3 {
        readings.push(control.read_clock(node, &cmd).await?);
    }
    Ok(tightest(&readings).offset_ns as f64 / 1e6)
}

/// The reading with the shortest round trip (the first of them on a tie).
fn tightest(readings: &[ClockReading]) -> ClockReading {
    let best = readings.iter().min_by_key(|r| r.round_trip_ns);
    *best.expect("at least one reading")
}

/// Every node's measured offset, in milliseconds, by node name.
pub async fn measure_all(control: &Control, db: &dyn Db) -> BTreeMap<String, f64> {
    let asks = control
        .nodes()
        .iter()
        .map(|n| async move { (n.name.clone(), measure(control, db, n).await) });
    let mut offsets = BTreeMap::new();
    for (name, result) in futures::future::join_all(asks).await {
        match result {
            Ok(ms) => {
                offsets.insert(name, (ms * 10.0).round() / 10.0);
            }
            Err(e) => tracing::warn!("cannot measure the clock of {name}: {e:#}"),
        }
    }
    offsets
}

/// Puts the clock of every node running the database back to the controller's (the others
/// were never skewed: faults aim at servers only).
pub async fn reset_all(control: &Control, db: &dyn Db) -> anyhow::Result<()> {
    let servers = crate::db::servers(db, control.nodes());
    let resets = servers.iter().map(|n| set_offset(control, db, n, 0));
    for result in futures::future::join_all(resets).await {
        result?;
    }
    Ok(())
}

/// Skews the clocks of the targeted nodes while active.
pub struct ClockNemesis {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    cfg: ClockConfig,
    strobe: Mutex<Option<JoinHandle<()>>>,
}

impl ClockNemesis {
    /// A clock fault `cfg` on the nodes `target` picks at each start.
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        target: SeededTarget,
        cfg: ClockConfig,
    ) -> ClockNemesis {
        ClockNemesis {
            control,
            db,
            target,
            cfg,
            strobe: Mutex::new(None),
        }
    }

    async fn offsets_value(&self, hit: &[Node]) -> serde_json::Value {
        let names: Vec<&str> = hit.iter().map(|n| n.name.as_str()).collect();
        let offsets = measure_all(&self.control, self.db.as_ref()).await;
        json!({ "mode": self.cfg.mode, "delta_ms": self.cfg.delta_ms, "nodes": names, "offsets_ms": offsets })
    }
}

impl Drop for ClockNemesis {
    /// A strobe never outlives its fault: it would move a clock after the heal.
    fn drop(&mut self) {
        let strobing = self.strobe.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(strobing) = strobing {
            strobing.abort();
        }
    }
}

#[async_trait::async_trait]
impl Nemesis for ClockNemesis {
    fn kind(&self) -> &str {
        "clock"
    }

    fn target(&self) -> String {
        match self.cfg.mode {
            ClockMode::Reset => "all".to_string(),
            _ => self.target.to_string(),
        }
    }

    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let hit = match self.cfg.mode {
            ClockMode::Reset => crate::db::servers(self.db.as_ref(), self.control.nodes()),
            _ => {
                self.target
                    .pick(self.control.nodes(), self.db.as_ref())
                    .await?
            }
        };
        let offset = if self.cfg.mode == ClockMode::Reset {
            0
        } else {
            self.cfg.delta_ms
        };
        let sets = hit
            .iter()
            .map(|n| set_offset(&self.control, self.db.as_ref(), n, offset));
        for result in futures::future::join_all(sets).await {
            result.context("cannot set a clock")?;
        }
        if self.cfg.mode == ClockMode::Strobe {
            let (control, db, nodes, delta, period) = (
                self.control.clone(),
                self.db.clone(),
                hit.clone(),
                self.cfg.delta_ms,
                self.cfg.period.0,
            );
            let strobing = tokio::spawn(async move {
                for flip in 1u64.. {
                    tokio::time::sleep(period).await;
                    let offset = if flip % 2 == 0 { delta } else { 0 };
                    for node in &nodes {
                        if let Err(e) = set_offset(&control, db.as_ref(), node, offset).await {
                            tracing::warn!("strobe on {}: {e:#}", node.name);
                        }
                    }
                }
            });
            if let Some(old) = self
                .strobe
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .replace(strobing)
            {
                old.abort();
            }
        }
        Ok(self.offsets_value(&hit).await)
    }

    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let strobing = self.strobe.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(strobing) = strobing {
            strobing.abort();
            let _ = strobing.await;
        }
        reset_all(&self.control, self.db.as_ref()).await?;
        Ok(self.offsets_value(&[]).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_runs_under_faketime_only_with_a_control_file() {
        assert!(probe_command(None).starts_with("perl "));
        let faked = probe_command(Some("/d/10.0.0.1/faketime"));
        assert!(faked.contains("FAKETIME_TIMESTAMP_FILE=/d/10.0.0.1/faketime"));
        assert!(faked.contains("libfaketimeMT.so.1"));
    }

    #[test]
    fn the_reading_with_the_shortest_round_trip_is_taken() {
        let read = |offset_ns, round_trip_ns| ClockReading {
            offset_ns,
            round_trip_ns,
        };
        // A late answer (700 ms round trip) skews the midpoint; the median would take 350.
        let readings = [read(350, 700), read(12, 40), read(300, 600)];
        assert_eq!(tightest(&readings), read(12, 40));
        assert_eq!(tightest(&[read(5, 10), read(9, 10)]), read(5, 10));
    }

    #[test]
    fn config_reads_modes_and_rejects_unknown_keys() {
        let cfg: ClockConfig =
            serde_yaml_ng::from_str("mode: strobe\ndelta_ms: -200\nperiod: 100ms\n").unwrap();
        assert_eq!(cfg.mode, ClockMode::Strobe);
        assert_eq!(cfg.delta_ms, -200);
        assert!(serde_yaml_ng::from_str::<ClockConfig>("mode: warp\n").is_err());
        assert!(serde_yaml_ng::from_str::<ClockConfig>("delta: 5\n").is_err());
    }
}
