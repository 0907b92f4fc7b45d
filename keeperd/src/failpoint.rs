//! Failpoints: classic replication bugs, built in only with the cargo
//! feature `failpoints` (release builds leave it off) and switched on by
//! the config line `failpoints=name,name`, so that tests can show the
//! harness catches each one. Without the feature no failpoint exists and a
//! config naming one is refused. The environment variable
//! `KEEPERD_FAILPOINTS` (names separated by commas) switches failpoints on
//! too, for a binary wrapped by a script.

use std::path::Path;
use std::sync::OnceLock;

/// The environment variable naming failpoints to switch on, besides the config.
pub const VARIABLE: &str = "KEEPERD_FAILPOINTS";

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
    /// The data directory is emptied (but for `myid`) before every start:
    /// the server comes back with zxid 0 and no znode.
    ForgetOnStart,
    /// Server 1, while it follows, freezes the first znode it sees set: it
    /// applies no later setData of it (its data, version and mzxid stay),
    /// serving that one stale znode while its zxid moves on with the others.
    StaleZnode,
    /// Server 1, while it follows, keeps one ephemeral of the first session it sees end
    /// (closed or expired) with ephemerals: it applies the session's end but for that node,
    /// which it serves on, owned by the session that is gone (ZOOKEEPER-4837's kind).
    KeepEphemeral,
    /// Each server, once, sends the first NodeDataChanged event that has a watcher to all
    /// its watchers but one: that client's watch is consumed (or its persistent stream goes
    /// on) without the event.
    DropWatchEvent,
    /// The transaction log is never fsync'd (its segments and their directory): writes are
    /// acknowledged once in the page cache and a power loss takes them back. The epoch
    /// files are still synced (an empty epoch file after a loss makes the server refuse to
    /// start, which would hide the lost writes), and so are snapshots.
    SkipFsync,
    /// A `multi` that fails part-way keeps the operations before the one that failed: they
    /// are committed (and replicated) as a multi of their own, while the client is told the
    /// whole multi failed.
    PartialMulti,
    /// A learner answers `sync` from its own state instead of passing it to the leader: a
    /// read after it is as stale as the learner.
    LocalSync,
    /// Sessions expire a quarter of their timeout after their server last heard from them.
    EarlyExpiry,
}

impl Failpoint {
    /// Every failpoint.
    pub const ALL: [Failpoint; 12] = [
        Failpoint::AckBeforeDurable,
        Failpoint::SkipTrunc,
        Failpoint::CommitBeforeQuorum,
        Failpoint::StaleLeaderWrites,
        Failpoint::ForgetOnStart,
        Failpoint::StaleZnode,
        Failpoint::KeepEphemeral,
        Failpoint::DropWatchEvent,
        Failpoint::SkipFsync,
        Failpoint::PartialMulti,
        Failpoint::LocalSync,
        Failpoint::EarlyExpiry,
    ];

    /// Its name in the config.
    pub fn name(self) -> &'static str {
        match self {
            Failpoint::AckBeforeDurable => "ack-before-durable",
            Failpoint::SkipTrunc => "skip-trunc",
            Failpoint::CommitBeforeQuorum => "commit-before-quorum",
            Failpoint::StaleLeaderWrites => "stale-leader-writes",
            Failpoint::ForgetOnStart => "forget-on-start",
            Failpoint::StaleZnode => "stale-znode",
            Failpoint::KeepEphemeral => "keep-ephemeral",
            Failpoint::DropWatchEvent => "drop-watch-event",
            Failpoint::SkipFsync => "skip-fsync",
            Failpoint::PartialMulti => "partial-multi",
            Failpoint::LocalSync => "local-sync",
            Failpoint::EarlyExpiry => "early-expiry",
        }
    }
}

static ACTIVE: OnceLock<Vec<Failpoint>> = OnceLock::new();

/// Switches on the failpoints named in the config or in [`VARIABLE`]
/// (once, at start).
pub fn configure(names: &[String]) -> Result<(), String> {
    let from_env = std::env::var(VARIABLE).unwrap_or_default();
    let names: Vec<String> = names
        .iter()
        .cloned()
        .chain(from_env.split(',').map(|n| n.trim().to_string()))
        .filter(|n| !n.is_empty())
        .collect();
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
    for name in &names {
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

/// Whether follower `id` skips applying a setData of `path` ([`Failpoint::StaleZnode`]):
/// server 1 freezes the first path it is asked about.
pub fn skips_set_data(id: u64, path: &str) -> bool {
    static FROZEN: OnceLock<String> = OnceLock::new();
    if id != 1 || !active(Failpoint::StaleZnode) {
        return false;
    }
    let frozen = FROZEN.get_or_init(|| {
        tracing::warn!("failpoint stale-znode: {path} is applied no more");
        path.to_string()
    });
    frozen == path
}

/// Whether follower `id` keeps ephemeral `path` when its session ends
/// ([`Failpoint::KeepEphemeral`]): server 1 keeps the first it is asked about, once.
pub fn keeps_ephemeral(id: u64, path: &str) -> bool {
    static KEPT: OnceLock<()> = OnceLock::new();
    if id != 1 || !active(Failpoint::KeepEphemeral) || KEPT.get().is_some() {
        return false;
    }
    let first = KEPT.set(()).is_ok();
    if first {
        tracing::warn!("failpoint keep-ephemeral: {path} is kept after its session ends");
    }
    first
}

/// Whether this server drops the NodeDataChanged event of `path` at `zxid` for one of its
/// watchers ([`Failpoint::DropWatchEvent`]): true once, for the first one asked about.
pub fn drops_watch_event(path: &str, zxid: i64) -> bool {
    static DROPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !active(Failpoint::DropWatchEvent) || DROPPED.swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        return false;
    }
    tracing::warn!("failpoint drop-watch-event: {path} zxid {zxid:#x}: one watcher is not told");
    true
}

/// Runs the failpoints due when the server starts, before it recovers from `data_dir`.
pub fn at_start(data_dir: &Path) -> Result<(), String> {
    if active(Failpoint::ForgetOnStart) {
        forget(data_dir)?;
        tracing::warn!(
            "failpoint forget-on-start: emptied {}: every acknowledged write is lost",
            data_dir.display()
        );
    }
    Ok(())
}

/// Removes everything in `data_dir` but `myid` (an ensemble member keeps its identity).
fn forget(data_dir: &Path) -> Result<(), String> {
    let entries = match std::fs::read_dir(data_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", data_dir.display())),
    };
    for entry in entries {
        let path = entry
            .map_err(|e| format!("{}: {e}", data_dir.display()))?
            .path();
        if path.file_name().is_some_and(|n| n == "myid") {
            continue;
        }
        let removed = match path.is_dir() {
            true => std::fs::remove_dir_all(&path),
            false => std::fs::remove_file(&path),
        };
        removed.map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
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

    #[test]
    fn forgetting_empties_the_data_directory_but_myid() {
        let dir = std::env::temp_dir().join(format!("keeperd-failpoint-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("snapshots")).unwrap();
        std::fs::write(dir.join("log.1"), b"txns").unwrap();
        std::fs::write(dir.join("myid"), b"2").unwrap();
        std::fs::write(dir.join("snapshots/snap.1"), b"tree").unwrap();
        forget(&dir).unwrap();
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].file_name(), "myid");
        forget(&dir.join("missing")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
