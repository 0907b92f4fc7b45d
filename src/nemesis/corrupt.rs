//! Data-directory corruption (`kind: corrupt`): with the server stopped, the newest transaction
//! log or snapshot in its data directory gets bits flipped, a range zeroed or the end of its
//! data cut off, and the server is started again. It may refuse to start or recover from its
//! peers; serving wrong data is for the checkers to catch.
//!
//! Before the damage, the original file is copied to [`BACKUP_ROOT`]`/<host>/original` and its
//! path written to `.../path` (the marker, written last). A server that has run since keeps
//! what it made of the damage (the copy is dropped); one that is not running when the fault
//! ends, or when `stampede heal` finds the marker, gets the original back and is restarted.
//! The damage itself is done on the node by the stampede agent (`agent-corrupt`), which
//! finds where the file's data ends (logs are padded with zeros ahead of their records).

use std::collections::BTreeMap;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::kind::{self, refuse, Checking, FaultKind, HealStage, Healed, Parts, Refusal};
use super::package::FaultConfig;
use super::target::SeededTarget;
use super::{agent, Nemesis};
use crate::control::shell::quote;
use crate::control::{Control, Node, Retry};
use crate::db::Db;

/// The fault kind `corrupt`: settings under `corrupt:` ([`CorruptConfig`]).
pub struct CorruptKind;

#[async_trait::async_trait]
impl FaultKind for CorruptKind {
    fn name(&self) -> &'static str {
        "corrupt"
    }

    fn settings_key(&self) -> Option<&'static str> {
        Some("corrupt")
    }

    fn check(&self, fault: &FaultConfig, checking: &Checking) -> Result<(), Refusal> {
        kind::check_node_target(fault, checking)?;
        let cfg: CorruptConfig = kind::settings(fault)?;
        cfg.check().map_err(|e| refuse("corrupt", e))
    }

    fn build(&self, fault: &FaultConfig, parts: Parts) -> anyhow::Result<Arc<dyn Nemesis>> {
        kind::aimed(fault, parts, |c, db, target, cfg| {
            Ok(CorruptNemesis::new(c, db, target, cfg))
        })
    }

    fn heal_stage(&self) -> Option<HealStage> {
        Some(HealStage::Files)
    }

    async fn heal_node(&self, control: &Control, db: &dyn Db, node: &Node) -> Healed {
        heal(control, db, node).await
    }

    fn leftover_probe(&self, node: &Node) -> Option<String> {
        Some(leftover_probe(node))
    }
}

/// Where copies of damaged files are kept on a node, one folder per node host (local nodes
/// share a disk).
pub const BACKUP_ROOT: &str = "/var/lib/stampede/corrupt";

/// How long a restarted server is watched for serving or exiting.
pub(super) const WATCH: Duration = Duration::from_secs(20);

/// Which of the server's files is damaged: the newest of its kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataFile {
    /// The newest transaction log, `log.<zxid>`.
    #[default]
    Log,
    /// The newest snapshot, `snapshot.<zxid>`.
    Snapshot,
}

impl DataFile {
    /// The file name prefix: `log` or `snapshot`.
    pub fn prefix(self) -> &'static str {
        match self {
            DataFile::Log => "log",
            DataFile::Snapshot => "snapshot",
        }
    }
}

/// How the file is damaged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// One random bit flipped in each of `bytes` random bytes of its data.
    #[default]
    Flip,
    /// `bytes` consecutive bytes of its data, at a random place, set to zero.
    Zero,
    /// The last `bytes` bytes of its data cut off (with the padding after them).
    Truncate,
}

/// A corrupt fault's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CorruptConfig {
    /// `log` (default) or `snapshot`.
    pub file: DataFile,
    /// `flip` (default), `zero` or `truncate`.
    pub how: How,
    /// How many bytes are damaged (default 16).
    pub bytes: u64,
}

impl Default for CorruptConfig {
    fn default() -> Self {
        CorruptConfig {
            file: DataFile::Log,
            how: How::Flip,
            bytes: 16,
        }
    }
}

/// The most bytes one fault may damage.
const MAX_BYTES: u64 = 1 << 20;

