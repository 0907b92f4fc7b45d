//! Failpoints: classic replication bugs, built in only with the cargo
//! feature `failpoints` (release builds leave it off) and switched on by
//! the config line `failpoints=name,name`, so that tests can show the
//! harness catches each one. Without the feature no failpoint exists and a
//! config naming one is refused.

use std::sync::OnceLock;

/// A deliberate bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    /// A follower acknowledges proposals on arrival and writes them lazily
    /// (every 5 s), losing what it acknowledged since when its role ends.
    AckBeforeDurable,
    /// A new leader sends DIFF where TRUNC is due: a learner keeps
    /// transactions that were never committed.
    SkipTrunc,
    /// A leader commits as soon as it has a write durable itself.
    CommitBeforeQuorum,
    /// A leader that lost its quorum never steps down, keeps answering
    /// clients and commits writes on its own.
    StaleLeaderWrites,
}

impl Failpoint {
    /// Every failpoint.
    pub const ALL: [Failpoint; 4] = [
        Failpoint::AckBeforeDurable,
        Failpoint::SkipTrunc,
        Failpoint::CommitBeforeQuorum,
        Failpoint::StaleLeaderWrites,
    ];

    /// Its name in the config.
    pub fn name(self) -> &'static str {
        match self {
            Failpoint::AckBeforeDurable => "ack-before-durable",
            Failpoint::SkipTrunc => "skip-trunc",
            Failpoint::CommitBeforeQuorum => "commit-before-quorum",
            Failpoint::StaleLeaderWrites => "stale-leader-writes",
        }
    }
}

static ACTIVE: OnceLock<Vec<Failpoint>> = OnceLock::new();

/// Switches on the failpoints named in the config (once, at start).
pub fn configure(names: &[String]) -> Result<(), String> {
    if names.is_empty() {
        return Ok(());
    }
    if !cfg!(feature = "failpoints") {
        return Err(format!(
            "failpoints={}: this keeperd was built without the `failpoints` feature",
            names.join(",")
        ));
    }
    let mut on = Vec::new();
    for name in names {
        let known = Failpoint::ALL.iter().find(|f| f.name() == name);
        match known {
            Some(f) => on.push(*f),
            None => {
                let all: Vec<&str> = Failpoint::ALL.iter().map(|f| f.name()).collect();
                return Err(format!(
                    "failpoints: unknown failpoint {name:?} (known: {})",
                    all.join(", ")
                ));
            }
        }
    }
    tracing::warn!("failpoints on: {}", names.join(","));
    let _ = ACTIVE.set(on);
    Ok(())
}

/// Whether failpoint `f` is on (never without the `failpoints` feature).
pub fn active(f: Failpoint) -> bool {
    cfg!(feature = "failpoints") && ACTIVE.get().is_some_and(|on| on.contains(&f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_off_by_default() {
        assert!(configure(&[]).is_ok());
        assert!(!active(Failpoint::SkipTrunc));
        let e = configure(&["nope".to_string()]).unwrap_err();
        if cfg!(feature = "failpoints") {
            assert!(e.contains("unknown failpoint"), "{e}");
        } else {
            assert!(e.contains("without the `failpoints` feature"), "{e}");
        }
    }
}
