//! The checker against brute force on thousands of small random histories, for every model.
//!
//! Search level: the brute force tries every order the real-time constraints allow, with no
//! memoization and none of the search's reductions, so any unsound pruning shows up: the
//! relaxed searches (a violation must be one), the exact search, crashed operations left out
//! as needless, and the failing prefix a violation names.
//!
//! History level: whole histories (invocations, ok/fail/info completions, ops never
//! completed, nil reads) through [`check_history`] against a reference written from Knossos's
//! own definitions (`knossos.model`, `knossos.history/complete`): failed operations dropped,
//! an ok operation taking its completion's value, a crashed one its invocation's and free to
//! happen or not, a nil read consistent with any state.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

use super::model::Model;
use super::models::{
    multi_register::Micro, mutex::LockOp, queue::QueueOp, register::RegisterOp,
    versioned_register::VersionedOp, FailedCas, FencedMutex, FifoQueue, MultiRegister, Mutex,
    NilRead, Register, UnorderedQueue, VersionedRegister,
};
use super::result::Validity;
use super::search::{run, search, Limits, MemoryBudget, Mode, Run, SearchOp, Verdict};
use super::{check_history, CheckOptions, ModelKind};
use crate::history::testing::{complete, history, invoke};
use crate::history::{Op, OpType, Process};

/// Whether some order of `ops` (indefinite ones optional) takes `step` from `state` through
/// all definite ones.
fn brute<O, S>(
    ops: &[SearchOp<O>],
    state: &S,
    done: &mut [bool],
    step: &impl Fn(&S, &O) -> Option<S>,
) -> bool {
    let pending = |i: usize| !done[i] && ops[i].ret.is_some();
    if !(0..ops.len()).any(pending) {
        return true;
    }
    let limit = (0..ops.len())
        .filter(|&i| pending(i))
        .filter_map(|i| ops[i].ret)
        .min()
        .unwrap_or(usize::MAX);
    for i in 0..ops.len() {
        if done[i] || ops[i].call >= limit {
            continue;
        }
        if let Some(next) = step(state, &ops[i].op) {
            done[i] = true;
            let found = brute(ops, &next, done, step);
            done[i] = false;
            if found {
                return true;
            }
        }
    }
    false
}

fn brute_model<M: Model>(model: &M, ops: &[SearchOp<M::Op>], init: &M::State) -> bool {
    brute(ops, init, &mut vec![false; ops.len()], &|s, o| {
        model.step(s, o)
    })
}

/// Random intervals over distinct positions; a share of the ops indefinite.
fn random_ops<O>(rng: &mut StdRng, mut op: impl FnMut(&mut StdRng) -> O) -> Vec<SearchOp<O>> {
    let n = rng.gen_range(0..=8);
    let crashed = [0.1, 0.3, 0.6][rng.gen_range(0..3)];
    let mut positions: Vec<usize> = (0..2 * n).collect();
    for i in (1..positions.len()).rev() {
        positions.swap(i, rng.gen_range(0..=i));
    }
    (0..n)
        .map(|i| {
            let (a, b) = (positions[2 * i], positions[2 * i + 1]);
            let ret = (!rng.gen_bool(crashed)).then_some(a.max(b));
            SearchOp {
                op: op(rng),
                call: a.min(b),
                ret,
            }
        })
        .collect()
}

/// `ops` cut at history position `end`: those invoked by then, still open then indefinite.
fn prefix<O: Clone>(ops: &[SearchOp<O>], end: usize) -> Vec<SearchOp<O>> {
    ops.iter()
        .filter(|o| o.call <= end)
        .map(|o| SearchOp {
            op: o.op.clone(),
            call: o.call,
            ret: o.ret.filter(|&r| r <= end),
        })
        .collect()
}

