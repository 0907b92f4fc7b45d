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

pub use layer::OnLayer;
pub use nemesis::LoseUnsynced;

use crate::db::Db;

/// The fault kind.
pub const KIND: &str = "lose-unfsynced";

/// `db` on the layer when `package` has a lose-unfsynced fault (its servers must then keep
/// their data on the layer from their first start), else `db` itself.
pub fn for_package(package: &super::NemesisConfig, db: Arc<dyn Db>) -> Arc<dyn Db> {
    if package.faults.iter().any(|f| f.kind == KIND) {
        Arc::new(OnLayer::new(db))
    } else {
        db
    }
}

#[cfg(test)]
mod tests;
