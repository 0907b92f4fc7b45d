//! The layer's semantics on a real FUSE mount in a temporary directory (needs root and
//! `/dev/fuse`, as the nodes do).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::fs::Lost;
use super::serve;

/// A layer mounted over `<tmp>/backing` at `<tmp>/mnt`, served by a thread, unmounted when
/// dropped.
struct Mounted {
    _dir: tempfile::TempDir,
    mnt: PathBuf,
    port_file: PathBuf,
    server: Option<std::thread::JoinHandle<anyhow::Result<()>>>,
}

impl Mounted {
    fn new() -> Mounted {
        let dir = tempfile::tempdir().unwrap();
        let backing = dir.path().join("backing");
        let mnt = dir.path().join("mnt");
        let port_file = dir.path().join("control.port");
        fs::create_dir_all(&backing).unwrap();
        fs::create_dir_all(&mnt).unwrap();
        let (b, m, s) = (backing.clone(), mnt.clone(), port_file.clone());
        let server = std::thread::spawn(move || serve::run(&b, &m, &s));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(is_mount(&mnt) && port_file.exists()) {
            assert!(Instant::now() < deadline, "the layer did not mount");
            std::thread::sleep(Duration::from_millis(20));
        }
        Mounted {
            _dir: dir,
            mnt,
            port_file,
            server: Some(server),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.mnt.join(name)
    }

    fn lose(&self) -> Lost {
        serde_json::from_str(&serve::command(&self.port_file, "lose").unwrap()).unwrap()
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.mnt).status();
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
    }
}

fn is_mount(path: &Path) -> bool {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let want = path.to_string_lossy();
    mounts
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(want.as_ref()) && l.contains("fuse"))
}

fn append(path: &Path, bytes: &[u8]) -> File {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(bytes).unwrap();
    f
}

#[test]
fn unsynced_writes_are_lost_and_synced_ones_kept() {
    let m = Mounted::new();
    let a = append(&m.path("a"), b"never synced");
    drop(a);
    let b = append(&m.path("b"), b"synced");
    b.sync_data().unwrap();
    let mut b = b;
    b.write_all(b" then not").unwrap();
    drop(b);
    assert_eq!(
        fs::read(m.path("a")).unwrap(),
        b"never synced",
        "reads see unsynced data"
    );
    assert_eq!(fs::read(m.path("b")).unwrap(), b"synced then not");
    let lost = m.lose();
    assert_eq!(
        lost,
        Lost {
            bytes: 12 + 9,
            files: 2
        }
    );
    assert_eq!(
        fs::read(m.path("a")).unwrap(),
        b"",
        "created, never synced: empty"
    );
    assert_eq!(fs::read(m.path("b")).unwrap(), b"synced");
    assert_eq!(m.lose(), Lost::default(), "nothing left to lose");
}

#[test]
fn overwrites_truncates_and_preallocation_go_back_to_the_synced_content() {
    let m = Mounted::new();
    let f = OpenOptions::new()
        .create(true)
        .read(true)
        .write(true)
        .truncate(true)
        .open(m.path("log"))
        .unwrap();
    let original: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    f.write_all_at(&original, 0).unwrap();
    f.sync_all().unwrap();
    f.write_all_at(&[0xff; 100], 5000).unwrap();
    // Preallocation as ZooKeeper does it: one byte far past the end.
    f.write_all_at(&[0], 64 << 20).unwrap();
    assert_eq!(f.metadata().unwrap().len(), (64 << 20) + 1);
    f.set_len(3000).unwrap();
    let mut head = [0u8; 10];
    f.read_exact_at(&mut head, 2990).unwrap();
    assert_eq!(head[..], original[2990..3000]);
    drop(f);
    let lost = m.lose();
    assert_eq!(lost.files, 1);
    assert_eq!(fs::read(m.path("log")).unwrap(), original);
    // fdatasync through another handle makes the data durable too.
    let f = OpenOptions::new().write(true).open(m.path("log")).unwrap();
    f.set_len(10).unwrap();
    let other = File::open(m.path("log")).unwrap();
    other.sync_data().unwrap();
    assert_eq!(m.lose(), Lost::default());
    assert_eq!(fs::read(m.path("log")).unwrap(), original[..10]);
}

#[test]
fn rename_over_a_file_is_durable_but_the_unsynced_data_renamed_is_not() {
    let m = Mounted::new();
    // Write, fsync, rename: the safe replacement survives.
    let f = append(&m.path("epoch.tmp"), b"7\n");
    f.sync_all().unwrap();
    fs::rename(m.path("epoch.tmp"), m.path("epoch")).unwrap();
    // Write, rename without fsync: the name survives, the data does not.
    append(&m.path("other.tmp"), b"8\n");
    fs::rename(m.path("other.tmp"), m.path("other")).unwrap();
    fs::create_dir(m.path("dir")).unwrap();
    append(&m.path("dir/x"), b"x").sync_all().unwrap();
    fs::rename(m.path("dir"), m.path("moved")).unwrap();
    append(&m.path("moved/x"), b"y");
    let lost = m.lose();
    assert_eq!(lost, Lost { bytes: 3, files: 2 });
    assert_eq!(fs::read(m.path("epoch")).unwrap(), b"7\n");
    assert_eq!(fs::read(m.path("other")).unwrap(), b"");
    assert!(!m.path("other.tmp").exists() && !m.path("dir").exists());
    assert_eq!(fs::read(m.path("moved/x")).unwrap(), b"x");
    // An unlinked file's unsynced data is gone with it, and counts for nothing.
    append(&m.path("gone"), b"zzz");
    fs::remove_file(m.path("gone")).unwrap();
    assert_eq!(m.lose(), Lost::default());
    let mut names: Vec<_> = fs::read_dir(&m.mnt)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["epoch", "moved", "other"]);
}