impl CorruptConfig {
    /// Checks the settings; the error is a sentence naming the field.
    pub fn check(&self) -> Result<(), String> {
        match self.bytes {
            0 => Err("bytes 0 damages nothing; give at least 1".to_string()),
            n if n > MAX_BYTES => Err(format!("bytes {n} is more than {MAX_BYTES} (1 MiB)")),
            _ => Ok(()),
        }
    }
}

/// What was done to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Damage {
    /// The file's path on the node.
    pub file: String,
    /// How it was damaged.
    pub how: How,
    /// Its size before.
    pub size: u64,
    /// One past its last non-zero byte before: where its data ended.
    pub data_end: u64,
    /// Flip: the offsets of the bytes changed, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offsets: Vec<u64>,
    /// Flip: the bit (0 = least significant) flipped in each of those bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bits: Vec<u8>,
    /// Zero: the first byte zeroed; truncate: the file's new size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// Zero or truncate: how many bytes of data were zeroed or cut off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub len: Option<u64>,
}

/// Damages the file at `path` as `how` says over `bytes` bytes of its data (its bytes up to
/// the last non-zero one), fsyncs it and says what was done. An error if it holds no data.
pub fn damage(path: &Path, how: How, bytes: u64, rng: &mut impl Rng) -> io::Result<Damage> {
    let data = std::fs::read(path)?;
    let size = data.len() as u64;
    let data_end = data.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    if data_end == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} holds no data to damage", path.display()),
        ));
    }
    let n = (bytes as usize).min(data_end);
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let mut done = Damage {
        file: path.display().to_string(),
        how,
        size,
        data_end: data_end as u64,
        offsets: Vec::new(),
        bits: Vec::new(),
        from: None,
        len: None,
    };
    match how {
        How::Flip => {
            let mut offsets = rand::seq::index::sample(rng, data_end, n).into_vec();
            offsets.sort_unstable();
            for at in offsets {
                let bit = rng.gen_range(0..8u8);
                file.write_all_at(&[data[at] ^ (1 << bit)], at as u64)?;
                done.offsets.push(at as u64);
                done.bits.push(bit);
            }
        }
        How::Zero => {
            let from = rng.gen_range(0..=data_end - n);
            file.write_all_at(&vec![0; n], from as u64)?;
            done.from = Some(from as u64);
            done.len = Some(n as u64);
        }
        How::Truncate => {
            let from = (data_end - n) as u64;
            file.set_len(from)?;
            done.from = Some(from);
            done.len = Some(n as u64);
        }
    }
    file.sync_all()?;
    Ok(done)
}

/// The newest file named `<prefix>.<hex zxid>` among `names` (a directory listing).
fn newest<'a>(names: &'a str, prefix: &str) -> Option<&'a str> {
    names
        .lines()
        .filter_map(|name| {
            let zxid = name.strip_prefix(prefix)?.strip_prefix('.')?;
            let zxid = i64::from_str_radix(zxid, 16).ok()?;
            Some((zxid, name))
        })
        .max()
        .map(|(_, name)| name)
}

/// The backup folder of `node`.
/// A shell command that prints `copy of a corrupted data file` when a corrupt fault on `node`
/// was not healed.
fn leftover_probe(node: &Node) -> String {
    format!(
        "[ -e {} ] && echo 'copy of a corrupted data file'; true",
        quote(&backup_dir(node))
    )
}

fn backup_dir(node: &Node) -> String {
    format!("{BACKUP_ROOT}/{}", node.host)
}

/// Puts the original file back when a copy is marked, and drops the copy: the heal of a
/// server that is not running. Prints the restored path, if any.
fn restore_command(node: &Node) -> String {
    format!(
        "d={d}; if [ -f $d/path ]; then f=$(cat $d/path) && cp -p $d/original \"$f\" && sync && echo \"$f\"; fi && rm -rf $d",
        d = quote(&backup_dir(node))
    )
}

/// Drops the copy: the damage is the server's own now.
fn drop_command(node: &Node) -> String {
    format!("rm -rf {}", quote(&backup_dir(node)))
}

