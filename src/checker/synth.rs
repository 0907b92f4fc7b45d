//! Seeded synthetic histories from a simulated linearizable register, for benchmarks and
//! property tests.
//!
//! [`generate`] runs `processes` clients against an in-memory register per key. Each step picks
//! a random client: an idle one invokes a new operation; a busy one either makes its operation
//! take effect atomically (the linearization point, somewhere between invocation and
//! completion) or, once it took effect, completes it. A crashing operation completes as `info`,
//! either before or after it took effect, and its client is replaced by a fresh process id, as
//! stampede's own processes are. Every history it produces is therefore linearizable;
//! [`corrupt_one_read`] makes an invalid twin. Histories follow stampede's register
//! conventions (see `history`), with zxids, so any checker of them can use this generator.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use crate::history::{Op, OpType, Process};

/// Which register the simulated clients use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// A ZooKeeper data node: reads and writes report versions, cas is `[expected_version, new]`
    /// (check with `versioned-register`).
    Versioned,
    /// A plain value register: cas is `[old_value, new]` (check with `cas-register`, or with
    /// `register` when `cas_share` is 0).
    Plain,
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Seed of the random generator: the same config gives the same history.
    pub seed: u64,
    /// Operations to invoke.
    pub ops: usize,
    /// Independent keys, named "0", "1", ...
    pub keys: usize,
    /// Concurrent clients.
    pub processes: usize,
    /// Chance that an operation crashes (completes as `info`).
    pub info_rate: f64,
    /// Whether reads crash too, or only writes and cas.
    pub info_reads: bool,
    /// Relative weights of read, write and cas.
    pub mix: [u32; 3],
    /// Values written are drawn from `0..range`; `None`: every write a fresh value.
    pub value_range: Option<i64>,
    /// The register kind.
    pub flavor: Flavor,
}

