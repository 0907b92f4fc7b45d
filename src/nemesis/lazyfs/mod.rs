//! The `lose-unfsynced` fault: a FUSE layer under each server's data directory that keeps
//! what was written since the last fsync apart and throws it away on command, as a power
//! loss would ([`fs`]), the agent that serves it on a node ([`serve`]), and the nemesis and
//! database wrapper that put it to use.

pub mod fs;
mod layer;
mod nemesis;
pub mod serve;
mod undo;

use std::sync::Arc;

pub use layer::{port_file, OnLayer};
pub use nemesis::LoseUnsynced;

use crate::db::Db;

/// The fault kind.
pub const KIND: &str = "lose-unfsynced";

/// `db` on the layer when `package` has a lose-unfsynced fault, alone or as a sequence's step
/// (its servers must then keep their data on the layer from their first start), else `db`
/// itself.
pub fn for_package(package: &super::NemesisConfig, db: Arc<dyn Db>) -> Arc<dyn Db> {
    let step_kinds = package
        .faults
        .iter()
        .flat_map(|f| f.steps.iter().flatten())
        .filter_map(|s| match s {
            super::sequence::Step::Fault(f) => Some(f.kind.as_str()),
            _ => None,
        });
    let mut kinds = package
        .faults
        .iter()
        .map(|f| f.kind.as_str())
        .chain(step_kinds);
    if kinds.any(|k| k == KIND) {
        Arc::new(OnLayer::new(db))
    } else {
        db
    }
}

#[cfg(test)]
mod tests;