fn agree<M: Model>(model: &M, name: &str, op: impl Fn(&mut StdRng) -> M::Op) {
    let budget = MemoryBudget::new(usize::MAX);
    let limits = Limits {
        deadline: None,
        memory: &budget,
        steps: None,
    };
    let relaxed = match model.finitely_many_states() {
        true => Mode::Reused,
        false => Mode::Counted,
    };
    let (mut invalid, mut relaxed_proofs) = (0, 0);
    for seed in 0..4000 {
        let mut rng = StdRng::seed_from_u64(seed);
        let ops = random_ops(&mut rng, &op);
        let init = match model.any_state() {
            Some(any) if rng.gen_bool(0.2) => any,
            _ => model.init(),
        };
        let expected = brute_model(model, &ops, &init);
        invalid += usize::from(!expected);
        let exact = run(model, &ops, init.clone(), &limits, Mode::Exact);
        assert_eq!(
            matches!(exact, Run::Done(Verdict::Linearizable)),
            expected,
            "{name} seed {seed}, exact: {ops:?}"
        );
        match run(model, &ops, init.clone(), &limits, relaxed) {
            Run::Done(Verdict::Violation(_)) => {
                assert!(!expected, "{name} seed {seed}, relaxed violation: {ops:?}");
                relaxed_proofs += usize::from(ops.iter().any(|o| o.ret.is_none()));
            }
            Run::Done(Verdict::Linearizable) => {
                assert!(
                    expected,
                    "{name} seed {seed}, relaxed linearization: {ops:?}"
                )
            }
            Run::RelaxedOnly => {}
            Run::Done(Verdict::Unknown(_)) | Run::OutOfSteps(_) => panic!("no limits"),
        }
        // What the engine searches: the needless crashed operations left out.
        let needless = model.needless(&ops);
        let kept: Vec<SearchOp<M::Op>> = (0..ops.len())
            .filter(|&i| !needless[i])
            .map(|i| ops[i].clone())
            .collect();
        match search(model, &kept, init.clone(), &limits) {
            Verdict::Linearizable => assert!(expected, "{name} seed {seed}: {ops:?}"),
            Verdict::Violation(stuck) => {
                assert!(!expected, "{name} seed {seed}: {ops:?}");
                let cut = prefix(&kept, stuck.furthest);
                assert!(
                    !brute_model(model, &cut, &init),
                    "{name} seed {seed}: the prefix at {} passes: {ops:?}",
                    stuck.furthest
                );
            }
            Verdict::Unknown(l) => panic!("{name} seed {seed}: unknown ({l:?})"),
        }
    }
    assert!(
        (400..3600).contains(&invalid),
        "{name}: {invalid} of 4000 invalid, a poor mix"
    );
    assert!(
        relaxed_proofs > 20,
        "{name}: relaxed proved only {relaxed_proofs}"
    );
}

fn value(rng: &mut StdRng) -> Option<i64> {
    rng.gen_bool(0.8).then(|| rng.gen_range(0..3))
}

fn register_op(rng: &mut StdRng) -> RegisterOp {
    match rng.gen_range(0..4) {
        0 => RegisterOp::Read(value(rng)),
        1 => RegisterOp::Write(value(rng)),
        2 => RegisterOp::Cas(value(rng), value(rng)),
        _ => RegisterOp::CasMismatch(value(rng)),
    }
}

#[test]
fn search_agrees_with_brute_force_on_registers() {
    agree(
        &Register::with_cas(None, FailedCas::Mismatch, NilRead::Value),
        "cas-register",
        register_op,
    );
}

