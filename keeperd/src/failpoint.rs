//! Failpoints: deliberate faults compiled into keeperd only with the `failpoints` cargo
//! feature (release builds leave it off), to prove on a broken server that stampede's
//! checkers catch what it breaks. A failpoint acts only when named in the environment
//! variable `KEEPERD_FAILPOINTS` (names separated by commas).
//!
//! - `forget-on-start`: before recovery, the data directory is emptied, so the server comes
//!   back from every restart with zxid 0 and no znode: every acknowledged write is lost.

use std::path::Path;

/// The environment variable naming the failpoints that act.
pub const VARIABLE: &str = "KEEPERD_FAILPOINTS";

/// Whether the failpoint `name` is named in [`VARIABLE`].
pub fn active(name: &str) -> bool {
    std::env::var(VARIABLE).is_ok_and(|v| named(&v, name))
}

/// Whether the comma-separated `list` names `name`.
fn named(list: &str, name: &str) -> bool {
    list.split(',').any(|f| f.trim() == name)
}

/// Runs the failpoints due when the server starts, before it recovers from `data_dir`.
pub fn at_start(data_dir: &Path) -> Result<(), String> {
    if active("forget-on-start") {
        forget(data_dir)?;
        tracing::warn!(
            "failpoint forget-on-start: emptied {}: every acknowledged write is lost",
            data_dir.display()
        );
    }
    Ok(())
}

/// Removes everything in `data_dir`, leaving it empty.
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
    fn failpoints_act_only_when_named() {
        assert!(named("forget-on-start", "forget-on-start"));
        assert!(named("slow-fsync, forget-on-start", "forget-on-start"));
        assert!(!named("forget-on-starts", "forget-on-start"));
        assert!(!named("", "forget-on-start"));
    }

    #[test]
    fn forgetting_empties_the_data_directory() {
        let dir = std::env::temp_dir().join(format!("keeperd-failpoint-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("snapshots")).unwrap();
        std::fs::write(dir.join("log.1"), b"txns").unwrap();
        std::fs::write(dir.join("snapshots/snap.1"), b"tree").unwrap();
        forget(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        assert!(dir.exists(), "the directory itself stays");
        forget(&dir.join("missing")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
