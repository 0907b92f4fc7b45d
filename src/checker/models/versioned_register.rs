//! `versioned-register`: a ZooKeeper data node, whose data version counts its writes.
//!
//! The node exists from its creation, acknowledged before the history begins, on, and nothing
//! deletes it: a read, write or cas the server answered `no-node` observed it absent, which no
//! state of the model allows (the acknowledged creation, and every write on it, was lost).
//! With [`FailedCas::Mismatch`] a cas that failed `bad-version` (or without an error, as in
//! imported histories) observed another version; a cas refused for another reason tells
//! nothing.

use serde::Serialize;

use super::super::calls::{Call, Outcome};
use super::super::model::{Model, Prepared};
use super::register::by_outcome;
use super::{int_or_nil, two, unknown_f, FailedCas, Known};
use crate::history::{BAD_VERSION, NO_NODE};

/// One operation on a data node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VersionedOp {
    /// getData returned this value and, if reported, this version.
    Read {
        value: Option<i64>,
        version: Option<i32>,
    },
    /// setData without a version check; `version` is the new version, if reported.
    Write {
        value: Option<i64>,
        version: Option<i32>,
    },
    /// setData with an expected version: succeeds only at that version.
    Cas { expected: i32, value: Option<i64> },
    /// A failed cas, read as "the node was not at this version".
    CasMismatch { expected: i32 },
    /// A read, write or cas answered `no-node`: the node was absent.
    Absent,
}

/// A data node's value and data version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct NodeState {
    /// The node's data: an integer or nil (empty).
    pub value: Known<Option<i64>>,
    /// The node's data version: 0 at creation, +1 per successful setData.
    pub version: Known<i32>,
}

/// ZooKeeper's data node as a register: read returns (value, version), write bumps the version,
/// cas `[expected_version, new]` succeeds only at the expected version.
#[derive(Debug, Clone)]
pub struct VersionedRegister {
    initial: Option<i64>,
    failed_cas: FailedCas,
}

impl VersionedRegister {
    /// A node created with `initial` data at version 0.
    pub fn new(initial: Option<i64>, failed_cas: FailedCas) -> VersionedRegister {
        VersionedRegister {
            initial,
            failed_cas,
        }
    }
}

const NAME: &str = "versioned-register";

impl Model for VersionedRegister {
    type Op = VersionedOp;
    type State = NodeState;

    fn init(&self) -> NodeState {
        NodeState {
            value: Known::Is(self.initial),
            version: Known::Is(0),
        }
    }

    fn any_state(&self) -> Option<NodeState> {
        Some(NodeState {
            value: Known::Any,
            version: Known::Any,
        })
    }

    fn prepare(&self, call: &Call<'_>) -> Result<Prepared<VersionedOp>, String> {
        let outcome = call.outcome();
        let absent = outcome == Outcome::Fail && call.error() == Some(NO_NODE);
        if absent && matches!(call.f(), "read" | "write" | "cas") {
            return Ok(Prepared::Definite(VersionedOp::Absent));
        }
        match call.f() {
            "read" => match outcome {
                Outcome::Ok => {
                    let value = int_or_nil(call.result())?;
                    Ok(Prepared::Definite(VersionedOp::Read {
                        value,
                        version: call.version(),
                    }))
                }
                Outcome::Fail | Outcome::Info => Ok(Prepared::Skip),
            },
            "write" => {
                let value = int_or_nil(&call.invoke.value)?;
                let version = if outcome == Outcome::Ok {
                    call.version()
                } else {
                    None
                };
                Ok(by_outcome(
                    outcome,
                    VersionedOp::Write { value, version },
                    None,
                ))
            }
            "cas" => {
                let (expected, value) = two(&call.invoke.value)?;
                let expected = expected
                    .as_i64()
                    .and_then(|e| i32::try_from(e).ok())
                    .ok_or_else(|| {
                        format!("expected version {expected} is not a 32-bit integer")
                    })?;
                let value = int_or_nil(value)?;
                let compared = call.error().is_none_or(|e| e == BAD_VERSION);
                let mismatch = (self.failed_cas == FailedCas::Mismatch && compared)
                    .then_some(VersionedOp::CasMismatch { expected });
                Ok(by_outcome(
                    outcome,
                    VersionedOp::Cas { expected, value },
                    mismatch,
                ))
            }
            "sync" => Ok(Prepared::Skip),
            f => Err(unknown_f(NAME, f)),
        }
    }

    fn progress(&self, s: &NodeState) -> Option<i64> {
        match s.version {
            Known::Is(v) => Some(v.into()),
            Known::Any => None,
        }
    }