#[test]
fn needless_crashed_writes_are_found_and_dropping_them_changes_no_verdict() {
    // Without mismatches, and with more values, many crashed writes are never read.
    let m = Register::with_cas(None, FailedCas::Ignore, NilRead::Value);
    let wide = |rng: &mut StdRng| rng.gen_bool(0.9).then(|| rng.gen_range(0..6));
    let op = |rng: &mut StdRng| match rng.gen_range(0..3) {
        0 => RegisterOp::Read(wide(rng)),
        1 => RegisterOp::Write(wide(rng)),
        _ => RegisterOp::Cas(wide(rng), wide(rng)),
    };
    let mut dropped = 0;
    for seed in 0..4000 {
        let mut rng = StdRng::seed_from_u64(seed);
        let ops = random_ops(&mut rng, op);
        let needless = m.needless(&ops);
        let kept: Vec<_> = (0..ops.len())
            .filter(|&i| !needless[i])
            .map(|i| ops[i].clone())
            .collect();
        dropped += needless.iter().filter(|&&d| d).count();
        assert_eq!(
            brute_model(&m, &ops, &m.init()),
            brute_model(&m, &kept, &m.init()),
            "seed {seed}: {ops:?} needless {needless:?}"
        );
    }
    assert!(
        dropped > 1000,
        "only {dropped} crashed writes found needless"
    );
    agree(&m, "cas-register without mismatches", op);
}

#[test]
fn search_agrees_with_brute_force_on_versioned_registers() {
    let version = |rng: &mut StdRng| rng.gen_bool(0.8).then(|| rng.gen_range(0..4));
    let ops = |rng: &mut StdRng| match rng.gen_range(0..4) {
        0 => VersionedOp::Read {
            value: value(rng),
            version: version(rng),
        },
        1 => VersionedOp::Write {
            value: value(rng),
            version: version(rng),
        },
        2 => VersionedOp::Cas {
            expected: rng.gen_range(0..3),
            value: value(rng),
        },
        _ => VersionedOp::CasMismatch {
            expected: rng.gen_range(0..3),
        },
    };
    agree(
        &VersionedRegister::new(None, FailedCas::Mismatch),
        "versioned-register",
        ops,
    );
}

#[test]
fn search_agrees_with_brute_force_on_mutexes() {
    let lock = |rng: &mut StdRng| {
        if rng.gen_bool(0.5) {
            LockOp::Acquire(None)
        } else {
            LockOp::Release
        }
    };
    agree(&Mutex, "mutex", lock);
    let fenced = |rng: &mut StdRng| {
        if rng.gen_bool(0.5) {
            LockOp::Acquire(rng.gen_bool(0.8).then(|| rng.gen_range(0..5)))
        } else {
            LockOp::Release
        }
    };
    agree(&FencedMutex, "fenced-mutex", fenced);
}

#[test]
fn search_agrees_with_brute_force_on_multi_registers() {
    let micro = |rng: &mut StdRng| {
        let key = ["x", "y"][rng.gen_range(0..2)].to_string();
        match rng.gen_bool(0.5) {
            true => Micro::Read(key, value(rng)),
            false => Micro::Write(key, value(rng)),
        }
    };
    let txn = |rng: &mut StdRng| (0..rng.gen_range(1..=2)).map(|_| micro(rng)).collect();
    agree(
        &MultiRegister::new(None, NilRead::Value),
        "multi-register",
        txn,
    );
}

#[test]
fn search_agrees_with_brute_force_on_queues() {
    let op = |rng: &mut StdRng| match rng.gen_bool(0.5) {
        true => QueueOp::Enqueue(value(rng)),
        false => QueueOp::Dequeue(value(rng)),
    };
    agree(&FifoQueue, "fifo-queue", op);
    agree(&UnorderedQueue, "unordered-queue", op);
}

/// Knossos's reading of one operation: its function and value (`knossos.history/complete`),
/// and whether it returned (completed ok).
#[derive(Debug, Clone)]
struct KnossosOp {
    f: String,
    value: Value,
    returned: bool,
}