impl Default for SynthConfig {
    fn default() -> SynthConfig {
        SynthConfig {
            seed: 0,
            ops: 1000,
            keys: 1,
            processes: 5,
            info_rate: 0.05,
            info_reads: true,
            mix: [2, 2, 1],
            value_range: Some(5),
            flavor: Flavor::Versioned,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Node {
    value: Option<i64>,
    version: i32,
    mzxid: i64,
}

struct Pending {
    key: usize,
    f: &'static str,
    arg: Value,
    crash: Option<bool>,
    /// The result once it took effect: (ok?, value, version, zxid).
    effect: Option<(bool, Value, i32, i64)>,
}

/// Generates a linearizable history as described in the module documentation.
pub fn generate(cfg: &SynthConfig) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(cfg.seed);
    let keys = cfg.keys.max(1);
    let mut nodes = vec![
        Node {
            value: None,
            version: 0,
            mzxid: 0
        };
        keys
    ];
    let mut slots: Vec<(u64, Option<Pending>)> = (0..cfg.processes.max(1) as u64)
        .map(|p| (p, None))
        .collect();
    let mut next_pid = slots.len() as u64;
    let mut invoked = 0;
    let mut zxid = 0i64;
    let mut fresh = 0i64;
    let mut out: Vec<Op> = Vec::with_capacity(cfg.ops * 2);
    let total: u32 = cfg.mix.iter().sum::<u32>().max(1);
    while invoked < cfg.ops || slots.iter().any(|s| s.1.is_some()) {
        let slot = rng.gen_range(0..slots.len());
        let (pid, pending) = &mut slots[slot];
        let Some(p) = pending else {
            if invoked == cfg.ops {
                continue;
            }
            invoked += 1;
            let key = rng.gen_range(0..keys);
            let pick = rng.gen_range(0..total);
            let f = if pick < cfg.mix[0] {
                "read"
            } else if pick < cfg.mix[0] + cfg.mix[1] {
                "write"
            } else {
                "cas"
            };
            let v = draw(&mut rng, cfg.value_range, &mut fresh);
            let arg = match (f, cfg.flavor) {
                ("read", _) => Value::Null,
                ("write", _) => json!(v),
                (_, Flavor::Versioned) => {
                    json!([(nodes[key].version - rng.gen_range(0..2)).max(0), v])
                }
                (_, Flavor::Plain) => {
                    let old = if rng.gen_bool(0.5) {
                        nodes[key].value
                    } else {
                        Some(draw(&mut rng, cfg.value_range, &mut fresh))
                    };
                    json!([old, v])
                }
            };
            let crashes = (f != "read" || cfg.info_reads) && rng.gen_bool(cfg.info_rate);
            let crash = crashes.then(|| rng.gen_bool(0.5));
            push(&mut out, OpType::Invoke, *pid, f, arg.clone(), key, None);
            *pending = Some(Pending {
                key,
                f,
                arg,
                crash,
                effect: None,
            });
            continue;
        };
        match (p.effect.clone(), p.crash) {
            (None, Some(false)) | (Some(_), Some(true)) => {
                push(
                    &mut out,
                    OpType::Info,
                    *pid,
                    p.f,
                    p.arg.clone(),
                    p.key,
                    None,
                );
                *pending = None;
                *pid = next_pid;
                next_pid += 1;
            }
            (None, _) => {
                let node = &mut nodes[p.key];
                p.effect = Some(apply(node, p.f, &p.arg, cfg.flavor, &mut zxid));
            }
            (Some((ok, value, version, mzxid)), _) => {
                let kind = if ok { OpType::Ok } else { OpType::Fail };
                let meta = ok.then_some((version, mzxid));
                push(&mut out, kind, *pid, p.f, value, p.key, meta);
                *pending = None;
            }
        }
    }
    out
}

/// A value to write: from `0..range`, or a fresh one.
fn draw(rng: &mut StdRng, range: Option<i64>, fresh: &mut i64) -> i64 {
    match range {
        Some(r) => rng.gen_range(0..r.max(1)),
        None => {
            *fresh += 1;
            *fresh
        }
    }
}

fn apply(
    node: &mut Node,
    f: &str,
    arg: &Value,
    flavor: Flavor,
    zxid: &mut i64,
) -> (bool, Value, i32, i64) {
    let mut set = |node: &mut Node, value: Option<i64>| {
        *zxid += 1;
        *node = Node {
            value,
            version: node.version + 1,
            mzxid: *zxid,
        };
    };
    match f {
        "read" => (true, json!(node.value), node.version, node.mzxid),
        "write" => {
            set(node, arg.as_i64());
            (true, arg.clone(), node.version, node.mzxid)
        }
        _ => {
            let ok = match flavor {
                Flavor::Versioned => arg[0].as_i64() == Some(node.version as i64),
                Flavor::Plain => arg[0].as_i64() == node.value,
            };
            if ok {
                set(node, arg[1].as_i64());
            }
            (ok, arg.clone(), node.version, node.mzxid)
        }
    }
}

fn push(
    out: &mut Vec<Op>,
    kind: OpType,
    pid: u64,
    f: &str,
    value: Value,
    key: usize,
    meta: Option<(i32, i64)>,
) {
    let index = out.len() as u64;
    out.push(Op {
        index,
        time: index * 1000,
        kind,
        process: Process::Client(pid),
        f: f.to_string(),
        value,
        key: Some(key.to_string()),
        node: None,
        error: match kind {
            OpType::Fail => Some("BadVersion".to_string()),
            OpType::Info => Some("ConnectionLoss".to_string()),
            _ => None,
        },
        zxid: meta.map(|m| m.1),
        version: meta.map(|m| m.0),
    });
}

/// Makes one `ok` read (chosen by `seed`) return a value no write produced (-1); returns the
/// index of the corrupted op, or `None` when the history has no `ok` read.
pub fn corrupt_one_read(ops: &mut [Op], seed: u64) -> Option<usize> {
    let reads: Vec<usize> = (0..ops.len())
        .filter(|&i| ops[i].kind == OpType::Ok && ops[i].f == "read")
        .collect();
    if reads.is_empty() {
        return None;
    }
    let at = reads[StdRng::seed_from_u64(seed).gen_range(0..reads.len())];
    ops[at].value = json!(-1);
    Some(at)
}

/// Makes one `ok` read (chosen by `seed`) stale: it returns what an earlier `ok` write or cas
/// `w1` of its key wrote (with `w1`'s version), although another `ok` write or cas `w2` of that
/// key, invoked after `w1` completed, completed before the read was invoked. With unique values
/// (`value_range: None`) nothing else can have written that value again, so the history is
/// not linearizable. Returns the index of the read, or `None` when no read has such a pair.
pub fn make_one_read_stale(ops: &mut [Op], seed: u64) -> Option<usize> {
    /// A completed `ok` write or cas.
    struct Update {
        invoked: usize,
        completed: usize,
        value: Value,
        version: Option<i32>,
    }
    let mut invoked_at: HashMap<u64, usize> = HashMap::new();
    let mut updates: HashMap<Option<&str>, Vec<Update>> = HashMap::new();
    // Reads with a stale value available: (read completion, value, version).
    let mut candidates: Vec<(usize, Value, Option<i32>)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let Process::Client(p) = op.process else {
            continue;
        };
        if op.kind == OpType::Invoke {
            invoked_at.insert(p, i);
            continue;
        }
        if op.kind != OpType::Ok {
            continue;
        }
        let invoked = invoked_at[&p];
        let updates = updates.entry(op.key.as_deref()).or_default();
        let written = match op.f.as_str() {
            "write" => op.value.clone(),
            "cas" => op.value[1].clone(),
            _ => {
                let before = updates.iter().filter(|u| u.completed < invoked);
                let Some(w2) = before.clone().max_by_key(|u| u.completed) else {
                    continue;
                };
                let stale = before
                    .filter(|w1| w1.completed < w2.invoked)
                    .filter(|w1| w1.value != op.value && w1.value != w2.value)
                    .max_by_key(|w1| w1.completed);
                if let Some(w1) = stale {
                    candidates.push((i, w1.value.clone(), w1.version));
                }
                continue;
            }
        };
        updates.push(Update {
            invoked,
            completed: i,
            value: written,
            version: op.version,
        });
    }
    if candidates.is_empty() {
        return None;
    }
    let (at, value, version) =
        candidates.swap_remove(StdRng::seed_from_u64(seed).gen_range(0..candidates.len()));
    ops[at].value = value;
    ops[at].version = version;
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_history_and_every_invocation_completes_or_crashes() {
        let cfg = SynthConfig {
            ops: 300,
            keys: 3,
            ..SynthConfig::default()
        };
        let a = generate(&cfg);
        assert_eq!(a, generate(&cfg));
        let invokes = a.iter().filter(|o| o.kind == OpType::Invoke).count();
        assert_eq!(invokes, 300);
        assert_eq!(a.len(), 600, "each invocation has exactly one completion");
        assert!(a.iter().any(|o| o.kind == OpType::Info));
        assert!(a.iter().any(|o| o.kind == OpType::Fail && o.f == "cas"));
    }
}
