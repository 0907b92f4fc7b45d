//! Locks: `mutex` (acquire, release) and `fenced-mutex` (acquire returns a growing token).

use serde::Serialize;

use super::super::calls::{Call, Outcome};
use super::super::model::{Model, Prepared};
use super::register::by_outcome;
use super::{unknown_f, Known};

/// One lock operation; an acquisition carries its fencing token when the model has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockOp {
    /// Take the lock; `Some(token)` for a fenced acquisition that returned one.
    Acquire(Option<i64>),
    /// Give the lock back.
    Release,
}

/// `mutex` (Knossos's): acquire succeeds only when free, release only when held. The state is
/// whether it is held.
#[derive(Debug, Clone, Default)]
pub struct Mutex;

impl Model for Mutex {
    type Op = LockOp;
    type State = Known<bool>;

    fn init(&self) -> Known<bool> {
        Known::Is(false)
    }

    fn any_state(&self) -> Option<Known<bool>> {
        Some(Known::Any)
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<LockOp>, String> {
        prepare_lock("mutex", call, |_| Ok(None))
    }

    fn finitely_many_states(&self) -> bool {
        true
    }

    fn step(&self, held: &Known<bool>, op: &LockOp) -> Option<Known<bool>> {
        match op {
            LockOp::Acquire(_) => held.admits(false).then_some(Known::Is(true)),
            LockOp::Release => held.admits(true).then_some(Known::Is(false)),
        }
    }
}

/// A fenced lock's state: whether it is held, and the greatest token known to be issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct FencedState {
    /// Whether someone holds the lock.
    pub held: bool,
    /// The greatest token issued so far, if any is known.
    pub last_token: Option<i64>,
}

/// `fenced-mutex`: a mutex whose acquisitions return tokens that strictly increase.
///
/// An acquisition that ended in `info` may have issued a token nobody saw; it then raises no
/// bound, so later tokens are only required to exceed the last one seen (never a false alarm).
#[derive(Debug, Clone, Default)]
pub struct FencedMutex;

impl Model for FencedMutex {
    type Op = LockOp;
    type State = FencedState;

    fn init(&self) -> FencedState {
        FencedState {
            held: false,
            last_token: None,
        }
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<LockOp>, String> {
        prepare_lock("fenced-mutex", call, |call| {
            if call.outcome() != Outcome::Ok {
                return Ok(None);
            }
            let token = call.result();
            token
                .as_i64()
                .map(Some)
                .ok_or_else(|| format!("acquire returned token {token}, not an integer"))
        })
    }

    fn progress(&self, s: &FencedState) -> Option<i64> {
        s.last_token
    }

    fn progress_bound(&self, op: &LockOp) -> Option<i64> {
        match *op {
            LockOp::Acquire(token) => token.map(|t| t - 1),
            LockOp::Release => None,
        }
    }

    fn step(&self, s: &FencedState, op: &LockOp) -> Option<FencedState> {
        match *op {
            LockOp::Acquire(token) => {
                let grows = match (token, s.last_token) {
                    (Some(t), Some(last)) => t > last,
                    _ => true,
                };
                (!s.held && grows).then(|| FencedState {
                    held: true,
                    last_token: token.or(s.last_token),
                })
            }
            LockOp::Release => s.held.then_some(FencedState {
                held: false,
                last_token: s.last_token,
            }),
        }
    }
}

fn prepare_lock(
    model: &str,
    call: &Call<'_>,
    token: impl Fn(&Call<'_>) -> Result<Option<i64>, String>,
) -> Result<Prepared<LockOp>, String> {
    let op = match call.f() {
        "acquire" => LockOp::Acquire(token(call)?),
        "release" => LockOp::Release,
        f => return Err(unknown_f(model, f)),
    };
    Ok(by_outcome(call.outcome(), op, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutex_alternates() {
        let m = Mutex;
        let (free, held) = (Known::Is(false), Known::Is(true));
        assert_eq!(m.step(&free, &LockOp::Acquire(None)), Some(held));
        assert_eq!(m.step(&held, &LockOp::Acquire(None)), None);
        assert_eq!(m.step(&held, &LockOp::Release), Some(free));
        assert_eq!(m.step(&free, &LockOp::Release), None);
        assert_eq!(m.step(&Known::Any, &LockOp::Release), Some(free));
    }

    #[test]
    fn fenced_tokens_must_grow() {
        let m = FencedMutex;
        let s = m.step(&m.init(), &LockOp::Acquire(Some(3))).unwrap();
        assert_eq!(
            s,
            FencedState {
                held: true,
                last_token: Some(3)
            }
        );
        let s = m.step(&s, &LockOp::Release).unwrap();
        assert_eq!(m.step(&s, &LockOp::Acquire(Some(3))), None);
        assert_eq!(m.step(&s, &LockOp::Acquire(Some(2))), None);
        let unseen = m.step(&s, &LockOp::Acquire(None)).unwrap();
        assert_eq!(unseen.last_token, Some(3));
        assert!(m.step(&s, &LockOp::Acquire(Some(4))).is_some());
    }
}