/// `knossos.model`'s step for `model`, written from its source: the next state, or `None`
/// when inconsistent. With `nil_any` false (stampede's `--nil-read value`), a nil a read
/// returned must be the register's value; a read that never returned still tells nothing.
fn knossos_step(model: &str, nil_any: bool, state: &Value, op: &KnossosOp) -> Option<Value> {
    let v = &op.value;
    let unknown = |x: &Value| x.is_null() && (nil_any || !op.returned);
    match (model, op.f.as_str()) {
        ("register" | "cas-register", "write") => Some(v.clone()),
        ("register" | "cas-register", "read") => (unknown(v) || v == state).then(|| state.clone()),
        ("cas-register", "cas") => (&v[0] == state).then(|| v[1].clone()),
        ("mutex", "acquire") => (state == &json!(false)).then_some(json!(true)),
        ("mutex", "release") => (state == &json!(true)).then_some(json!(false)),
        ("multi-register", "txn") => {
            let mut s = state.clone();
            for micro in v.as_array()? {
                let (f, k, x) = (&micro[0], micro[1].as_str()?, &micro[2]);
                let current = s.get(k).cloned().unwrap_or(Value::Null);
                match f.as_str()? {
                    "read" if unknown(x) || *x == current => {}
                    "write" => s[k] = x.clone(),
                    _ => return None,
                }
            }
            Some(s)
        }
        ("fifo-queue" | "unordered-queue", "enqueue") => {
            let mut q = state.as_array()?.clone();
            q.push(v.clone());
            Some(Value::Array(q))
        }
        ("fifo-queue", "dequeue") => {
            let mut q = state.as_array()?.clone();
            (q.first()? == v).then(|| {
                q.remove(0);
                Value::Array(q)
            })
        }
        ("unordered-queue", "dequeue") => {
            let mut q = state.as_array()?.clone();
            let at = q.iter().position(|x| x == v)?;
            q.remove(at);
            Some(Value::Array(q))
        }
        _ => panic!("no {} in {model}", op.f),
    }
}

/// A random operation of `model`: its function, invocation value and ok completion value.
fn random_call(model: &str, rng: &mut StdRng) -> (&'static str, Value, Value) {
    let v = |rng: &mut StdRng| json!(value(rng));
    match model {
        "register" | "cas-register" => match rng.gen_range(0..3) {
            0 => ("read", Value::Null, v(rng)),
            // Knossos takes an ok write's value from its completion, rarely another one.
            1 if rng.gen_bool(0.1) => ("write", v(rng), v(rng)),
            1 => ("write", v(rng), Value::Null),
            _ if model == "cas-register" => ("cas", json!([value(rng), value(rng)]), Value::Null),
            _ => ("write", v(rng), Value::Null),
        },
        "mutex" => match rng.gen_bool(0.5) {
            true => ("acquire", Value::Null, Value::Null),
            false => ("release", Value::Null, Value::Null),
        },
        "multi-register" => {
            let n = rng.gen_range(1..=2);
            let keys: Vec<&str> = (0..n).map(|_| ["x", "y"][rng.gen_range(0..2)]).collect();
            let writes: Vec<bool> = (0..n).map(|_| rng.gen_bool(0.5)).collect();
            let written: Vec<Value> = (0..n).map(|_| v(rng)).collect();
            let read: Vec<Value> = (0..n).map(|_| v(rng)).collect();
            let txn = |values: &dyn Fn(usize) -> Value| {
                Value::Array(
                    (0..n)
                        .map(|i| match writes[i] {
                            true => json!(["write", keys[i], written[i]]),
                            false => json!(["read", keys[i], values(i)]),
                        })
                        .collect(),
                )
            };
            ("txn", txn(&|_| Value::Null), txn(&|i| read[i].clone()))
        }
        _ => match rng.gen_bool(0.5) {
            true => ("enqueue", v(rng), Value::Null),
            false => ("dequeue", Value::Null, v(rng)),
        },
    }
}