/// Heals a corrupt fault on `node` after a controller crash: when a copy of a damaged file is
/// marked, puts it back if the server is not running, and drops it. Says what it did.
async fn heal(control: &Control, db: &dyn Db, node: &Node) -> anyhow::Result<Option<&'static str>> {
    let probe = format!("test -e {} && echo yes || true", quote(&backup_dir(node)));
    if control.exec(node, &probe, Retry::Idempotent).await? != "yes" {
        return Ok(None);
    }
    if db.is_running(control, node).await? {
        control
            .exec(node, &drop_command(node), Retry::Idempotent)
            .await?;
        return Ok(Some(
            "dropped the copy of a corrupted file its server runs on",
        ));
    }
    let restored = control
        .exec(node, &restore_command(node), Retry::Idempotent)
        .await?;
    Ok((!restored.is_empty()).then_some("restored a corrupted data file"))
}

/// Looks, 250 ms apart, that must all find a restarted server neither serving nor running
/// before it counts as exited: one look has missed a server just started (on a loaded
/// machine a keeperd that served 30 ms after its start was judged exited), while a server
/// that refuses its files is gone for good.
const EXITED_LOOKS: u32 = 4;

/// What a restarted server did within `limit` (usually [`WATCH`]): `serving`, `exited` (not
/// running on [`EXITED_LOOKS`] looks in a row), or `running, not serving`.
pub(super) async fn watch(
    control: &Control,
    db: &dyn Db,
    node: &Node,
    limit: Duration,
) -> anyhow::Result<&'static str> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut not_running = 0;
    loop {
        if crate::db::modes(db, std::slice::from_ref(node)).await[0].is_some() {
            return Ok("serving");
        }
        not_running = match db.is_running(control, node).await? {
            true => 0,
            false => not_running + 1,
        };
        if not_running >= EXITED_LOOKS {
            return Ok("exited");
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(match not_running {
                0 => "running, not serving",
                _ => "exited",
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Damages the newest log or snapshot of the servers on the nodes a target picks, each
/// stopped first and started again after.
pub struct CorruptNemesis {
    control: Control,
    db: Arc<dyn Db>,
    target: SeededTarget,
    cfg: CorruptConfig,
    hit: Mutex<Vec<Node>>,
}

impl CorruptNemesis {
    /// A corrupt fault on the servers `target` picks at each start.
    pub fn new(
        control: Control,
        db: Arc<dyn Db>,
        target: SeededTarget,
        cfg: CorruptConfig,
    ) -> CorruptNemesis {
        CorruptNemesis {
            control,
            db,
            target,
            cfg,
            hit: Mutex::new(Vec::new()),
        }
    }

    /// Stops the server on `node`, copies and damages its newest file, and starts it again.
    /// `Ok(Err(why))` when it had no such file (nothing was damaged).
    async fn corrupt(&self, node: &Node) -> anyhow::Result<Result<Damage, String>> {
        let (control, db) = (&self.control, self.db.as_ref());
        db.stop(control, node).await?;
        let dir = db.txn_dir(node);
        let names = control
            .exec(
                node,
                &format!("ls -1 {} 2>/dev/null || true", quote(&dir)),
                Retry::Idempotent,
            )
            .await?;
        let prefix = self.cfg.file.prefix();
        let Some(name) = newest(&names, prefix) else {
            db.start(control, node).await?;
            return Ok(Err(format!("no {prefix} file in {dir}")));
        };
        let file = format!("{dir}/{name}");
        let backup = format!(
            "d={d}; if [ -e $d ]; then echo \"$d holds the copy of an earlier fault\" >&2; exit 1; fi; \
             mkdir -p $d && cp -p {f} $d/original && sync && echo {f} > $d/path.new && mv $d/path.new $d/path && sync",
            d = quote(&backup_dir(node)),
            f = quote(&file),
        );
        control.exec(node, &backup, Retry::Once).await?;
        let agent = agent::install(control, node).await?;
        let how = serde_json::to_value(self.cfg.how)?;
        let command = format!(
            "{agent} agent-corrupt --file {} --how {} --bytes {}",
            quote(&file),
            how.as_str().unwrap_or("flip"),
            self.cfg.bytes
        );
        let out = control.exec(node, &command, Retry::Once).await?;
        let damage: Damage = serde_json::from_str(&out)
            .with_context(|| format!("on {}: agent-corrupt said {out:?}", node.name))?;
        db.start(control, node).await?;
        Ok(Ok(damage))
    }
}

#[async_trait::async_trait]
impl Nemesis for CorruptNemesis {
    fn kind(&self) -> &str {
        "corrupt"
    }

    fn target(&self) -> String {
        self.target.to_string()
    }

    /// Damages each picked running server's newest file; the value lists the nodes damaged
    /// (`nodes`), what was done to each (`damage`: file, offsets or range), nodes left alone
    /// and why (`skipped`), and what each restarted server did (`after_restart`: serving,
    /// exited, or running but not serving).
    async fn start(&self) -> anyhow::Result<serde_json::Value> {
        let (control, db) = (&self.control, self.db.as_ref());
        let running = self.target.pick_running(control, db, "corrupt").await?;
        self.hit
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(running.iter().cloned());
        let results =
            futures::future::join_all(running.iter().map(|node| self.corrupt(node))).await;
        let (mut nodes, mut damage, mut skipped) = (Vec::new(), Vec::new(), BTreeMap::new());
        for (node, result) in running.iter().zip(results) {
            match result? {
                Ok(done) => {
                    nodes.push(node.name.clone());
                    let mut value = serde_json::to_value(done)?;
                    value["node"] = json!(node.name);
                    damage.push(value);
                }
                Err(why) => {
                    skipped.insert(node.name.clone(), why);
                }
            }
        }
        let watched =
            futures::future::join_all(running.iter().map(|n| watch(control, db, n, WATCH)));
        let mut after = BTreeMap::new();
        for (node, what) in running.iter().zip(watched.await) {
            after.insert(node.name.clone(), what?);
        }
        Ok(json!({
            "nodes": nodes,
            "damage": damage,
            "skipped": skipped,
            "after_restart": after,
        }))
    }

    /// For each server damaged: one running came back on its own and keeps its data (the
    /// copy is dropped); one not running gets its original file back and is started again.
    /// The value says which (`came_back`: node → bool) and what a restored server did.
    async fn stop(&self) -> anyhow::Result<serde_json::Value> {
        let nodes = std::mem::take(&mut *self.hit.lock().unwrap_or_else(|p| p.into_inner()));
        let (control, db) = (&self.control, self.db.as_ref());
        let mut came_back = BTreeMap::new();
        let mut down = Vec::new();
        for node in &nodes {
            let up = db.is_running(control, node).await?;
            came_back.insert(node.name.clone(), up);
            let heal = match up {
                true => drop_command(node),
                false => restore_command(node),
            };
            control.exec(node, &heal, Retry::Idempotent).await?;
            if !up {
                db.start(control, node).await?;
                down.push(node);
            }
        }
        // Restarted together: a quorum of them may be needed before any serves.
        let watched = futures::future::join_all(down.iter().map(|n| watch(control, db, n, WATCH)));
        let mut restored = BTreeMap::new();
        for (node, what) in down.iter().zip(watched.await) {
            restored.insert(node.name.clone(), what?);
        }
        let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
        Ok(json!({ "nodes": names, "came_back": came_back, "after_restore": restored }))
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    /// A file of `data` followed by `padding` zero bytes, as a padded log looks.
    fn file_with(data: &[u8], padding: usize) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.100000001");
        let mut bytes = data.to_vec();
        bytes.resize(data.len() + padding, 0);
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    fn sample() -> Vec<u8> {
        (0..4096u32).map(|i| (i % 251) as u8 | 1).collect()
    }

    #[test]
    fn flipping_changes_one_bit_in_each_of_the_bytes_asked_within_the_data() {
        let data = sample();
        let (_dir, path) = file_with(&data, 1000);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let done = damage(&path, How::Flip, 16, &mut rng).unwrap();
        assert_eq!((done.size, done.data_end), (5096, 4096));
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after.len(), 5096, "flipping keeps the size");
        let changed: Vec<u64> = (0..after.len())
            .filter(|&i| after[i] != data.get(i).copied().unwrap_or(0))
            .map(|i| i as u64)
            .collect();
        assert_eq!(changed, done.offsets, "exactly the recorded bytes changed");
        assert_eq!(changed.len(), 16);
        for (at, bit) in done.offsets.iter().zip(&done.bits) {
            let at = *at as usize;
            assert_eq!(after[at] ^ data[at], 1 << bit, "one bit of byte {at}");
        }
    }

    #[test]
    fn zeroing_clears_the_recorded_range_and_nothing_else() {
        let data = sample();
        let (_dir, path) = file_with(&data, 10);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let done = damage(&path, How::Zero, 300, &mut rng).unwrap();
        let (from, len) = (done.from.unwrap() as usize, done.len.unwrap() as usize);
        assert_eq!(len, 300);
        assert!(from + len <= 4096, "within the data");
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after.len(), 4106);
        for (i, b) in after.iter().enumerate() {
            let want = if (from..from + len).contains(&i) {
                0
            } else {
                data.get(i).copied().unwrap_or(0)
            };
            assert_eq!(*b, want, "byte {i}");
        }
    }

    #[test]
    fn truncating_cuts_the_end_of_the_data_and_the_padding() {
        let data = sample();
        let (_dir, path) = file_with(&data, 1 << 16);
        let done = damage(&path, How::Truncate, 100, &mut rand::thread_rng()).unwrap();
        assert_eq!((done.from, done.len), (Some(3996), Some(100)));
        assert_eq!(std::fs::read(&path).unwrap(), data[..3996]);
        // Asking for more than there is cuts all of the data.
        let done = damage(&path, How::Truncate, 10_000, &mut rand::thread_rng()).unwrap();
        assert_eq!((done.from, done.len), (Some(0), Some(3996)));
        assert!(std::fs::read(&path).unwrap().is_empty());
        let err = damage(&path, How::Flip, 1, &mut rand::thread_rng()).unwrap_err();
        assert!(err.to_string().contains("holds no data"), "{err}");
    }

    #[test]
    fn the_newest_file_is_the_highest_zxid_of_its_kind() {
        let names = "log.100000001\nlog.f00000002\nlog.1000000010\nsnapshot.0\nsnapshot.200000003\nsnapshot.300000004.tmp\nmyid\n";
        assert_eq!(newest(names, "log"), Some("log.1000000010"));
        assert_eq!(newest(names, "snapshot"), Some("snapshot.200000003"));
        assert_eq!(newest("myid\n", "log"), None);
    }

    #[test]
    fn settings_default_and_are_checked() {
        let cfg: CorruptConfig = serde_yaml_ng::from_str("how: zero").unwrap();
        assert_eq!(
            cfg,
            CorruptConfig {
                file: DataFile::Log,
                how: How::Zero,
                bytes: 16
            }
        );
        assert!(CorruptConfig {
            bytes: 0,
            ..cfg.clone()
        }
        .check()
        .unwrap_err()
        .starts_with("bytes 0"));
        assert!(serde_yaml_ng::from_str::<CorruptConfig>("file: journal").is_err());
    }

    /// The error `load_package` gives for the package `yaml`, the file named `x.yaml`.
    fn package_error(yaml: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.yaml");
        std::fs::write(&path, yaml).unwrap();
        let err = crate::nemesis::load_package(&path, false, None).unwrap_err();
        format!("{err:#}").replace(&path.display().to_string(), "x.yaml")
    }

    #[test]
    fn a_bad_setting_in_a_package_is_one_line_naming_the_field() {
        assert_eq!(
            package_error("faults:\n  - kind: corrupt\n    corrupt: {bytes: 0}\n"),
            "x.yaml:3: faults[0].corrupt: bytes 0 damages nothing; give at least 1"
        );
        assert_eq!(
            package_error("faults:\n  - kind: kill\n    corrupt: {how: zero}\n"),
            "x.yaml:3: faults[0].corrupt: only corrupt faults take corrupt settings"
        );
        let how = package_error("faults:\n  - kind: corrupt\n    corrupt: {how: smash}\n");
        assert!(
            how.contains("x.yaml:3") && how.contains("corrupt.how") && how.contains("smash"),
            "{how}"
        );
        assert!(!how.contains('\n'), "{how}");
        assert_eq!(
            package_error("faults:\n  - kind: pause\n    restart: {gap: 2s}\n"),
            "x.yaml:3: faults[0].restart: only restart faults take restart settings"
        );
    }
}
