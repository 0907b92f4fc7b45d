//! The search against a brute-force search on thousands of small random histories: both must
//! agree, for every model. The brute force tries every order the real-time constraints allow,
//! with no memoization and none of the search's reductions, so any unsound pruning shows up.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::model::Model;
use super::models::{
    mutex::LockOp, register::RegisterOp, versioned_register::VersionedOp, FailedCas, FencedMutex,
    Mutex, Register, VersionedRegister,
};
use super::search::{search, Limits, MemoryBudget, SearchOp, Verdict};

/// Whether some order of `ops` (indefinite ones optional) satisfies `model` from `state`.
fn brute<M: Model>(
    model: &M,
    ops: &[SearchOp<M::Op>],
    state: &M::State,
    done: &mut [bool],
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
        if let Some(next) = model.step(state, &ops[i].op) {
            done[i] = true;
            let found = brute(model, ops, &next, done);
            done[i] = false;
            if found {
                return true;
            }
        }
    }
    false
}

/// Random intervals over distinct positions; about a third of the ops indefinite.
fn random_ops<O>(rng: &mut StdRng, mut op: impl FnMut(&mut StdRng) -> O) -> Vec<SearchOp<O>> {
    let n = rng.gen_range(0..=8);
    let mut positions: Vec<usize> = (0..2 * n).collect();
    for i in (1..positions.len()).rev() {
        positions.swap(i, rng.gen_range(0..=i));
    }
    (0..n)
        .map(|i| {
            let (a, b) = (positions[2 * i], positions[2 * i + 1]);
            let ret = (!rng.gen_bool(0.3)).then_some(a.max(b));
            SearchOp {
                op: op(rng),
                call: a.min(b),
                ret,
            }
        })
        .collect()
}

fn agree<M: Model>(model: &M, name: &str, op: impl Fn(&mut StdRng) -> M::Op) {
    let budget = MemoryBudget::new(usize::MAX);
    let limits = Limits {
        deadline: None,
        memory: &budget,
    };
    let mut invalid = 0;
    for seed in 0..3000 {
        let mut rng = StdRng::seed_from_u64(seed);
        let ops = random_ops(&mut rng, &op);
        let expected = brute(model, &ops, &model.init(), &mut vec![false; ops.len()]);
        let got = match search(model, &ops, model.init(), &limits) {
            Verdict::Linearizable => true,
            Verdict::Violation(_) => false,
            Verdict::Unknown(l) => panic!("{name} seed {seed}: unknown ({l:?})"),
        };
        assert_eq!(got, expected, "{name} seed {seed}: {ops:?}");
        invalid += usize::from(!expected);
    }
    assert!(
        (300..2700).contains(&invalid),
        "{name}: {invalid} of 3000 invalid, a poor mix"
    );
}

fn value(rng: &mut StdRng) -> Option<i64> {
    rng.gen_bool(0.8).then(|| rng.gen_range(0..3))
}

#[test]
fn search_agrees_with_brute_force_on_registers() {
    let ops = |rng: &mut StdRng| match rng.gen_range(0..4) {
        0 => RegisterOp::Read(value(rng)),
        1 => RegisterOp::Write(value(rng)),
        2 => RegisterOp::Cas(value(rng), value(rng)),
        _ => RegisterOp::CasMismatch(value(rng)),
    };
    agree(
        &Register::with_cas(None, FailedCas::Mismatch),
        "cas-register",
        ops,
    );
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
