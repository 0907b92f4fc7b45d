//! Registers compared by value: Knossos's `register` (read, write) and `cas-register` (read,
//! write, cas `[old new]`). A read that returned nil is, in Knossos's reading, consistent with
//! any state ([`NilRead`]).

use std::collections::{HashMap, HashSet};

use super::super::calls::{Call, Outcome};
use super::super::model::{Model, Prepared};
use super::super::search::SearchOp;
use super::{int_or_nil, two, unknown_f, FailedCas, Known, NilRead};

/// One register operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegisterOp {
    /// Read, returning this value.
    Read(Option<i64>),
    /// Write this value.
    Write(Option<i64>),
    /// Set the second value if the register holds the first.
    Cas(Option<i64>, Option<i64>),
    /// A failed cas, read as "the register did not hold this value".
    CasMismatch(Option<i64>),
}

/// A single register of integers (or nil): `register` without cas, `cas-register` with it.
#[derive(Debug, Clone)]
pub struct Register {
    initial: Option<i64>,
    cas: bool,
    failed_cas: FailedCas,
    nil_read: NilRead,
}

impl Register {
    /// `register`: read and write only.
    pub fn plain(initial: Option<i64>, nil_read: NilRead) -> Register {
        Register {
            initial,
            cas: false,
            failed_cas: FailedCas::Ignore,
            nil_read,
        }
    }

    /// `cas-register`: read, write and cas `[old, new]` comparing values.
    pub fn with_cas(initial: Option<i64>, failed_cas: FailedCas, nil_read: NilRead) -> Register {
        Register {
            initial,
            cas: true,
            failed_cas,
            nil_read,
        }
    }

    fn name(&self) -> &'static str {
        if self.cas {
            "cas-register"
        } else {
            "register"
        }
    }
}

impl Model for Register {
    type Op = RegisterOp;
    type State = Known<Option<i64>>;

    fn init(&self) -> Self::State {
        Known::Is(self.initial)
    }

