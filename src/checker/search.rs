//! Wing & Gong's linearizability search with Lowe's memoization, over flat vectors.
//!
//! Definite operations contribute a call and a return entry to a doubly linked list ordered by
//! history position; indefinite (`info`) operations only a call entry, in a second list, since
//! their return is at +infinity. The candidates to linearize next are the calls that precede
//! the first remaining return. Lifting an operation unlinks its entries (the entries keep their
//! own links, so undoing in stack order relinks them). Definite candidates are tried before
//! indefinite ones, so that configurations using fewer `info` operations are visited first and
//! cover the others in the [`Cache`]. Two reductions keep indefinite operations from multiplying
//! the configurations without losing any linearization: equal indefinite operations are used
//! in invocation order (once both can be linearized they stay interchangeable for good, since
//! neither returns; so the used ones of each kind are always its earliest, and the cache's
//! subset test compares how many of each kind were used), and no indefinite operation goes
//! right before a blind write (dropping it gives the same state). When the model has a measure
//! of progress that never decreases (a data version), a state past the bound of an operation
//! still to linearize is a dead end at once. The search succeeds once every definite operation
//! is linearized: the indefinite ones left never happened.
//!
//! Crashed operations still multiply the configurations: which of them were used up matters.
//! So a history with indefinite operations is first searched *relaxed*: an indefinite
//! operation may happen again and again (when the model has finitely many states; otherwise
//! as long as no more of them happened in all than had been invoked, so that the search ends).
//! Every linearization is a relaxed one, so a relaxed violation is a violation; and the relaxed
//! configurations record at most how many were used, not which. A relaxed linearization that
//! can give each use its own operation is a linearization. Only when neither settles it does
//! the exact search run.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use super::cache::Cache;
use super::model::Model;

const NIL: u32 = u32::MAX;

/// One operation as the search sees it.
#[derive(Debug, Clone)]
pub struct SearchOp<O> {
    /// The model's form of the operation.
    pub op: O,
    /// History position of the invocation.
    pub call: usize,
    /// History position of the completion; `None` for an indefinite operation.
    pub ret: Option<usize>,
}

/// Memory shared by concurrent searches; a search that would exceed it gives up.
#[derive(Debug)]
pub struct MemoryBudget {
    used: AtomicUsize,
    limit: usize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> MemoryBudget {
        MemoryBudget {
            used: AtomicUsize::new(0),
            limit,
        }
    }

    fn reserve(&self, bytes: usize) -> bool {
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        before + bytes <= self.limit
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// When a search must give up.
#[derive(Debug, Clone, Copy)]
pub struct Limits<'a> {
    /// Give up at this instant.
    pub deadline: Option<Instant>,
    /// Give up when the caches of all searches would hold more than this.
    pub memory: &'a MemoryBudget,
    /// Give up after this many steps of one search run, if set.
    pub steps: Option<u64>,
}

/// Which limit stopped a search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The time limit.
    Time,
    /// The memory limit.
    Memory,
    /// The step budget.
    Steps,
}

/// Where a failed search got furthest.
#[derive(Debug, Clone)]
pub struct Stuck<S> {
    /// The longest partial linearization found, as indices into the searched operations.
    pub linearized: Vec<usize>,
    /// The model state after it.
    pub state: S,
    /// The definite operation whose completion could not be passed: nothing left could be
    /// linearized before it.
    pub blocked: usize,
    /// A history position at which the history can be cut (operations invoked up to it kept,
    /// those still open then made indefinite) and still fail: the latest completion some
    /// configuration could not get past, or that of an operation whose bound made a
    /// configuration a dead end. A prefix cut earlier is passed by whatever got past its last
    /// completion, unless a bound pruned that: so without bounds this is the shortest prefix.
    pub furthest: usize,
}

/// The outcome of a search.
#[derive(Debug, Clone)]
pub enum Verdict<S> {
    /// Some order of the operations satisfies the model.
    Linearizable,
    /// No order does.
    Violation(Stuck<S>),
    /// A limit was hit first.
    Unknown(Limit),
}

