//! The two epochs a server persists, as ZooKeeper does in `acceptedEpoch`
//! and `currentEpoch` in its data directory: the newest epoch it promised
//! to follow (a leader's LEADERINFO, or its own proposal as leader) and the
//! epoch whose history it has fully taken (NEWLEADER acknowledged). Each is
//! written to a temporary file, synced and renamed, so a crash leaves the
//! old or the new value and a restart never goes back.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// File of the accepted epoch.
const ACCEPTED: &str = "acceptedEpoch";
/// File of the current epoch.
const CURRENT: &str = "currentEpoch";

/// The persisted epochs of one data directory.
#[derive(Debug)]
pub struct Epochs {
    dir: PathBuf,
    accepted: u64,
    current: u64,
}

/// The epoch a zxid belongs to (its high 32 bits).
pub fn epoch_of(zxid: i64) -> u64 {
    (zxid as u64) >> 32
}

/// The first zxid of `epoch` (counter 0: no transaction has it).
pub fn epoch_start(epoch: u64) -> i64 {
    (epoch << 32) as i64
}

impl Epochs {
    /// Reads the epochs in `dir`. A missing file is the epoch of `last_zxid`
    /// (a data directory from before the server was in an ensemble).
    pub fn load(dir: &Path, last_zxid: i64) -> Result<Epochs, String> {
        let read = |name: &str| -> Result<Option<u64>, String> {
            let path = dir.join(name);
            match fs::read_to_string(&path) {
                Ok(text) => text.trim().parse().map(Some).map_err(|_| {
                    format!(
                        "{}: expected an epoch, got {:?}",
                        path.display(),
                        text.trim()
                    )
                }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(format!("{}: {e}", path.display())),
            }
        };
        let current = read(CURRENT)?.unwrap_or(epoch_of(last_zxid));
        let accepted = read(ACCEPTED)?.unwrap_or(current);
        if accepted < current {
            return Err(format!(
                "{}: acceptedEpoch {accepted} is below currentEpoch {current}; refusing to start",
                dir.display()
            ));
        }
        Ok(Epochs {
            dir: dir.to_path_buf(),
            accepted,
            current,
        })
    }

    /// The newest epoch this server promised to follow.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// The epoch whose leader's history this server has taken.
    pub fn current(&self) -> u64 {
        self.current
    }

    /// Persists a newer accepted epoch.
    pub fn set_accepted(&mut self, epoch: u64) -> Result<(), String> {
        let accepted = self.accepted;
        crate::invariant::check(
            epoch >= accepted,
            "the accepted epoch never decreases",
            || format!("{accepted} would become {epoch}"),
        );
        write_number(&self.dir, ACCEPTED, epoch)?;
        self.accepted = epoch;
        Ok(())
    }

    /// Persists a newer current epoch (the accepted one is at least as new).
    pub fn set_current(&mut self, epoch: u64) -> Result<(), String> {
        let current = self.current;
        crate::invariant::check(
            epoch >= current,
            "the current epoch never decreases",
            || format!("{current} would become {epoch}"),
        );
        if epoch > self.accepted {
            self.set_accepted(epoch)?;
        }
        write_number(&self.dir, CURRENT, epoch)?;
        self.current = epoch;
        Ok(())
    }
}

/// Writes `value` to `dir/name` so that a crash leaves the old or the new value.
fn write_number(dir: &Path, name: &str, value: u64) -> Result<(), String> {
    let tmp = dir.join(format!("{name}.tmp"));
    let path = dir.join(name);
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(format!("{value}\n").as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_persist_and_default_to_the_log() {
        let dir = std::env::temp_dir().join(format!("keeperd-epochs-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let mut e = Epochs::load(&dir, epoch_start(3) + 7).unwrap();
        assert_eq!((e.accepted(), e.current()), (3, 3));
        e.set_accepted(5).unwrap();
        e.set_current(4).unwrap();
        let e = Epochs::load(&dir, 0).unwrap();
        assert_eq!((e.accepted(), e.current()), (5, 4));
        assert_eq!(epoch_of(epoch_start(9) | 0xffff), 9);
        fs::write(dir.join(CURRENT), "6\n").unwrap();
        assert!(Epochs::load(&dir, 0)
            .unwrap_err()
            .contains("below currentEpoch"));
        fs::write(dir.join(CURRENT), "x\n").unwrap();
        assert!(Epochs::load(&dir, 0)
            .unwrap_err()
            .contains("expected an epoch"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[should_panic(
        expected = "invariant violated: the accepted epoch never decreases: 5 would become 4"
    )]
    fn an_accepted_epoch_going_back_stops_the_server() {
        let dir = std::env::temp_dir().join(format!("keeperd-epochs-back-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mut e = Epochs::load(&dir, epoch_start(5)).unwrap();
        let _ = fs::remove_dir_all(&dir);
        let _ = e.set_accepted(4);
    }
}
