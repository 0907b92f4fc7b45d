//! Linearizability of a whole history: options, the model to use, and the verdict.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::time::{Duration, Instant};

use super::calls::{self, Outcome};
use super::engine::{check_keys, RunLimits};
use super::models::{
    FailedCas, FencedMutex, FifoQueue, MultiRegister, Mutex, NilRead, Register, UnorderedQueue,
    VersionedRegister,
};
use super::result::{CheckResult, Counts, Validity};
use crate::history::{Op, OpType, Process};

/// The models `--model` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// Read and write of integers or nil (Knossos's register).
    Register,
    /// Read, write and cas `[old, new]` by value (Knossos's cas-register).
    CasRegister,
    /// Transactions of reads and writes over registers named by keys (Knossos's).
    MultiRegister,
    /// ZooKeeper's data node: values with data versions, cas by version.
    VersionedRegister,
    /// Acquire and release (Knossos's mutex).
    Mutex,
    /// Acquire (returning a strictly growing token) and release.
    FencedMutex,
    /// Enqueue and dequeue, oldest first (Knossos's fifo-queue).
    FifoQueue,
    /// Enqueue and dequeue in any order (Knossos's unordered-queue).
    UnorderedQueue,
}

impl ModelKind {
    /// Every model, in the order `--help` lists them.
    pub const ALL: [ModelKind; 8] = [
        ModelKind::Register,
        ModelKind::CasRegister,
        ModelKind::MultiRegister,
        ModelKind::VersionedRegister,
        ModelKind::Mutex,
        ModelKind::FencedMutex,
        ModelKind::FifoQueue,
        ModelKind::UnorderedQueue,
    ];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Register => "register",
            ModelKind::CasRegister => "cas-register",
            ModelKind::MultiRegister => "multi-register",
            ModelKind::VersionedRegister => "versioned-register",
            ModelKind::Mutex => "mutex",
            ModelKind::FencedMutex => "fenced-mutex",
            ModelKind::FifoQueue => "fifo-queue",
            ModelKind::UnorderedQueue => "unordered-queue",
        }
    }
}

impl FromStr for ModelKind {
    type Err = String;

    fn from_str(s: &str) -> Result<ModelKind, String> {
        ModelKind::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = ModelKind::ALL.iter().map(|m| m.name()).collect();
                format!("unknown model {s:?}: expected one of {}", names.join(", "))
            })
    }
}

/// How to check a history.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The model to check against.
    pub model: ModelKind,
    /// What a failed cas tells.
    pub failed_cas: FailedCas,
    /// What a read that returned nil tells (register, cas-register, multi-register).
    pub nil_read: NilRead,
    /// The register's initial value (nil by default).
    pub initial: Option<i64>,
    /// Give up with `unknown` after this long.
    pub time_limit: Option<Duration>,
    /// Bytes the search caches may hold together before giving up with `unknown`.
    pub memory_limit: usize,
    /// Worker threads; 0 = one per core.
    pub threads: usize,
    /// Shrink each invalid key to a smallest failing window.
    pub shrink: bool,
}

impl Default for CheckOptions {
    fn default() -> CheckOptions {
        CheckOptions {
            model: ModelKind::VersionedRegister,
            failed_cas: FailedCas::Ignore,
            nil_read: NilRead::Value,
            initial: None,
            time_limit: Some(Duration::from_secs(60)),
            memory_limit: 4 << 30,
            threads: 0,
            shrink: true,
        }
    }
}

/// Checks a history for linearizability against `opts.model`, key by key.
///
/// Errors (naming the op's index) when the history is malformed: a completion without an
/// invocation, or an operation the model cannot read.
pub fn check_history(ops: &[Op], opts: &CheckOptions) -> anyhow::Result<CheckResult> {
    let start = Instant::now();
    let calls = calls::pair(ops)?;
    let limits = RunLimits {
        deadline: opts.time_limit.map(|t| start + t),
        memory: opts.memory_limit,
        threads: opts.threads,
        shrink: opts.shrink,
    };
    let keys = match opts.model {
        ModelKind::Register => check_keys(
            &Register::plain(opts.initial, opts.nil_read),
            &calls,
            &limits,
        )?,
        ModelKind::CasRegister => check_keys(
            &Register::with_cas(opts.initial, opts.failed_cas, opts.nil_read),
            &calls,
            &limits,
        )?,
        ModelKind::MultiRegister => check_keys(
            &MultiRegister::new(opts.initial, opts.nil_read),
            &calls,
            &limits,
        )?,
        ModelKind::VersionedRegister => check_keys(
            &VersionedRegister::new(opts.initial, opts.failed_cas),
            &calls,
            &limits,
        )?,
        ModelKind::Mutex => check_keys(&Mutex, &calls, &limits)?,
        ModelKind::FencedMutex => check_keys(&FencedMutex, &calls, &limits)?,
        ModelKind::FifoQueue => check_keys(&FifoQueue, &calls, &limits)?,
        ModelKind::UnorderedQueue => check_keys(&UnorderedQueue, &calls, &limits)?,
    };
    let valid = keys.values().fold(Validity::Valid, |v, k| v.and(k.valid));
    Ok(CheckResult {
        valid,
        model: opts.model.name().to_string(),
        history_entries: ops.len(),
        counts: count_outcomes(ops, &calls),
        keys,
        elapsed_ms: start.elapsed().as_millis() as u64,
    })
}

/// Outcomes per function: client operations as paired, nemesis operations by their entries.
fn count_outcomes(ops: &[Op], calls: &[calls::Call<'_>]) -> BTreeMap<String, Counts> {
    let mut counts: HashMap<&str, Counts> = HashMap::new();
    for call in calls {
        let c = counts.entry(call.f()).or_default();
        match call.outcome() {
            Outcome::Ok => c.ok += 1,
            Outcome::Fail => c.fail += 1,
            Outcome::Info => c.info += 1,
        }
    }
    for op in ops.iter().filter(|op| op.process == Process::NEMESIS) {
        let c = counts.entry(&op.f).or_default();
        match op.kind {
            OpType::Invoke => {}
            OpType::Ok => c.ok += 1,
            OpType::Fail => c.fail += 1,
            OpType::Info => c.info += 1,
        }
    }
    counts
        .into_iter()
        .map(|(f, c)| (f.to_string(), c))
        .collect()
}