    fn any_state(&self) -> Option<Self::State> {
        Some(Known::Any)
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<RegisterOp>, String> {
        let outcome = call.outcome();
        match call.f() {
            "read" => match outcome {
                Outcome::Ok => match int_or_nil(call.result())? {
                    // Consistent with any state and changing none, it fits anywhere: left out.
                    None if self.nil_read == NilRead::Any => Ok(Prepared::Skip),
                    value => Ok(Prepared::Definite(RegisterOp::Read(value))),
                },
                Outcome::Fail | Outcome::Info => Ok(Prepared::Skip),
            },
            "write" => {
                let op = RegisterOp::Write(int_or_nil(call.value())?);
                Ok(by_outcome(outcome, op, None))
            }
            "cas" if self.cas => {
                let (old, new) = two(call.value())?;
                let (old, new) = (int_or_nil(old)?, int_or_nil(new)?);
                let mismatch = (self.failed_cas == FailedCas::Mismatch)
                    .then_some(RegisterOp::CasMismatch(old));
                Ok(by_outcome(outcome, RegisterOp::Cas(old, new), mismatch))
            }
            "sync" => Ok(Prepared::Skip),
            f => Err(unknown_f(self.name(), f)),
        }
    }

    fn finitely_many_states(&self) -> bool {
        true
    }

    fn is_observation(&self, op: &RegisterOp) -> bool {
        matches!(op, RegisterOp::Read(_) | RegisterOp::CasMismatch(_))
    }

    fn is_blind(&self, op: &RegisterOp) -> bool {
        matches!(op, RegisterOp::Write(_))
    }

    /// A crashed write of `v` (or cas to `v`) that nothing can observe afterwards: no read of
    /// `v` and no cas from `v` completes after it was invoked, no crashed cas from `v` is left,
    /// and no failed cas read as a mismatch could see `v`. In a linearization, the operation
    /// right after it then cannot read `v`, so it is a blind write (or there is none): dropping
    /// the crashed one leaves every other operation's state as it was. Dropping one may make
    /// another needless, so this repeats until nothing changes.
    fn needless(&self, ops: &[SearchOp<RegisterOp>]) -> Vec<bool> {
        let mismatched: HashSet<Option<i64>> = ops
            .iter()
            .filter_map(|o| match o.op {
                RegisterOp::CasMismatch(u) => Some(u),
                _ => None,
            })
            .collect();
        let mut dropped = vec![false; ops.len()];
        loop {
            // For each value: the latest completion of a definite op reading it, and whether a
            // kept indefinite op reads it.
            let mut latest: HashMap<Option<i64>, usize> = HashMap::new();
            let mut read_by_indefinite: HashSet<Option<i64>> = HashSet::new();
            for (o, _) in ops.iter().zip(&dropped).filter(|(_, d)| !**d) {
                let (RegisterOp::Read(v) | RegisterOp::Cas(v, _)) = o.op else {
                    continue;
                };
                match o.ret {
                    Some(r) => {
                        let at = latest.entry(v).or_insert(r);
                        *at = (*at).max(r);
                    }
                    None => {
                        read_by_indefinite.insert(v);
                    }
                }
            }
            let mut changed = false;
            for (i, o) in ops.iter().enumerate() {
                let (RegisterOp::Write(v) | RegisterOp::Cas(_, v)) = o.op else {
                    continue;
                };
                let unseen = o.ret.is_none()
                    && !dropped[i]
                    && !read_by_indefinite.contains(&v)
                    && mismatched.iter().all(|&u| u == v)
                    && latest.get(&v).is_none_or(|&r| r < o.call);
                if unseen {
                    dropped[i] = true;
                    changed = true;
                }
            }
            if !changed {
                return dropped;
            }
        }
    }

    fn step(&self, state: &Self::State, op: &RegisterOp) -> Option<Self::State> {
        match *op {
            RegisterOp::Read(v) => state.admits(v).then_some(Known::Is(v)),
            RegisterOp::Write(v) => Some(Known::Is(v)),
            RegisterOp::Cas(old, new) => state.admits(old).then_some(Known::Is(new)),
            RegisterOp::CasMismatch(old) => (*state != Known::Is(old)).then_some(*state),
        }
    }
}

/// An update's reading: ok = happened, info = maybe, fail = `on_fail` as an observation or nothing.
pub(super) fn by_outcome<O>(outcome: Outcome, op: O, on_fail: Option<O>) -> Prepared<O> {
    match outcome {
        Outcome::Ok => Prepared::Definite(op),
        Outcome::Info => Prepared::Indefinite(op),
        Outcome::Fail => on_fail.map_or(Prepared::Skip, Prepared::Definite),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_see_the_last_write() {
        let m = Register::plain(None, NilRead::Value);
        let s = m.init();
        assert_eq!(m.step(&s, &RegisterOp::Read(None)), Some(Known::Is(None)));
        assert_eq!(m.step(&s, &RegisterOp::Read(Some(1))), None);
        let s = m.step(&s, &RegisterOp::Write(Some(4))).unwrap();
        assert_eq!(
            m.step(&s, &RegisterOp::Read(Some(4))),
            Some(Known::Is(Some(4)))
        );
        assert_eq!(m.step(&s, &RegisterOp::Read(None)), None);
        assert_eq!(
            Register::plain(Some(7), NilRead::Value).init(),
            Known::Is(Some(7))
        );
    }

    #[test]
    fn cas_compares_values_and_mismatch_needs_another_value() {
        let m = Register::with_cas(Some(1), FailedCas::Mismatch, NilRead::Value);
        let s = m.init();
        assert_eq!(
            m.step(&s, &RegisterOp::Cas(Some(1), Some(2))),
            Some(Known::Is(Some(2)))
        );
        assert_eq!(m.step(&s, &RegisterOp::Cas(Some(3), Some(2))), None);
        assert_eq!(m.step(&s, &RegisterOp::CasMismatch(Some(1))), None);
        assert_eq!(m.step(&s, &RegisterOp::CasMismatch(Some(5))), Some(s));
        assert_eq!(
            m.step(&Known::Any, &RegisterOp::Read(Some(9))),
            Some(Known::Is(Some(9)))
        );
    }
}