struct Frame<S> {
    /// Internal op: definite `k`, or indefinite `j` when `indefinite`.
    op: u32,
    indefinite: bool,
    prev: S,
    /// For an indefinite op, the first pending return at its configuration.
    limit: usize,
    blocker: u32,
    /// Whether this op was the only move tried from the configuration before it.
    eager: bool,
}

/// Steps the exact search may take to find a partial linearization to show, once the relaxed
/// search proved a violation.
const SHOW_STEPS: u64 = 1 << 18;

/// Searches for a linearization of `ops` starting from `init`: relaxed first when there are
/// indefinite operations, then exact if that did not settle it (see the module documentation).
pub fn search<M: Model>(
    model: &M,
    ops: &[SearchOp<M::Op>],
    init: M::State,
    limits: &Limits<'_>,
) -> Verdict<M::State> {
    if ops.iter().all(|o| o.ret.is_some()) {
        return run(model, ops, init, limits, Mode::Exact).verdict();
    }
    let relaxed = match model.finitely_many_states() {
        true => Mode::Reused,
        false => Mode::Counted,
    };
    match run(model, ops, init.clone(), limits, relaxed) {
        Run::Done(Verdict::Violation(relaxed)) => {
            // An exact partial linearization to show; the relaxed one may use an op twice.
            let show = Limits {
                steps: Some(limits.steps.map_or(SHOW_STEPS, |s| s.min(SHOW_STEPS))),
                ..*limits
            };
            match run(model, ops, init, &show, Mode::Exact) {
                Run::Done(Verdict::Violation(stuck)) => Verdict::Violation(stuck),
                Run::OutOfSteps(Some(stuck)) => Verdict::Violation(Stuck {
                    furthest: relaxed.furthest,
                    ..stuck
                }),
                Run::Done(Verdict::Linearizable) => {
                    debug_assert!(false, "a relaxed violation is a violation");
                    Verdict::Linearizable
                }
                _ => Verdict::Violation(relaxed),
            }
        }
        Run::RelaxedOnly => run(model, ops, init, limits, Mode::Exact).verdict(),
        other => other.verdict(),
    }
}

/// How indefinite operations are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Each at most once.
    Exact,
    /// Relaxed: any one any number of times, no more uses in all than ops invoked.
    Counted,
    /// Relaxed: any one any number of times (for models with finitely many states).
    Reused,
}

/// How one run of the search ended.
pub(super) enum Run<S> {
    Done(Verdict<S>),
    /// The step budget ran out; where it got furthest so far, if it ever got stuck.
    OutOfSteps(Option<Stuck<S>>),
    /// A relaxed linearization was found that uses some indefinite op too often.
    RelaxedOnly,
}

impl<S> Run<S> {
    fn verdict(self) -> Verdict<S> {
        match self {
            Run::Done(v) => v,
            Run::OutOfSteps(_) => Verdict::Unknown(Limit::Steps),
            Run::RelaxedOnly => unreachable!("only a relaxed run ends relaxed-only"),
        }
    }
}

/// One run of the search in `mode`.
pub(super) fn run<M: Model>(
    model: &M,
    ops: &[SearchOp<M::Op>],
    init: M::State,
    limits: &Limits<'_>,
    mode: Mode,
) -> Run<M::State> {
    let mut s = Search::new(ops, mode);
    let outcome = s.run(model, ops, init, limits);
    limits.memory.release(s.reserved);
    outcome
}

