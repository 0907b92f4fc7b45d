//! Knossos's `multi-register`: registers named by keys, read and written together in
//! transactions.
//!
//! An operation is `txn` whose value is a list of micro-operations `[f k v]`, `f` being `read`
//! or `write`, applied in order: a read must see `v` in register `k` (nil: anything, in
//! Knossos's reading; see [`NilRead`]), a write sets it. A crashed transaction's reads never
//! returned, so they tell nothing.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::calls::{Call, Outcome};
use super::super::model::{Model, Prepared};
use super::register::by_outcome;
use super::{int_or_nil, unknown_f, NilRead};

const NAME: &str = "multi-register";

/// One micro-operation of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Micro {
    /// Register `key` holds `value`.
    Read(String, Option<i64>),
    /// Register `key` is set to `value`.
    Write(String, Option<i64>),
}

/// The registers' values; registers not listed hold the initial value.
pub type Registers = BTreeMap<String, Option<i64>>;

/// Knossos's `multi-register`, every register starting at `initial`.
#[derive(Debug, Clone)]
pub struct MultiRegister {
    initial: Option<i64>,
    nil_read: NilRead,
}

impl MultiRegister {
    /// Registers that all start at `initial`, reading nil reads as `nil_read` says.
    pub fn new(initial: Option<i64>, nil_read: NilRead) -> MultiRegister {
        MultiRegister { initial, nil_read }
    }

    /// Reads a transaction's micro-operations; reads that tell nothing are left out.
    fn micros(&self, value: &Value, returned: bool) -> Result<Vec<Micro>, String> {
        let items = value
            .as_array()
            .ok_or_else(|| format!("txn value {value} is not a list of [f k v]"))?;
        let mut micros = Vec::with_capacity(items.len());
        for item in items {
            let Some([f, k, v]) = item.as_array().map(Vec::as_slice) else {
                return Err(format!("txn micro-op {item} is not [f k v]"));
            };
            let key = match k {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => return Err(format!("txn key {other} is not a keyword or number")),
            };
            let v = int_or_nil(v)?;
            match f.as_str() {
                Some("read") if !returned => {}
                Some("read") if v.is_none() && self.nil_read == NilRead::Any => {}
                Some("read") => micros.push(Micro::Read(key, v)),
                Some("write") => micros.push(Micro::Write(key, v)),
                _ => return Err(format!("txn micro-op {item}: f must be read or write")),
            }
        }
        Ok(micros)
    }
}

impl Model for MultiRegister {
    type Op = Vec<Micro>;
    type State = Registers;

    fn init(&self) -> Registers {
        Registers::new()
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<Vec<Micro>>, String> {
        if call.f() != "txn" {
            return Err(unknown_f(NAME, call.f()));
        }
        // As Knossos reads it (an ok transaction from its completion, which carries what its
        // reads returned); the reads of any other never returned.
        let op = self.micros(call.value(), call.outcome() == Outcome::Ok)?;
        Ok(by_outcome(call.outcome(), op, None))
    }

    fn finitely_many_states(&self) -> bool {
        true
    }

    fn is_observation(&self, op: &Vec<Micro>) -> bool {
        op.iter().all(|m| matches!(m, Micro::Read(..)))
    }

    fn step(&self, state: &Registers, op: &Vec<Micro>) -> Option<Registers> {
        let mut next = state.clone();
        for micro in op {
            match micro {
                Micro::Read(k, v) => {
                    if next.get(k).copied().unwrap_or(self.initial) != *v {
                        return None;
                    }
                }
                // The initial value is stored as absence, so equal states compare equal.
                Micro::Write(k, v) if *v == self.initial => {
                    next.remove(k);
                }
                Micro::Write(k, v) => {
                    next.insert(k.clone(), *v);
                }
            }
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn w(k: &str, v: i64) -> Micro {
        Micro::Write(k.to_string(), Some(v))
    }

    fn r(k: &str, v: Option<i64>) -> Micro {
        Micro::Read(k.to_string(), v)
    }

    #[test]
    fn transactions_apply_in_order_and_see_their_own_writes() {
        let m = MultiRegister::new(None, NilRead::Any);
        let s = m
            .step(&m.init(), &vec![w("x", 1), r("x", Some(1))])
            .unwrap();
        assert_eq!(m.step(&s, &vec![r("y", Some(1))]), None);
        assert_eq!(
            m.step(&s, &vec![r("y", None), r("x", Some(1))]),
            Some(s.clone())
        );
        let back = m.step(&s, &vec![Micro::Write("x".into(), None)]).unwrap();
        assert_eq!(
            back,
            m.init(),
            "writing the initial value back is the initial state"
        );
    }

    #[test]
    fn nil_reads_tell_nothing_in_knossos_reading_and_crashed_reads_never() {
        let any = MultiRegister::new(Some(0), NilRead::Any);
        let value = MultiRegister::new(Some(0), NilRead::Value);
        let txn = json!([["read", "x", null], ["write", 7, 2], ["read", "y", 0]]);
        assert_eq!(
            any.micros(&txn, true).unwrap(),
            vec![w("7", 2), r("y", Some(0))]
        );
        assert_eq!(
            value.micros(&txn, true).unwrap(),
            vec![r("x", None), w("7", 2), r("y", Some(0))]
        );
        assert_eq!(value.micros(&txn, false).unwrap(), vec![w("7", 2)]);
        let bad = json!([["append", "x", 1]]);
        assert!(any
            .micros(&bad, true)
            .unwrap_err()
            .contains("read or write"));
        assert!(any
            .micros(&json!(3), true)
            .unwrap_err()
            .contains("not a list"));
    }
}
