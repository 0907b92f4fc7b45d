//! Clients: one ZooKeeper session per logical process, the exact classification of how an
//! operation ended, and every server's tree read through sessions pinned to it.
//!
//! A process is bound to one node (or to the whole ensemble) and owns one session. After an
//! operation ends `info` its session is dropped and a fresh process, with a new id and a new
//! session, takes its place, so a process never has two operations open.

pub mod cut_proxy;
mod outcome;
pub mod replica_read;
mod session;
#[cfg(test)]
pub mod test_server;
pub mod tree;

pub use outcome::{classify, NoNodeIsLost, OpError};
pub use session::{setup_session, ClientOptions, Connect, NodeEndpoint, ProcessIds, Session};