struct Search<S> {
    definite: Vec<usize>,
    indefinite: Vec<usize>,
    next: Vec<u32>,
    prev: Vec<u32>,
    entry_pos: Vec<usize>,
    inext: Vec<u32>,
    iprev: Vec<u32>,
    /// For each indefinite op, the previous one (by invocation) that is the same operation.
    twin: Vec<u32>,
    /// Invocation positions of the indefinite ops, in order.
    icalls: Vec<usize>,
    mode: Mode,
    /// Relaxed: uses of indefinite ops on the current path.
    used: usize,
    /// See [`Stuck::furthest`].
    furthest: usize,
    zobrist: Vec<u64>,
    /// Definite ops with a progress bound, by bound: (bound, op); `first` skips linearized ones.
    bounds: Vec<(i64, u32)>,
    bound_rank: Vec<u32>,
    first: usize,
    bits: Vec<u64>,
    definite_words: usize,
    cache: Cache<S>,
    reserved: usize,
}

impl<S: Clone + Eq + Hash> Search<S> {
    fn new<O: Eq + Hash>(ops: &[SearchOp<O>], mode: Mode) -> Search<S> {
        let definite: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].ret.is_some()).collect();
        let mut indefinite: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].ret.is_none()).collect();
        indefinite.sort_by_key(|&i| ops[i].call);
        let n = definite.len();
        let mut events: Vec<(usize, u32)> = Vec::with_capacity(2 * n);
        for (k, &i) in definite.iter().enumerate() {
            events.push((ops[i].call, 2 * k as u32));
            events.push((ops[i].ret.unwrap_or(usize::MAX), 2 * k as u32 + 1));
        }
        events.sort_unstable();
        let head = 2 * n;
        let (next, prev) = chain(events.iter().map(|&(_, e)| e), head);
        let mut entry_pos = vec![0; 2 * n];
        for &(pos, e) in &events {
            entry_pos[e as usize] = pos;
        }
        let mut twin = vec![NIL; indefinite.len()];
        let mut latest: HashMap<&O, u32> = HashMap::new();
        for j in 0..indefinite.len() {
            if let Some(earlier) = latest.insert(&ops[indefinite[j]].op, j as u32) {
                twin[j] = earlier;
            }
        }
        // Relaxed, only the first op of each kind is ever used: only those are listed.
        let listed = (0..indefinite.len() as u32)
            .filter(|&j| mode == Mode::Exact || twin[j as usize] == NIL);
        let (inext, iprev) = chain(listed, indefinite.len());
        let definite_words = n.div_ceil(64);
        let words = definite_words + indefinite.len().div_ceil(64);
        let icalls = indefinite.iter().map(|&i| ops[i].call).collect();
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let zobrist = (0..n).map(|_| splitmix(&mut seed)).collect();
        Search {
            definite,
            indefinite,
            next,
            prev,
            entry_pos,
            inext,
            iprev,
            twin,
            icalls,
            mode,
            used: 0,
            furthest: 0,
            zobrist,
            bounds: Vec::new(),
            bound_rank: Vec::new(),
            first: 0,
            bits: vec![0; words],
            definite_words,
            cache: Cache::new(definite_words, words - definite_words),
            reserved: 0,
        }
    }

    fn run<M: Model<State = S>>(
        &mut self,
        model: &M,
        ops: &[SearchOp<M::Op>],
        init: S,
        limits: &Limits<'_>,
    ) -> Run<S> {
        let n = self.definite.len();
        if n == 0 {
            return Run::Done(Verdict::Linearizable);
        }
        self.bounds = (0..n)
            .filter_map(|k| {
                model
                    .progress_bound(&ops[self.definite[k]].op)
                    .map(|b| (b, k as u32))
            })
            .collect();
        self.bounds.sort_unstable();
        self.bound_rank = vec![u32::MAX; n];
        for (rank, &(_, k)) in self.bounds.iter().enumerate() {
            self.bound_rank[k as usize] = rank as u32;
        }
        let ihead = self.indefinite.len() as u32;
        let hasher = hashbrown::DefaultHashBuilder::default();
        let mut state = init;
        let mut stack: Vec<Frame<S>> = Vec::new();
        let mut zob = 0u64;
        let mut remaining = n;
        let mut best: Option<Stuck<S>> = None;
        let mut best_done = 0usize;
        // The cursor: an entry of the definite list, or (`in_info`) of the indefinite list;
        // `eager` when the definite entry at the cursor is the configuration's only move.
        let (mut cursor, mut eager) = self.first_move(model, ops, &state);
        let mut in_info = false;
        let mut limit = 0usize;
        let mut blocker = NIL;
        let mut steps = 0u64;
        loop {
            steps += 1;
            if steps & 0x3FF == 0 {
                if let Some(hit) = self.over_limit(limits) {
                    return Run::Done(Verdict::Unknown(hit));
                }
                if limits.steps.is_some_and(|m| steps > m) {
                    return Run::OutOfSteps(best);
                }
            }
            if !in_info {
                let e = cursor;
                if e & 1 == 1 {
                    limit = self.entry_pos[e as usize];
                    blocker = e / 2;
                    in_info = true;
                    cursor = self.inext[ihead as usize];
                    continue;
                }
                let k = (e / 2) as usize;
                let op = &ops[self.definite[k]].op;
                let after_indefinite = stack.last().is_some_and(|f| f.indefinite);
                if after_indefinite && model.is_blind(op) {
                    cursor = self.next[e as usize];
                    continue;
                }
                if let Some(next_state) = model.step(&state, op) {
                    self.bits[k / 64] |= 1 << (k % 64);
                    if self.past_a_bound(model.progress(&next_state)) {
                        self.clear_definite(k);
                        cursor = self.next[e as usize];
                        continue;
                    }
                    let z = zob ^ self.zobrist[k];
                    let hash = z ^ hasher.hash_one(&next_state).rotate_left(17);
                    if self.cache.visit(hash, &self.bits, &next_state) {
                        let prev = std::mem::replace(&mut state, next_state);
                        stack.push(Frame {
                            op: k as u32,
                            indefinite: false,
                            prev,
                            limit: 0,
                            blocker: NIL,
                            eager,
                        });
                        self.lift(k);
                        zob = z;
                        remaining -= 1;
                        if remaining == 0 {
                            if self.mode != Mode::Exact && !self.each_used_once(ops, &stack) {
                                return Run::RelaxedOnly;
                            }
                            return Run::Done(Verdict::Linearizable);
                        }
                        (cursor, eager) = self.first_move(model, ops, &state);
                        continue;
                    }
                    self.clear_definite(k);
                }
                if eager {
                    // The only move led to a configuration already searched: nothing left.
                    eager = false;
                    in_info = true;
                    cursor = NIL;
                    continue;
                }
                cursor = self.next[e as usize];
                continue;
            }
            let j = cursor;
            if j != NIL && ops[self.indefinite[j as usize]].call < limit {
                let ju = j as usize;
                let op = &ops[self.indefinite[ju]].op;
                let after_indefinite = stack.last().is_some_and(|f| f.indefinite);
                if (after_indefinite && model.is_blind(op))
                    || self.earlier_twin_unused(ju)
                    || !self.room_for_another(limit)
                {
                    cursor = self.inext[ju];
                    continue;
                }
                let next_state = model
                    .step(&state, op)
                    .filter(|ns| !self.past_a_bound(model.progress(ns)));
                if let Some(next_state) = next_state {
                    // Exact: the op's own bit; counted: one more bit of the count of uses.
                    let bit = match self.mode {
                        Mode::Exact => Some(ju),
                        Mode::Counted => Some(self.used),
                        Mode::Reused => None,
                    };
                    if let Some(b) = bit {
                        self.bits[self.definite_words + b / 64] |= 1 << (b % 64);
                    }
                    let hash = zob ^ hasher.hash_one(&next_state).rotate_left(17);
                    if self.cache.visit(hash, &self.bits, &next_state) {
                        let prev = std::mem::replace(&mut state, next_state);
                        stack.push(Frame {
                            op: j,
                            indefinite: true,
                            prev,
                            limit,
                            blocker,
                            eager: false,
                        });
                        match self.mode {
                            Mode::Exact => self.lift_indefinite(ju),
                            Mode::Counted | Mode::Reused => self.used += 1,
                        }
                        in_info = false;
                        (cursor, eager) = self.first_move(model, ops, &state);
                        continue;
                    }
                    if let Some(b) = bit {
                        self.bits[self.definite_words + b / 64] &= !(1 << (b % 64));
                    }
                }
                cursor = self.inext[ju];
                continue;
            }
            // Every candidate of this configuration failed: note how far it got, then backtrack.
            self.furthest = self.furthest.max(limit);
            let done = n - remaining;
            if best.is_none() || done > best_done {
                best_done = done;
                best = Some(Stuck {
                    linearized: stack.iter().map(|f| self.op_index(f)).collect(),
                    state: state.clone(),
                    blocked: self.definite[blocker as usize],
                    furthest: 0,
                });
            }
            let Some(frame) = stack.pop() else {
                let best = best.expect("a failed search records where it got stuck");
                return Run::Done(Verdict::Violation(Stuck {
                    furthest: self.furthest,
                    ..best
                }));
            };
            state = frame.prev;
            let u = frame.op as usize;
            if frame.indefinite {
                let bit = match self.mode {
                    Mode::Exact => {
                        self.unlift_indefinite(u);
                        u
                    }
                    Mode::Counted | Mode::Reused => {
                        self.used -= 1;
                        self.used
                    }
                };
                if self.mode != Mode::Reused {
                    self.bits[self.definite_words + bit / 64] &= !(1 << (bit % 64));
                }
                limit = frame.limit;
                blocker = frame.blocker;
                cursor = self.inext[u];
            } else {
                self.unlift(u);
                self.clear_definite(u);
                zob ^= self.zobrist[u];
                remaining += 1;
                if frame.eager {
                    // It was the configuration's only move: that configuration is done too.
                    in_info = true;
                    cursor = NIL;
                } else {
                    in_info = false;
                    cursor = self.next[2 * u];
                }
            }
        }
    }

    /// Where the search of a new configuration in `state` starts: a definite observation that
    /// leaves `state` as it is, if one can go next, as the only move (with `true`); else the
    /// first entry. Taking such an op at once loses nothing: in any way to go on, moving it to
    /// the front keeps every state (it changes none) and every real-time order (whatever it
    /// passes is still pending, so returns after it was invoked).
    fn first_move<M: Model<State = S>>(
        &self,
        model: &M,
        ops: &[SearchOp<M::Op>],
        state: &S,
    ) -> (u32, bool) {
        let first = self.next[2 * self.definite.len()];
        let mut e = first;
        while e != NIL && e & 1 == 0 {
            let op = &ops[self.definite[(e / 2) as usize]].op;
            if model.is_observation(op) && model.step(state, op).as_ref() == Some(state) {
                return (e, true);
            }
            e = self.next[e as usize];
        }
        (first, false)
    }

    /// Marks definite op `k` as not linearized.
    fn clear_definite(&mut self, k: usize) {
        self.bits[k / 64] &= !(1 << (k % 64));
        self.first = self.first.min(self.bound_rank[k] as usize);
    }

    /// Whether `progress` is past the bound of a definite op not yet linearized: a dead end,
    /// since progress never decreases. That op's completion counts towards `furthest`.
    fn past_a_bound(&mut self, progress: Option<i64>) -> bool {
        let Some(progress) = progress else {
            return false;
        };
        while let Some(&(bound, k)) = self.bounds.get(self.first) {
            let k = k as usize;
            if self.bits[k / 64] & (1 << (k % 64)) == 0 {
                if progress <= bound {
                    return false;
                }
                self.furthest = self.furthest.max(self.entry_pos[2 * k + 1]);
                return true;
            }
            self.first += 1;
        }
        false
    }

    /// Whether an indefinite op equal to `j` but invoked earlier is still unused (exact), or
    /// exists at all (relaxed): then that one goes instead.
    fn earlier_twin_unused(&self, j: usize) -> bool {
        let k = self.twin[j];
        if k == NIL {
            return false;
        }
        let ku = k as usize;
        self.mode != Mode::Exact || self.bits[self.definite_words + ku / 64] & (1 << (ku % 64)) == 0
    }

    /// Whether the relaxed linearization on `stack` can give each of its uses of an indefinite
    /// op a distinct op of that kind invoked before the use. The uses' limits never decrease
    /// along the stack, so the ops eligible for each kind only grow and taking them in order
    /// succeeds exactly when every use finds enough eligible ones.
    fn each_used_once<O>(&self, ops: &[SearchOp<O>], stack: &[Frame<S>]) -> bool {
        let mut first = vec![NIL; self.twin.len()];
        for j in 0..self.twin.len() {
            first[j] = match self.twin[j] {
                NIL => j as u32,
                earlier => first[earlier as usize],
            };
        }
        let mut used: HashMap<u32, usize> = HashMap::new();
        for f in stack.iter().filter(|f| f.indefinite) {
            let n = used.entry(f.op).or_insert(0);
            *n += 1;
            let eligible = (0..self.twin.len())
                .filter(|&j| first[j] == f.op && ops[self.indefinite[j]].call < f.limit)
                .count();
            if eligible < *n {
                return false;
            }
        }
        true
    }

    /// Counted: whether fewer indefinite ops were used than had been invoked before `limit`.
    fn room_for_another(&self, limit: usize) -> bool {
        self.mode != Mode::Counted || self.used < self.icalls.partition_point(|&c| c < limit)
    }

    fn op_index(&self, f: &Frame<S>) -> usize {
        if f.indefinite {
            self.indefinite[f.op as usize]
        } else {
            self.definite[f.op as usize]
        }
    }

    fn over_limit(&mut self, limits: &Limits<'_>) -> Option<Limit> {
        if limits.deadline.is_some_and(|d| Instant::now() >= d) {
            return Some(Limit::Time);
        }
        let bytes = self.cache.bytes();
        if bytes > self.reserved {
            let more = bytes - self.reserved;
            self.reserved = bytes;
            if !limits.memory.reserve(more) {
                return Some(Limit::Memory);
            }
        }
        None
    }

    fn lift(&mut self, k: usize) {
        unlink(&mut self.next, &mut self.prev, 2 * k);
        unlink(&mut self.next, &mut self.prev, 2 * k + 1);
    }

    fn unlift(&mut self, k: usize) {
        relink(&mut self.next, &mut self.prev, 2 * k + 1);
        relink(&mut self.next, &mut self.prev, 2 * k);
    }

    fn lift_indefinite(&mut self, j: usize) {
        unlink(&mut self.inext, &mut self.iprev, j);
    }

    fn unlift_indefinite(&mut self, j: usize) {
        relink(&mut self.inext, &mut self.iprev, j);
    }
}

/// Links `entries` in order after a head entry numbered `head`.
fn chain(entries: impl Iterator<Item = u32>, head: usize) -> (Vec<u32>, Vec<u32>) {
    let mut next = vec![NIL; head + 1];
    let mut prev = vec![NIL; head + 1];
    let mut last = head as u32;
    for e in entries {
        next[last as usize] = e;
        prev[e as usize] = last;
        last = e;
    }
    (next, prev)
}

fn unlink(next: &mut [u32], prev: &mut [u32], e: usize) {
    let (p, n) = (prev[e], next[e]);
    next[p as usize] = n;
    if n != NIL {
        prev[n as usize] = p;
    }
}

fn relink(next: &mut [u32], prev: &mut [u32], e: usize) {
    let (p, n) = (prev[e], next[e]);
    next[p as usize] = e as u32;
    if n != NIL {
        prev[n as usize] = e as u32;
    }
}

fn splitmix(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
