//! Knossos's queue models: `fifo-queue` and `unordered-queue` (enqueue, dequeue).
//!
//! As in Knossos, a dequeue must return a value: one on an empty queue is inconsistent, even
//! when it returned nil, and a crashed dequeue is the dequeue of its invocation's value
//! (usually nil), so it can only have happened if that value was queued.

use std::collections::VecDeque;

use super::super::calls::Call;
use super::super::model::{Model, Prepared};
use super::register::by_outcome;
use super::{int_or_nil, unknown_f};

/// One queue operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueOp {
    /// Add this value.
    Enqueue(Option<i64>),
    /// Take this value out.
    Dequeue(Option<i64>),
}

/// Reads a queue operation, its value as Knossos reads it ([`Call::value`]).
fn prepare_queue(model: &str, call: &Call<'_>) -> Result<Prepared<QueueOp>, String> {
    let value = int_or_nil(call.value())?;
    let op = match call.f() {
        "enqueue" => QueueOp::Enqueue(value),
        "dequeue" => QueueOp::Dequeue(value),
        f => return Err(unknown_f(model, f)),
    };
    Ok(by_outcome(call.outcome(), op, None))
}

/// `fifo-queue`: a dequeue takes the oldest value queued.
#[derive(Debug, Clone, Default)]
pub struct FifoQueue;

impl Model for FifoQueue {
    type Op = QueueOp;
    type State = VecDeque<Option<i64>>;

    fn init(&self) -> Self::State {
        VecDeque::new()
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<QueueOp>, String> {
        prepare_queue("fifo-queue", call)
    }

    fn step(&self, queue: &Self::State, op: &QueueOp) -> Option<Self::State> {
        let mut next = queue.clone();
        match *op {
            QueueOp::Enqueue(v) => next.push_back(v),
            QueueOp::Dequeue(v) => {
                if next.pop_front()? != v {
                    return None;
                }
            }
        }
        Some(next)
    }
}

/// `unordered-queue`: a dequeue takes any value queued.
#[derive(Debug, Clone, Default)]
pub struct UnorderedQueue;

impl Model for UnorderedQueue {
    type Op = QueueOp;
    /// The values queued, sorted (a multiset).
    type State = Vec<Option<i64>>;

    fn init(&self) -> Self::State {
        Vec::new()
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<QueueOp>, String> {
        prepare_queue("unordered-queue", call)
    }

    fn step(&self, pending: &Self::State, op: &QueueOp) -> Option<Self::State> {
        let mut next = pending.clone();
        match *op {
            QueueOp::Enqueue(v) => {
                let at = next.partition_point(|&x| x <= v);
                next.insert(at, v);
            }
            QueueOp::Dequeue(v) => {
                let at = next.binary_search(&v).ok()?;
                next.remove(at);
            }
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_dequeues_the_oldest_and_never_from_empty() {
        let m = FifoQueue;
        let s = m.step(&m.init(), &QueueOp::Enqueue(Some(1))).unwrap();
        let s = m.step(&s, &QueueOp::Enqueue(Some(2))).unwrap();
        assert_eq!(m.step(&s, &QueueOp::Dequeue(Some(2))), None);
        let s = m.step(&s, &QueueOp::Dequeue(Some(1))).unwrap();
        assert_eq!(s, VecDeque::from([Some(2)]));
        assert_eq!(m.step(&m.init(), &QueueOp::Dequeue(None)), None);
    }

    #[test]
    fn unordered_dequeues_any_queued_value_once() {
        let m = UnorderedQueue;
        let s = m.step(&m.init(), &QueueOp::Enqueue(Some(3))).unwrap();
        let s = m.step(&s, &QueueOp::Enqueue(Some(1))).unwrap();
        let s = m.step(&s, &QueueOp::Enqueue(Some(3))).unwrap();
        assert_eq!(s, vec![Some(1), Some(3), Some(3)]);
        let s = m.step(&s, &QueueOp::Dequeue(Some(3))).unwrap();
        let s = m.step(&s, &QueueOp::Dequeue(Some(3))).unwrap();
        assert_eq!(m.step(&s, &QueueOp::Dequeue(Some(3))), None);
        assert_eq!(m.step(&s, &QueueOp::Dequeue(None)), None);
    }
}
