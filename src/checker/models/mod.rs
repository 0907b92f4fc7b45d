//! The sequential specifications a history can be checked against.

pub mod multi_register;
pub mod mutex;
pub mod queue;
pub mod register;
pub mod versioned_register;

pub use multi_register::MultiRegister;
pub use mutex::{FencedMutex, Mutex};
pub use queue::{FifoQueue, UnorderedQueue};
pub use register::Register;
pub use versioned_register::VersionedRegister;

use std::str::FromStr;

use serde::{Serialize, Serializer};
use serde_json::Value;

/// What a definite `fail` of a cas tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailedCas {
    /// Nothing beyond "it did not take effect" (Knossos's reading).
    #[default]
    Ignore,
    /// Also that the register did not hold the expected value (or version) at some moment
    /// during the operation (Porcupine's reading, right when the server compares atomically).
    Mismatch,
}

impl FromStr for FailedCas {
    type Err = String;

    fn from_str(s: &str) -> Result<FailedCas, String> {
        match s {
            "ignore" => Ok(FailedCas::Ignore),
            "mismatch" => Ok(FailedCas::Mismatch),
            _ => Err(format!(
                "unknown failed-cas reading {s:?}: expected ignore or mismatch"
            )),
        }
    }
}

/// What a completed read that returned nil tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NilRead {
    /// Nothing: the read is consistent with any state (Knossos's reading: Jepsen clients
    /// complete a read without a value when they could not tell).
    Any,
    /// That the register was nil (stampede's reading: its register workload reads a znode's
    /// empty data as nil).
    #[default]
    Value,
}

impl FromStr for NilRead {
    type Err = String;

    fn from_str(s: &str) -> Result<NilRead, String> {
        match s {
            "any" => Ok(NilRead::Any),
            "value" => Ok(NilRead::Value),
            _ => Err(format!(
                "unknown nil-read reading {s:?}: expected any or value"
            )),
        }
    }
}

/// A part of a state that is either known or, at the start of a shrunk window, anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Known<T> {
    /// Could be anything: the first observation fixes it.
    Any,
    /// Known to be this.
    Is(T),
}

impl<T: PartialEq + Copy> Known<T> {
    /// Whether an observation of `seen` is possible.
    pub fn admits(&self, seen: T) -> bool {
        match self {
            Known::Any => true,
            Known::Is(v) => *v == seen,
        }
    }
}

impl<T: Serialize> Serialize for Known<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Known::Any => s.serialize_str("any"),
            Known::Is(v) => v.serialize(s),
        }
    }
}

/// Reads a register value: an integer or null (nil, the empty znode).
pub fn int_or_nil(value: &Value) -> Result<Option<i64>, String> {
    match value {
        Value::Null => Ok(None),
        Value::Number(n) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("value {n} is not a 64-bit integer")),
        other => Err(format!("value {other} is not an integer or null")),
    }
}

/// Reads a two-element argument such as a cas's `[expected, new]`.
pub fn two(value: &Value) -> Result<(&Value, &Value), String> {
    match value.as_array().map(Vec::as_slice) {
        Some([a, b]) => Ok((a, b)),
        _ => Err(format!("value {value} is not a pair [expected, new]")),
    }
}

/// The error for an operation a model does not know.
pub fn unknown_f(model: &str, f: &str) -> String {
    format!("model {model} has no operation {f:?}")
}
