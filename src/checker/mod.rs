//! Checkers: models, the linearizability engine and ZooKeeper's own guarantees.
//!
//! [`check_history`] ([`linearizability`]) is the entry point: it pairs a history's
//! invocations with their completions ([`calls`]), reads them through a [`model::Model`]
//! ([`models`]), splits them by key and checks each key's part with the Wing & Gong search
//! ([`engine`], [`search`], [`cache`]), and shrinks a failing part to a counterexample
//! ([`shrink`]). The verdict is a [`result::CheckResult`].

pub mod cache;
pub mod calls;
#[cfg(test)]
mod differential_tests;
pub mod election;
pub mod engine;
pub mod exposure;
pub mod formats;
pub mod linearizability;
pub mod liveness;
pub mod lost;
pub mod model;
pub mod models;
pub mod mutex_overlap;
#[cfg(test)]
mod no_node_tests;
pub mod overlap;
pub mod parallel;
pub mod replicas;
pub mod result;
pub mod search;
pub mod server_logs;
pub mod shrink;
#[cfg(test)]
pub mod synth;
#[cfg(test)]
mod tests;
pub mod zookeeper;

pub use linearizability::{check_history, CheckOptions, ModelKind};
