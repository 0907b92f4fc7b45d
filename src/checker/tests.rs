//! Scenario tests of the whole check: fixtures, engine edge cases, limits, counterexamples,
//! and the property test over synthetic histories.

use std::time::Duration;

use proptest::prelude::*;

use super::calls::{pair, Call};
use super::engine::{check_keys, RunLimits};
use super::formats::jsonl;
use super::model::{Model, Prepared};
use super::models::register::RegisterOp;
use super::models::FailedCas;
use super::models::{Known, NilRead, Register};
use super::result::Validity;
use super::synth::{corrupt_one_read, generate, make_one_read_stale, Flavor, SynthConfig};
use super::{check_history, CheckOptions, ModelKind};
use crate::history::testing::{complete, history, invoke};
use crate::history::Op;

fn opts(model: ModelKind) -> CheckOptions {
    CheckOptions {
        model,
        time_limit: Some(Duration::from_secs(20)),
        ..CheckOptions::default()
    }
}

fn verdict(ops: &[Op], o: &CheckOptions) -> Validity {
    check_history(ops, o).expect("history is well formed").valid
}

macro_rules! fixture {
    ($dir:literal, $name:literal) => {
        jsonl::parse(include_str!(concat!(
            "../../tests/fixtures/checker/",
            $dir,
            "/",
            $name,
            ".jsonl"
        )))
        .expect("fixture parses")
    };
}

#[test]
fn versioned_register_anomalies_are_invalid_and_their_twins_valid() {
    let o = opts(ModelKind::VersionedRegister);
    let invalid = [
        fixture!("versioned-register", "invalid-stale-read"),
        fixture!("versioned-register", "invalid-lost-write"),
        fixture!("versioned-register", "invalid-cas-on-wrong-version"),
        fixture!("versioned-register", "invalid-read-of-unwritten-value"),
        fixture!(
            "versioned-register",
            "invalid-read-before-info-write-invoked"
        ),
        fixture!(
            "versioned-register",
            "invalid-acknowledged-write-never-seen"
        ),
        fixture!(
            "versioned-register",
            "invalid-two-info-writes-seen-in-impossible-order"
        ),
        fixture!("versioned-register", "invalid-process-reused-after-crash"),
    ];
    for (i, h) in invalid.iter().enumerate() {
        assert_eq!(verdict(h, &o), Validity::Invalid, "invalid fixture #{i}");
    }
    let valid = [
        fixture!("versioned-register", "valid-read-concurrent-with-write"),
        fixture!("versioned-register", "valid-write-kept"),
        fixture!("versioned-register", "valid-cas-on-current-version"),
        fixture!("versioned-register", "valid-read-of-written-value"),
        fixture!("versioned-register", "valid-info-write-that-happened"),
        fixture!("versioned-register", "valid-info-write-that-never-happened"),
        fixture!("versioned-register", "valid-one-of-two-info-writes"),
        fixture!("versioned-register", "valid-process-reused-after-crash"),
        fixture!("versioned-register", "valid-open-write-at-end"),
    ];
    for (i, h) in valid.iter().enumerate() {
        assert_eq!(verdict(h, &o), Validity::Valid, "valid fixture #{i}");
    }
}

#[test]
fn failed_cas_tells_nothing_or_a_mismatch() {
    let h = fixture!(
        "cas-register-failed-cas-mismatch",
        "invalid-failed-cas-while-value-matched"
    );
    let ignore = opts(ModelKind::CasRegister);
    let mismatch = CheckOptions {
        failed_cas: FailedCas::Mismatch,
        ..ignore.clone()
    };
    assert_eq!(verdict(&h, &ignore), Validity::Valid);
    assert_eq!(verdict(&h, &mismatch), Validity::Invalid);
    let h = fixture!(
        "cas-register-failed-cas-mismatch",
        "valid-failed-cas-concurrent-with-change"
    );
    assert_eq!(verdict(&h, &mismatch), Validity::Valid);
    // The same two readings for a data node's version.
    let h = history(&[
        invoke(1, "write", "1"),
        complete(1, "ok", "write", "1").with_version(1),
        invoke(2, "cas", "[1, 9]"),
        complete(2, "fail", "cas", "[1, 9]"),
    ]);
    let v = opts(ModelKind::VersionedRegister);
    assert_eq!(verdict(&h, &v), Validity::Valid);
    assert_eq!(
        verdict(
            &h,
            &CheckOptions {
                failed_cas: FailedCas::Mismatch,
                ..v
            }
        ),
        Validity::Invalid
    );
}

