//! Registers compared by value: `register` (read, write) and `cas-register` (Knossos's model).

use super::super::calls::{Call, Outcome};
use super::super::model::{Model, Prepared};
use super::{int_or_nil, two, unknown_f, FailedCas, Known};

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
}

impl Register {
    /// `register`: read and write only.
    pub fn plain(initial: Option<i64>) -> Register {
        Register {
            initial,
            cas: false,
            failed_cas: FailedCas::Ignore,
        }
    }

    /// `cas-register`: read, write and cas `[old, new]` comparing values.
    pub fn with_cas(initial: Option<i64>, failed_cas: FailedCas) -> Register {
        Register {
            initial,
            cas: true,
            failed_cas,
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
                Outcome::Ok => Ok(Prepared::Definite(RegisterOp::Read(int_or_nil(
                    call.result(),
                )?))),
                Outcome::Fail | Outcome::Info => Ok(Prepared::Skip),
            },
            "write" => {
                let op = RegisterOp::Write(int_or_nil(&call.invoke.value)?);
                Ok(by_outcome(outcome, op, None))
            }
            "cas" if self.cas => {
                let (old, new) = two(&call.invoke.value)?;
                let (old, new) = (int_or_nil(old)?, int_or_nil(new)?);
                let mismatch = (self.failed_cas == FailedCas::Mismatch)
                    .then_some(RegisterOp::CasMismatch(old));
                Ok(by_outcome(outcome, RegisterOp::Cas(old, new), mismatch))
            }
            "sync" => Ok(Prepared::Skip),
            f => Err(unknown_f(self.name(), f)),
        }
    }

    fn is_blind(&self, op: &RegisterOp) -> bool {
        matches!(op, RegisterOp::Write(_))
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
        let m = Register::plain(None);
        let s = m.init();
        assert_eq!(m.step(&s, &RegisterOp::Read(None)), Some(Known::Is(None)));
        assert_eq!(m.step(&s, &RegisterOp::Read(Some(1))), None);
        let s = m.step(&s, &RegisterOp::Write(Some(4))).unwrap();
        assert_eq!(
            m.step(&s, &RegisterOp::Read(Some(4))),
            Some(Known::Is(Some(4)))
        );
        assert_eq!(m.step(&s, &RegisterOp::Read(None)), None);
        assert_eq!(Register::plain(Some(7)).init(), Known::Is(Some(7)));
    }

    #[test]
    fn cas_compares_values_and_mismatch_needs_another_value() {
        let m = Register::with_cas(Some(1), FailedCas::Mismatch);
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
