//! The contract between the search and a sequential specification: the [`Model`] trait.

use std::fmt::Debug;
use std::hash::Hash;

use serde::Serialize;

use super::calls::Call;
use super::search::SearchOp;

/// How a model reads one client operation of the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prepared<O> {
    /// The operation certainly took effect between its invocation and its completion.
    Definite(O),
    /// The operation may have taken effect at any moment after its invocation, or never.
    Indefinite(O),
    /// The operation tells nothing the model can check (a failed write, a timed-out read).
    Skip,
}

/// A sequential specification: a state machine the history must be a linearization of.
///
/// States must be cheap to clone and hash: the search memoizes (linearized ops, state) pairs.
pub trait Model: Sync {
    /// A model-specific, compact form of one operation; equal ops act the same.
    type Op: Clone + Eq + Hash + Debug + Send + Sync;
    /// The model's state.
    type State: Clone + Eq + Hash + Debug + Serialize + Send;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// A state that stands for "any state", if the model can express one: used to find the
    /// latest start of a failing window, which must fail whatever came before it.
    fn any_state(&self) -> Option<Self::State> {
        None
    }

    /// Reads one operation of the history, or says in a sentence why it cannot.
    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<Self::Op>, String>;

    /// Applies `op` to `state`: the next state, or `None` when `op` cannot happen in `state`.
    fn step(&self, state: &Self::State, op: &Self::Op) -> Option<Self::State>;

    /// Whether `op` only observes: in every state it can be applied in, it leaves the state
    /// as it was (from a state standing for "anything", it may only fix what it saw). The
    /// search takes such an operation as soon as it fits the current state unchanged.
    fn is_observation(&self, _op: &Self::Op) -> bool {
        false
    }

    /// Whether `op` is a blind update: defined in every state, and leading to a state that
    /// does not depend on the state it was applied to (a plain write). The search then never
    /// lets an indefinite operation right before it: dropping that one gives the same state.
    fn is_blind(&self, _op: &Self::Op) -> bool {
        false
    }

    /// A measure of progress no step decreases (a data node's version, a lock's last token),
    /// if the model has one; `None` where unknown.
    fn progress(&self, _state: &Self::State) -> Option<i64> {
        None
    }

    /// The greatest progress at which `op` can still be applied, if bounded. A state whose
    /// progress is past the bound of an operation still to linearize is a dead end.
    fn progress_bound(&self, _op: &Self::Op) -> Option<i64> {
        None
    }

    /// Whether the states reachable from the initial one by the history's operations, each
    /// applied any number of times, are finitely many (a register's values, a lock's two
    /// states; not a data version that counts writes). Then the relaxed search may let a
    /// crashed operation happen again and again without counting (see [`super::search`]).
    fn finitely_many_states(&self) -> bool {
        false
    }

    /// Which indefinite operations of `ops` no linearization needs, by position: a history is
    /// linearizable with them exactly when it is without them (they never happened). None
    /// by default.
    fn needless(&self, ops: &[SearchOp<Self::Op>]) -> Vec<bool> {
        vec![false; ops.len()]
    }

    /// A partition of a key's operations beyond keys: operations in different parts never
    /// interact and are checked separately. All in one part by default.
    fn part(&self, _op: &Self::Op) -> u64 {
        0
    }
}
