//! What a run was exposed to: the faults that took effect, read from the nemesis operations
//! of its history, so that a stored run is judged again to the same words.
//!
//! A `start-<kind>` counts when it completed without an error and acted on at least one node
//! running the database, as its kind reads its completion's value (most list the nodes as
//! `nodes`; see [`FaultKind::acted`](crate::nemesis::FaultKind::acted)). It is in effect from
//! that completion to the completion of the next `stop-<kind>`, or the end of the history.
//! Its invocation's value names its target (`{"target": "leader"}`).
//!
//! A run whose package has faults is `unknown` when a start failed (or never completed), or
//! when no fault took effect at all: it was not exposed to what it claims.
//!
//! A fault fired by a log trigger starts by arming (its start's value lists `armed` nodes, no
//! `nodes`): it takes effect only if its stop's value lists firings (`fired`, each signalled
//! `ago_ns` before the stop), and is in effect from the earliest firing. An armed trigger that
//! never fired, or was never disarmed, is a start that did not take effect. A value's
//! `shortfall` (a sequence's failed steps and unfired triggers) counts the same way.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::{Op, OpType, Process};

/// One kind of fault on one target, as the run met it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultExposure {
    /// `partition`, `kill`, `pause`, `clock` or `packet`.
    pub kind: String,
    /// The target the package gave it (`leader`, `halves`, `n3`, …), empty if not recorded.
    pub target: String,
    /// Starts that took effect.
    pub took_effect: usize,
    /// Nanoseconds during which one of them was in effect.
    pub faulted_ns: u64,
}

/// The faults of a run: which took effect, which failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exposure {
    /// Whether the run's nemesis package has faults (when unknown: whether the history has
    /// nemesis operations).
    pub planned: bool,
    /// The faults that took effect, by kind and target in the order first met.
    pub faults: Vec<FaultExposure>,
    /// Starts that failed, did not complete, or acted on no database node: `start-<kind>:
    /// why`.
    pub failed_starts: Vec<String>,
    /// All starts.
    pub starts: usize,
}

impl Exposure {
    /// Why the run cannot be called valid, if it cannot: a start that did not take effect, or
    /// a package with faults none of which did.
    pub fn shortfall(&self) -> Option<String> {
        if let Some(first) = self.failed_starts.first() {
            return Some(format!(
                "{} of {} fault starts did not take effect; first: {first}",
                self.failed_starts.len(),
                self.starts
            ));
        }
        if self.planned && self.faults.is_empty() {
            return Some(match self.starts {
                0 => "no fault took effect: none started within the run".to_string(),
                n => format!("no fault took effect in {n} starts"),
            });
        }
        None
    }

    /// What the run was exposed to, for the verdict line: `no faults`, or e.g.
    /// `3 partitions (halves, 31 s faulted), 2 kills (leader, 8 s faulted)`.
    pub fn summary(&self) -> String {
        if self.faults.is_empty() {
            return "no faults".to_string();
        }
        let mut out = String::new();
        for (i, f) in self.faults.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let noun = plural(&f.kind, f.took_effect);
            let _ = write!(out, "{} {noun} (", f.took_effect);
            if !f.target.is_empty() {
                let _ = write!(out, "{}, ", f.target);
            }
            let _ = write!(out, "{} s faulted)", f.faulted_ns.div_ceil(1_000_000_000));
        }
        out
    }
}

/// `kind` as a counted noun: `1 kill`, `2 kills`, `3 clock faults` (a kind the registry no
/// longer knows: `<kind> fault`).
fn plural(kind: &str, n: usize) -> String {
    let noun = match crate::nemesis::kind(kind) {
        Some(entry) => entry.noun(),
        None => format!("{kind} fault"),
    };
    match (n, noun.ends_with('s')) {
        (1, _) => noun,
        (_, true) => format!("{noun}es"),
        _ => format!("{noun}s"),
    }
}

/// Whether a start of `kind` says in its completion value that it acted on some database
/// node: as its kind judges it ([`FaultKind::acted`](crate::nemesis::FaultKind::acted)), or
/// for a kind the registry does not know, by the nodes it lists.
fn acted(kind: &str, value: &Value) -> bool {
    match crate::nemesis::kind(kind) {
        Some(entry) => entry.acted(value),
        None => value
            .get("nodes")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
    }
}

/// The index in `faults` of `kind` on `target`, added when first met.
fn slot(faults: &mut Vec<FaultExposure>, kind: &str, target: String) -> usize {
    match faults
        .iter()
        .position(|f| f.kind == kind && f.target == target)
    {
        Some(at) => at,
        None => {
            faults.push(FaultExposure {
                kind: kind.to_string(),
                target,
                took_effect: 0,
                faulted_ns: 0,
            });
            faults.len() - 1
        }
    }
}