/// A random history of up to four processes: each call ends ok, fail, info or never.
fn random_history(model: &str, rng: &mut StdRng) -> Vec<Op> {
    let calls = rng.gen_range(0..=7);
    let mut open: Vec<Option<(&'static str, Value, Value, &str)>> = vec![None; 4];
    let (mut invoked, mut lines) = (0, Vec::new());
    while invoked < calls || open.iter().any(Option::is_some) {
        let p = rng.gen_range(0..4);
        match open[p].take() {
            None if invoked < calls => {
                let (f, arg, result) = random_call(model, rng);
                let end = ["ok", "ok", "fail", "info"][rng.gen_range(0..4)];
                lines.push(invoke(p as u64, f, &arg.to_string()));
                open[p] = Some((f, arg, result, end));
                invoked += 1;
            }
            None => {}
            // Some calls never complete: the history ends first.
            Some(_) if invoked == calls && rng.gen_bool(0.1) => {}
            Some((f, arg, result, end)) => {
                let value = match end {
                    "ok" if !result.is_null() => result,
                    _ => arg,
                };
                lines.push(complete(p as u64, end, f, &value.to_string()));
            }
        }
    }
    history(&lines)
}

/// Knossos's verdict on `ops` for `model`, by brute force over its reading of the history.
fn knossos_verdict(model: &str, nil_any: bool, ops: &[Op]) -> bool {
    let mut calls: Vec<SearchOp<KnossosOp>> = Vec::new();
    let mut open: std::collections::HashMap<Process, usize> = Default::default();
    let mut failed = Vec::new();
    for (pos, op) in ops.iter().enumerate() {
        match op.kind {
            OpType::Invoke => {
                open.insert(op.process, calls.len());
                calls.push(SearchOp {
                    op: KnossosOp {
                        f: op.f.clone(),
                        value: op.value.clone(),
                        returned: false,
                    },
                    call: pos,
                    ret: None,
                });
            }
            OpType::Ok => {
                let i = open.remove(&op.process).expect("paired");
                calls[i].op.value = op.value.clone();
                calls[i].op.returned = true;
                calls[i].ret = Some(pos);
            }
            OpType::Fail => failed.push(open.remove(&op.process).expect("paired")),
            OpType::Info => {
                open.remove(&op.process);
            }
        }
    }
    let kept: Vec<SearchOp<KnossosOp>> = (0..calls.len())
        .filter(|i| !failed.contains(i))
        .map(|i| calls[i].clone())
        .collect();
    let init = match model {
        "mutex" => json!(false),
        "multi-register" => json!({}),
        "fifo-queue" | "unordered-queue" => json!([]),
        _ => Value::Null,
    };
    brute(&kept, &init, &mut vec![false; kept.len()], &|s, o| {
        knossos_step(model, nil_any, s, o)
    })
}

#[test]
fn whole_histories_get_knossos_verdicts_with_nil_reads_failures_and_crashes() {
    let nil_read_models = [
        ModelKind::Register,
        ModelKind::CasRegister,
        ModelKind::MultiRegister,
    ];
    let runs = nil_read_models
        .iter()
        .map(|&m| (m, NilRead::Any))
        .chain(nil_read_models.iter().map(|&m| (m, NilRead::Value)))
        .chain(
            [
                ModelKind::Mutex,
                ModelKind::FifoQueue,
                ModelKind::UnorderedQueue,
            ]
            .map(|m| (m, NilRead::Any)),
        );
    for (kind, nil_read) in runs {
        let model = kind.name();
        let opts = CheckOptions {
            model: kind,
            nil_read,
            threads: 1,
            ..CheckOptions::default()
        };
        let mut invalid = 0;
        for seed in 0..3000 {
            let mut rng = StdRng::seed_from_u64(seed);
            let ops = random_history(model, &mut rng);
            let expected = knossos_verdict(model, nil_read == NilRead::Any, &ops);
            let got = check_history(&ops, &opts).expect("well-formed").valid;
            let want = if expected {
                Validity::Valid
            } else {
                Validity::Invalid
            };
            assert_eq!(got, want, "{model} {nil_read:?} seed {seed}: {ops:#?}");
            invalid += usize::from(!expected);
        }
        assert!(
            (300..2700).contains(&invalid),
            "{model}: {invalid} of 3000 invalid, a poor mix"
        );
    }
}