#[test]
fn empty_and_single_op_histories() {
    for model in ModelKind::ALL {
        assert_eq!(
            verdict(&[], &opts(model)),
            Validity::Valid,
            "{}",
            model.name()
        );
    }
    let o = opts(ModelKind::CasRegister);
    let read_nil = history(&[invoke(1, "read", "null"), complete(1, "ok", "read", "null")]);
    assert_eq!(verdict(&read_nil, &o), Validity::Valid);
    let read_2 = history(&[invoke(1, "read", "null"), complete(1, "ok", "read", "2")]);
    assert_eq!(verdict(&read_2, &o), Validity::Invalid);
    assert_eq!(
        verdict(
            &read_2,
            &CheckOptions {
                initial: Some(2),
                ..o.clone()
            }
        ),
        Validity::Valid
    );
    let lone_invoke = history(&[invoke(1, "write", "4")]);
    assert_eq!(verdict(&lone_invoke, &o), Validity::Valid);
    let timed_out_read = history(&[invoke(1, "read", "null"), complete(1, "info", "read", "7")]);
    assert_eq!(
        verdict(&timed_out_read, &o),
        Validity::Valid,
        "a read that ended in info is dropped"
    );
}

#[test]
fn info_cas_may_fail_to_apply_without_blocking_the_search() {
    // A crashed cas whose expected value never held must simply not have happened.
    let h = history(&[
        invoke(1, "cas", "[5, 6]"),
        complete(1, "info", "cas", "null"),
        invoke(2, "write", "1"),
        complete(2, "ok", "write", "1"),
        invoke(2, "read", "null"),
        complete(2, "ok", "read", "1"),
    ]);
    assert_eq!(verdict(&h, &opts(ModelKind::CasRegister)), Validity::Valid);
}

#[test]
fn keys_are_checked_independently() {
    let h = history(&[
        invoke(1, "write", "1").with_key("a"),
        complete(1, "ok", "write", "1")
            .with_key("a")
            .with_version(1),
        invoke(2, "read", "null").with_key("b"),
        complete(2, "ok", "read", "1").with_key("b").with_version(1),
        invoke(3, "read", "null").with_key("a"),
        complete(3, "ok", "read", "1").with_key("a").with_version(1),
    ]);
    let r = check_history(&h, &opts(ModelKind::VersionedRegister)).unwrap();
    assert_eq!(r.valid, Validity::Invalid);
    assert_eq!(r.keys["a"].valid, Validity::Valid);
    assert_eq!(r.keys["b"].valid, Validity::Invalid);
    assert_eq!(r.keys["a"].ops, 2);
    assert_eq!(r.counts["read"].ok, 2);
    assert_eq!(r.counts["write"].ok, 1);
}

#[test]
fn malformed_ops_are_errors_naming_the_op() {
    let h = history(&[
        invoke(1, "write", "\"x\""),
        complete(1, "ok", "write", "\"x\""),
    ]);
    let e = check_history(&h, &opts(ModelKind::Register))
        .unwrap_err()
        .to_string();
    assert!(e.contains("op 0") && e.contains("not an integer"), "{e}");
    let h = history(&[
        invoke(1, "cas", "[1, 2]"),
        complete(1, "ok", "cas", "[1, 2]"),
    ]);
    let e = check_history(&h, &opts(ModelKind::Register))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no operation \"cas\""), "{e}");
}

#[test]
fn counterexample_shrinks_to_the_failing_window() {
    // Fifty good write/read pairs, then a stale read, then fifty more good pairs.
    let mut lines = Vec::new();
    let mut version = 0;
    let mut pair = |lines: &mut Vec<Op>, v: i64| {
        version += 1;
        lines.push(invoke(1, "write", &v.to_string()));
        lines.push(complete(1, "ok", "write", &v.to_string()).with_version(version));
        lines.push(invoke(2, "read", "null"));
        lines.push(complete(2, "ok", "read", &v.to_string()).with_version(version));
    };
    for v in 0..50 {
        pair(&mut lines, v);
    }
    lines.push(invoke(3, "read", "null"));
    lines.push(complete(3, "ok", "read", "48").with_version(49));
    for v in 50..100 {
        pair(&mut lines, v);
    }
    let h = history(&lines);
    let r = check_history(&h, &opts(ModelKind::VersionedRegister)).unwrap();
    let cx = r.keys[""]
        .counterexample
        .as_ref()
        .expect("a counterexample");
    assert!(cx.from_any_state);
    assert!(cx.window.len() <= 3, "window: {:?}", cx.window);
    assert!(
        cx.window.iter().any(|op| op.index == 200),
        "the stale read is in the window"
    );
    assert!(cx.window.iter().any(|op| op.index == cx.blocked.index));
    assert!(
        cx.window.iter().all(|op| op.index >= 190),
        "window: {:?}",
        cx.window
    );
    assert!(r.render().contains("NOT linearizable"));
}