/// The nodes a trigger's start armed (`n1, n2`), when its value is an arming.
fn armed_nodes(value: &Value) -> Option<String> {
    if value.get("nodes").is_some() {
        return None;
    }
    let armed = value.get("armed")?.as_array()?;
    let names: Vec<&str> = armed.iter().filter_map(Value::as_str).collect();
    Some(names.join(", "))
}

/// How long before its stop the earliest firing of a trigger signalled, if any did.
fn earliest_firing_ago(value: &Value) -> Option<u64> {
    value
        .get("fired")?
        .as_array()?
        .iter()
        .filter_map(|f| f.get("ago_ns").and_then(Value::as_u64))
        .max()
}

/// The shortfalls a value lists (a sequence's failed steps and unfired triggers).
fn shortfall_of(value: &Value) -> Vec<String> {
    value
        .get("shortfall")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads the exposure of a run from its history; `planned` says whether its nemesis package
/// has faults (`None` when unknown: then whether the history has nemesis operations).
pub fn exposure(ops: &[Op], planned: Option<bool>) -> Exposure {
    let end = ops.iter().map(|o| o.time).max().unwrap_or(0);
    let nemesis: Vec<&Op> = ops
        .iter()
        .filter(|o| o.process == Process::NEMESIS)
        .collect();
    let mut faults: Vec<FaultExposure> = Vec::new();
    let mut failed_starts = Vec::new();
    let mut starts = 0;
    // The target of the start invoked last, and the fault in effect per kind (its index in
    // `faults` and since when).
    let mut invoked: BTreeMap<&str, String> = BTreeMap::new();
    let mut active: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
    let mut open_starts: BTreeMap<&str, usize> = BTreeMap::new();
    // Triggers armed per kind: their target, the start's time and the nodes armed.
    let mut armed: BTreeMap<&str, (String, u64, String)> = BTreeMap::new();
    for op in &nemesis {
        if op.kind != OpType::Invoke {
            for why in shortfall_of(&op.value) {
                failed_starts.push(format!("{}: {why}", op.f));
            }
        }
        if let Some(kind) = op.f.strip_prefix("start-") {
            if op.kind == OpType::Invoke {
                starts += 1;
                *open_starts.entry(kind).or_default() += 1;
                let target = op.value.get("target").and_then(Value::as_str);
                invoked.insert(kind, target.unwrap_or_default().to_string());
                continue;
            }
            if let Some(n) = open_starts.get_mut(kind) {
                *n = n.saturating_sub(1);
            }
            let target = invoked.get(kind).cloned().unwrap_or_default();
            if let Some(error) = &op.error {
                failed_starts.push(format!("{}: {error}", op.f));
            } else if let Some(nodes) = armed_nodes(&op.value) {
                armed.insert(kind, (target, op.time, nodes));
            } else if op.kind == OpType::Fail || !acted(kind, &op.value) {
                failed_starts.push(format!("{}: acted on no database node", op.f));
            } else {
                let at = slot(&mut faults, kind, target);
                faults[at].took_effect += 1;
                active.entry(kind).or_insert((at, op.time));
            }
        } else if let Some(kind) = op.f.strip_prefix("stop-") {
            if op.kind == OpType::Invoke {
                continue;
            }
            if let Some((target, since, nodes)) = armed.remove(kind) {
                match earliest_firing_ago(&op.value) {
                    Some(ago) => {
                        let fired_at = op.time.saturating_sub(ago).max(since);
                        let at = slot(&mut faults, kind, target);
                        faults[at].took_effect += 1;
                        faults[at].faulted_ns += op.time.saturating_sub(fired_at);
                    }
                    None => failed_starts.push(format!(
                        "start-{kind}: trigger armed on {nodes} never fired"
                    )),
                }
                continue;
            }
            if let Some((at, since)) = active.remove(kind) {
                faults[at].faulted_ns += op.time.saturating_sub(since);
            }
        }
    }
    for (at, since) in active.into_values() {
        faults[at].faulted_ns += end.saturating_sub(since);
    }
    for (kind, (_, _, nodes)) in armed {
        failed_starts.push(format!(
            "start-{kind}: trigger armed on {nodes} never disarmed"
        ));
    }
    for (kind, open) in open_starts {
        for _ in 0..open {
            failed_starts.push(format!("start-{kind}: never completed"));
        }
    }
    Exposure {
        planned: planned.unwrap_or(!nemesis.is_empty()),
        faults,
        failed_starts,
        starts,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::history::testing::op;

    fn nemesis(index: u64, secs: u64, kind: OpType, f: &str, value: Value) -> Op {
        op(index, secs * 1_000_000_000, kind, Process::NEMESIS, f).with_value(value)
    }

    fn start(index: u64, secs: u64, kind: &str, target: &str) -> Op {
        let f = format!("start-{kind}");
        nemesis(index, secs, OpType::Invoke, &f, json!({ "target": target }))
    }

    fn done(index: u64, secs: u64, f: &str, value: Value) -> Op {
        nemesis(index, secs, OpType::Info, f, value)
    }

    #[test]
    fn faults_that_acted_are_counted_with_their_time() {
        let ops = vec![
            start(0, 1, "partition", "halves"),
            done(1, 2, "start-partition", json!({"nodes": ["n1", "n2"]})),
            nemesis(2, 12, OpType::Invoke, "stop-partition", Value::Null),
            done(3, 12, "stop-partition", json!({"healed": true})),
            start(4, 20, "kill", "leader"),
            done(5, 20, "start-kill", json!({"nodes": ["n1"]})),
            done(6, 24, "stop-kill", json!({"nodes": ["n1"]})),
            start(7, 30, "partition", "halves"),
            done(
                8,
                31,
                "start-partition",
                json!({"grudge": {"n1": ["n3"], "n3": ["n1"]}}),
            ),
            done(9, 52, "stop-partition", Value::Null),
            start(10, 60, "kill", "leader"),
            done(11, 61, "start-kill", json!({"nodes": ["n2"]})),
            done(12, 65, "read", Value::Null),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(e.shortfall(), None);
        assert_eq!(
            e.summary(),
            "2 partitions (halves, 31 s faulted), 2 kills (leader, 8 s faulted)"
        );
        assert_eq!(e.starts, 4);
    }

    #[test]
    fn a_start_that_failed_or_touched_no_server_is_a_shortfall() {
        let failed = done(1, 2, "start-kill", Value::Null)
            .with_error("target leader: no node leads right now");
        let ops = vec![
            start(0, 1, "kill", "leader"),
            failed,
            start(2, 5, "kill", "one"),
            done(3, 6, "start-kill", json!({"nodes": ["n1"]})),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(
            e.shortfall().unwrap(),
            "1 of 2 fault starts did not take effect; first: start-kill: target leader: no node \
             leads right now"
        );
        let ops = vec![
            start(0, 1, "partition", "halves"),
            done(1, 2, "start-partition", json!({"grudge": {"n1": []}})),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(
            e.failed_starts,
            ["start-partition: acted on no database node"]
        );
        let ops = vec![start(0, 1, "pause", "one")];
        assert_eq!(
            exposure(&ops, Some(true)).failed_starts,
            ["start-pause: never completed"]
        );
    }

    #[test]
    fn a_membership_change_counts_only_when_the_configuration_version_moved() {
        let change = |before: &str, after: &str| json!({"nodes": ["n3"], "version_before": before, "version_after": after});
        let ops = vec![
            start(0, 1, "reconfig", "leader"),
            done(1, 2, "start-reconfig", change("100000000", "100000004")),
            done(2, 12, "stop-reconfig", Value::Null),
            start(3, 20, "reconfig", "leader"),
            done(4, 21, "start-reconfig", change("200000007", "200000007")),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(e.summary(), "1 reconfig fault (leader, 10 s faulted)");
        assert_eq!(
            e.failed_starts,
            ["start-reconfig: acted on no database node"]
        );
    }

    #[test]
    fn a_package_whose_faults_never_came_is_a_shortfall_and_none_is_no_faults() {
        let e = exposure(&[], Some(true));
        assert_eq!(
            e.shortfall().unwrap(),
            "no fault took effect: none started within the run"
        );
        let e = exposure(&[], Some(false));
        assert_eq!(e.shortfall(), None);
        assert_eq!(e.summary(), "no faults");
        assert_eq!(exposure(&[], None).shortfall(), None);
    }

    #[test]
    fn a_trigger_counts_from_its_firing_and_an_unfired_one_is_a_shortfall() {
        let armed = json!({"armed": ["n1", "n2"], "trigger": {"pattern": "NEWLEADER"}});
        let fired = json!({"armed": ["n1", "n2"], "nodes": ["n2"],
            "fired": [{"node": "n2", "line": "x", "ago_ns": 3_000_000_000u64}]});
        let ops = vec![
            start(0, 1, "kill", "all on /NEWLEADER/"),
            done(1, 2, "start-kill", armed.clone()),
            done(2, 12, "stop-kill", fired),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(e.shortfall(), None);
        assert_eq!(e.summary(), "1 kill (all on /NEWLEADER/, 3 s faulted)");
        let never = json!({"armed": ["n1", "n2"], "nodes": [], "fired": []});
        let ops = vec![
            start(0, 1, "kill", "all on /NEWLEADER/"),
            done(1, 2, "start-kill", armed.clone()),
            done(2, 12, "stop-kill", never),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(
            e.failed_starts,
            ["start-kill: trigger armed on n1, n2 never fired"]
        );
        assert!(e.summary() == "no faults" && e.shortfall().is_some());
        let ops = vec![
            start(0, 1, "pause", "one on /x/"),
            done(1, 2, "start-pause", armed),
        ];
        assert_eq!(
            exposure(&ops, Some(true)).failed_starts,
            ["start-pause: trigger armed on n1, n2 never disarmed"]
        );
    }

    #[test]
    fn a_triggered_partition_or_power_loss_counts_only_when_it_fired() {
        let armed = json!({"armed": ["n1", "n2", "n3"], "trigger": {"pattern": "NEWLEADER"}});
        let cut = json!({"armed": ["n1", "n2", "n3"], "nodes": ["n2"],
            "fired": [{"node": "n2", "acted_ns": 1, "ago_ns": 4_000_000_000u64}]});
        let unfired = json!({"armed": ["n1", "n2", "n3"], "nodes": [], "fired": []});
        let failed = json!({"armed": ["n1"], "nodes": ["n1"], "fired": [],
            "shortfall": ["n1: killed, but the layer did not lose: connection refused"]});
        let ops = vec![
            start(0, 1, "partition", "all on /NEWLEADER/"),
            done(1, 2, "start-partition", armed.clone()),
            done(2, 12, "stop-partition", cut),
            start(3, 20, "partition", "all on /NEWLEADER/"),
            done(4, 21, "start-partition", armed.clone()),
            done(5, 30, "stop-partition", unfired),
            start(6, 40, "lose-unfsynced", "one on /NEWLEADER/"),
            done(7, 41, "start-lose-unfsynced", armed),
            done(8, 50, "stop-lose-unfsynced", failed),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(e.summary(), "1 partition (all on /NEWLEADER/, 4 s faulted)");
        assert_eq!(
            e.failed_starts,
            [
                "start-partition: trigger armed on n1, n2, n3 never fired",
                "stop-lose-unfsynced: n1: killed, but the layer did not lose: connection refused",
                "start-lose-unfsynced: trigger armed on n1, n2, n3 never fired"
            ]
        );
    }

    #[test]
    fn a_sequence_with_a_shortfall_did_not_fully_take_effect() {
        let value = json!({"nodes": ["n1"], "steps": [],
            "shortfall": ["step 3 (kill on all on /NEWLEADER/): trigger armed on n1 never fired"]});
        let ops = vec![
            start(0, 1, "sequence", ""),
            done(1, 30, "start-sequence", value),
            done(
                2,
                32,
                "stop-sequence",
                json!({"healed": [], "shortfall": []}),
            ),
        ];
        let e = exposure(&ops, Some(true));
        assert_eq!(e.summary(), "1 sequence fault (2 s faulted)");
        assert_eq!(
            e.shortfall().unwrap(),
            "1 of 1 fault starts did not take effect; first: start-sequence: step 3 (kill on all \
             on /NEWLEADER/): trigger armed on n1 never fired"
        );
    }

    #[test]
    fn kinds_are_counted_nouns() {
        assert_eq!(plural("kill", 1), "kill");
        assert_eq!(plural("pause", 2), "pauses");
        assert_eq!(plural("clock", 3), "clock faults");
        assert_eq!(plural("packet", 1), "packet fault");
        assert_eq!(plural("one-way-partition", 2), "one-way partitions");
        assert_eq!(plural("flood", 2), "flood faults", "a kind no longer known");
    }

    #[test]
    fn each_kind_judges_its_own_value_and_an_unknown_kind_counts_by_nodes() {
        let judged = |kind: &str, value: Value| {
            let f = format!("start-{kind}");
            let ops = vec![start(0, 1, kind, "one"), done(1, 2, &f, value)];
            exposure(&ops, Some(true)).faults.len() == 1
        };
        // A slow partition's map counts for a packet fault, not for a kill.
        assert!(judged("packet", json!({"slow": {"n1": ["n2"]}})));
        assert!(!judged("kill", json!({"slow": {"n1": ["n2"]}})));
        assert!(judged("partition", json!({"grudge": {"n1": ["n2"]}})));
        assert!(!judged(
            "partition",
            json!({"nodes": [], "grudge": {"n1": ["n2"]}})
        ));
        assert!(judged(
            "one-way-partition",
            json!({"nodes": ["n1"], "unheard": ["n2"]})
        ));
        assert!(judged("flood", json!({"nodes": ["n1"]})));
        assert!(!judged("flood", json!({"grudge": {"n1": ["n2"]}})));
    }
}