    fn progress_bound(&self, op: &VersionedOp) -> Option<i64> {
        match *op {
            VersionedOp::Read { version, .. } => version.map(i64::from),
            VersionedOp::Write { version, .. } => version.map(|v| i64::from(v) - 1),
            VersionedOp::Cas { expected, .. } => Some(expected.into()),
            VersionedOp::CasMismatch { .. } | VersionedOp::Absent => None,
        }
    }

    fn step(&self, s: &NodeState, op: &VersionedOp) -> Option<NodeState> {
        match *op {
            VersionedOp::Read { value, version } => {
                let version_ok = version.is_none_or(|v| s.version.admits(v));
                (s.value.admits(value) && version_ok).then(|| NodeState {
                    value: Known::Is(value),
                    version: version.map_or(s.version, Known::Is),
                })
            }
            VersionedOp::Write { value, version } => {
                let version = match (s.version, version) {
                    (Known::Is(n), Some(reported)) if n + 1 != reported => return None,
                    (_, Some(reported)) => Known::Is(reported),
                    (Known::Is(n), None) => Known::Is(n + 1),
                    (Known::Any, None) => Known::Any,
                };
                Some(NodeState {
                    value: Known::Is(value),
                    version,
                })
            }
            VersionedOp::Cas { expected, value } => s.version.admits(expected).then(|| NodeState {
                value: Known::Is(value),
                version: Known::Is(expected + 1),
            }),
            VersionedOp::CasMismatch { expected } => {
                (s.version != Known::Is(expected)).then_some(*s)
            }
            // The node exists in every state: created before the history, never deleted.
            VersionedOp::Absent => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(value: Option<i64>, version: i32) -> NodeState {
        NodeState {
            value: Known::Is(value),
            version: Known::Is(version),
        }
    }

    #[test]
    fn write_bumps_version_and_read_checks_both() {
        let m = VersionedRegister::new(None, FailedCas::Ignore);
        let s = m.init();
        assert_eq!(s, at(None, 0));
        let s = m
            .step(
                &s,
                &VersionedOp::Write {
                    value: Some(5),
                    version: Some(1),
                },
            )
            .unwrap();
        assert_eq!(s, at(Some(5), 1));
        assert_eq!(
            m.step(
                &s,
                &VersionedOp::Write {
                    value: Some(6),
                    version: Some(3)
                }
            ),
            None
        );
        assert_eq!(
            m.step(
                &s,
                &VersionedOp::Write {
                    value: Some(6),
                    version: None
                }
            ),
            Some(at(Some(6), 2))
        );
        assert!(m
            .step(
                &s,
                &VersionedOp::Read {
                    value: Some(5),
                    version: Some(1)
                }
            )
            .is_some());
        assert!(m
            .step(
                &s,
                &VersionedOp::Read {
                    value: Some(5),
                    version: Some(2)
                }
            )
            .is_none());
        assert!(m
            .step(
                &s,
                &VersionedOp::Read {
                    value: Some(4),
                    version: Some(1)
                }
            )
            .is_none());
        assert!(m
            .step(
                &s,
                &VersionedOp::Read {
                    value: Some(5),
                    version: None
                }
            )
            .is_some());
    }

    #[test]
    fn no_node_answers_are_absences_no_state_allows() {
        let m = VersionedRegister::new(None, FailedCas::Ignore);
        assert_eq!(m.step(&m.init(), &VersionedOp::Absent), None);
        assert_eq!(m.step(&m.any_state().unwrap(), &VersionedOp::Absent), None);
        assert_eq!(m.progress_bound(&VersionedOp::Absent), None);
    }

    #[test]
    fn cas_needs_the_expected_version_and_mismatch_another() {
        let m = VersionedRegister::new(Some(1), FailedCas::Mismatch);
        let s = at(Some(1), 4);
        assert_eq!(
            m.step(
                &s,
                &VersionedOp::Cas {
                    expected: 4,
                    value: Some(9)
                }
            ),
            Some(at(Some(9), 5))
        );
        assert_eq!(
            m.step(
                &s,
                &VersionedOp::Cas {
                    expected: 3,
                    value: Some(9)
                }
            ),
            None
        );
        assert_eq!(m.step(&s, &VersionedOp::CasMismatch { expected: 4 }), None);
        assert_eq!(
            m.step(&s, &VersionedOp::CasMismatch { expected: 3 }),
            Some(s)
        );
        let any = m.any_state().unwrap();
        assert_eq!(
            m.step(
                &any,
                &VersionedOp::Cas {
                    expected: 7,
                    value: None
                }
            ),
            Some(at(None, 8))
        );
    }
}