#[test]
fn limits_give_unknown_never_a_wrong_verdict() {
    // Thirty overlapping writes, then a read of a value none wrote: the search must try every
    // order of the writes before it can say no, which takes far longer than the limits allow.
    let mut lines: Vec<Op> = (0..30)
        .map(|p| invoke(p, "write", &p.to_string()))
        .collect();
    lines.extend((0..30).map(|p| complete(p, "ok", "write", &p.to_string())));
    lines.push(invoke(99, "read", "null"));
    lines.push(complete(99, "ok", "read", "-1"));
    let h = history(&lines);
    let o = CheckOptions {
        time_limit: Some(Duration::from_millis(200)),
        ..opts(ModelKind::Register)
    };
    let r = check_history(&h, &o).unwrap();
    assert_eq!(r.valid, Validity::Unknown);
    assert!(r.keys[""].reason.as_deref().unwrap().contains("time"));
    let o = CheckOptions {
        memory_limit: 1 << 20,
        ..opts(ModelKind::Register)
    };
    let r = check_history(&h, &o).unwrap();
    assert_eq!(r.valid, Validity::Unknown);
    assert!(r.keys[""].reason.as_deref().unwrap().contains("memory"));
    assert!(r.verdict_line().starts_with("verdict: unknown"));
}

#[test]
fn synthetic_histories_of_every_flavor_check() {
    for (flavor, model) in [
        (Flavor::Versioned, ModelKind::VersionedRegister),
        (Flavor::Plain, ModelKind::CasRegister),
    ] {
        let cfg = SynthConfig {
            seed: 3,
            ops: 2000,
            keys: 20,
            processes: 8,
            flavor,
            ..SynthConfig::default()
        };
        let mut h = generate(&cfg);
        assert_eq!(verdict(&h, &opts(model)), Validity::Valid, "{flavor:?}");
        corrupt_one_read(&mut h, 3).unwrap();
        assert_eq!(verdict(&h, &opts(model)), Validity::Invalid, "{flavor:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Histories of a simulated linearizable register are valid; one read corrupted to a value
    /// no write produced makes them invalid.
    #[test]
    fn simulated_register_histories_are_valid_and_corrupted_ones_invalid(
        seed in any::<u64>(),
        ops in 1usize..120,
        keys in 1usize..4,
        processes in 1usize..7,
        info_rate in 0.0f64..0.3,
        versioned in any::<bool>(),
        unique in any::<bool>(),
        failed_cas_mismatch in any::<bool>(),
    ) {
        let flavor = if versioned { Flavor::Versioned } else { Flavor::Plain };
        let model = if versioned { ModelKind::VersionedRegister } else { ModelKind::CasRegister };
        let cfg = SynthConfig {
            seed, ops, keys, processes, info_rate, flavor,
            value_range: if unique { None } else { Some(4) },
            ..SynthConfig::default()
        };
        let failed_cas = if failed_cas_mismatch { FailedCas::Mismatch } else { FailedCas::Ignore };
        let o = CheckOptions { failed_cas, ..opts(model) };
        let mut h = generate(&cfg);
        prop_assert_eq!(verdict(&h, &o), Validity::Valid);
        let mut stale = h.clone();
        if corrupt_one_read(&mut h, seed).is_some() {
            prop_assert_eq!(verdict(&h, &o), Validity::Invalid);
        }
        // With unique values, a read of an overwritten value cannot be explained.
        if unique && make_one_read_stale(&mut stale, seed).is_some() {
            prop_assert_eq!(verdict(&stale, &o), Validity::Invalid);
        }
    }
}

/// Two registers behind one key, told apart by the parity of the values written and read.
struct ParityRegisters;

impl Model for ParityRegisters {
    type Op = RegisterOp;
    type State = Known<Option<i64>>;

    fn init(&self) -> Self::State {
        Known::Is(None)
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<RegisterOp>, String> {
        Register::plain(None, NilRead::Value).prepare(call)
    }

    fn step(&self, state: &Self::State, op: &RegisterOp) -> Option<Self::State> {
        Register::plain(None, NilRead::Value).step(state, op)
    }

    fn part(&self, op: &RegisterOp) -> u64 {
        match op {
            RegisterOp::Read(v) | RegisterOp::Write(v) => v.unwrap_or(0).rem_euclid(2) as u64,
            RegisterOp::Cas(..) | RegisterOp::CasMismatch(_) => 0,
        }
    }
}

#[test]
fn a_model_declared_partition_is_checked_part_by_part() {
    let h = history(&[
        invoke(1, "write", "1"),
        complete(1, "ok", "write", "1"),
        invoke(1, "write", "2"),
        complete(1, "ok", "write", "2"),
        invoke(2, "read", "null"),
        complete(2, "ok", "read", "1"),
    ]);
    let calls = pair(&h).unwrap();
    let limits = RunLimits {
        deadline: None,
        memory: 1 << 30,
        threads: 2,
        shrink: true,
    };
    let whole = check_keys(&Register::plain(None, NilRead::Value), &calls, &limits).unwrap();
    assert_eq!(
        whole[""].valid,
        Validity::Invalid,
        "one register: the read of 1 is stale"
    );
    let parts = check_keys(&ParityRegisters, &calls, &limits).unwrap();
    assert_eq!(
        parts[""].valid,
        Validity::Valid,
        "odd values live in their own register"
    );
}
