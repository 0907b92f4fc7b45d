//! The transaction log and snapshots.
//!
//! [`Log`] is the seam under the request pipeline: the processor appends
//! transactions, asks for them to be made durable, and learns through a
//! callback which zxid is durable; a replicated log can implement the same
//! trait later (durable = committed by a quorum).
//!
//! [`FileLog`] stores segments `log.<first zxid, 16 hex digits>` of records
//! `[u32 length][u32 crc32][txn]` after an 8-byte header; each batch of
//! appends is written and fdatasync'd together (group commit). Segments are
//! zero-filled 1 MiB at a time ahead of their records (ZooKeeper also pads
//! its log ahead), so a sync rarely has to commit block allocations or a new
//! file size. Snapshots `snapshot.<zxid>` are `"KPSN"`, a crc32
//! and the tree image, encoded from a [`Capture`] by a background thread
//! into a temporary file, synced and renamed. Its writeback is paced (at
//! most about a MiB of it queued at the disk at a time) so that the log's
//! syncs do not wait behind the whole image.
//!
//! Recovery ([`recover`]) loads the newest snapshot and replays the segments.
//! A segment's records end where only zero bytes remain. A bad final record
//! in the newest segment (the file ends inside it, or it fails its checksum
//! and only zero bytes follow it) is a write that never completed, so it was
//! never acknowledged: it is cut off with a warning. Any other bad record, a
//! gap in zxids or a bad snapshot is corruption of acknowledged data, and
//! recovery refuses with an error naming the file and offset.

use crate::checksum::{crc32, Crc32};
use crate::jute::Writer;
use crate::tree::{Capture, Change, DataTree};
use crate::txn::Txn;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

const SEGMENT_MAGIC: &[u8; 8] = b"KPLG\0\0\0\x01";
const SNAPSHOT_MAGIC: &[u8; 4] = b"KPSN";
/// Largest record accepted when reading (a txn holds at most a few MiB).
const MAX_RECORD: usize = 64 * 1024 * 1024;
/// Snapshots kept on disk (with the log segments needed after the oldest).
const SNAPSHOTS_KEPT: usize = 2;
/// Bytes of zeros a segment grows by at a time, ahead of its records.
const FILL_CHUNK: usize = 1024 * 1024;

/// An open log segment and the offset of its next record. The file is kept
/// zero-filled ahead of the records, so most syncs flush data only: no block
/// allocation or size change has to be committed with them.
pub struct Segment {
    file: File,
    pos: u64,
    filled: u64,
}

impl Segment {
    /// The same open segment, on a new file handle.
    fn reopen(&self) -> io::Result<Segment> {
        Ok(Segment {
            file: self.file.try_clone()?,
            pos: self.pos,
            filled: self.filled,
        })
    }

    fn open(path: &Path, pos: u64) -> io::Result<Segment> {
        let file = OpenOptions::new().write(true).open(path)?;
        let filled = file.metadata()?.len();
        Ok(Segment { file, pos, filled })
    }

    fn create(dir: &Path, first_zxid: i64) -> io::Result<Segment> {
        let path = segment_path(dir, first_zxid);
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)?;
        file.write_all_at(SEGMENT_MAGIC, 0)?;
        let mut segment = Segment {
            file,
            pos: SEGMENT_MAGIC.len() as u64,
            filled: SEGMENT_MAGIC.len() as u64,
        };
        segment.fill_to(segment.pos + 1)?;
        unless_skipped(|| segment.file.sync_all())?;
        unless_skipped(|| sync_dir(dir))?;
        Ok(segment)
    }

    /// Appends zero chunks until the file reaches `end`.
    fn fill_to(&mut self, end: u64) -> io::Result<()> {
        static ZEROS: [u8; FILL_CHUNK] = [0; FILL_CHUNK];
        while self.filled < end {
            self.file.write_all_at(&ZEROS, self.filled)?;
            self.filled += FILL_CHUNK as u64;
        }
        Ok(())
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let end = self.pos + bytes.len() as u64;
        self.fill_to(end)?;
        self.file.write_all_at(bytes, self.pos)?;
        self.pos = end;
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        unless_skipped(|| self.file.sync_data())
    }
}

/// Where transactions go before they count as durable.
pub trait Log: Send {
    /// Appends `txn`; it is not durable until a later flush completes.
    fn append(&mut self, txn: &Txn);
    /// Makes everything appended so far durable; completion is reported to
    /// the callback given at construction with the highest durable zxid (a
    /// local log reports before returning, a replicated one would report
    /// when a quorum has it).
    fn flush(&mut self);
    /// Whether a snapshot can start now (the previous one is stored).
    fn can_snapshot(&self) -> bool;
    /// Stores a snapshot of the tree as captured after the earlier appends.
    fn snapshot(&mut self, capture: Capture);
    /// Ends the log: everything appended is written and synced, a snapshot
    /// being stored is finished, and the open segment is handed back to be
    /// appended to by the next role. `None` when what was appended is not
    /// all on disk (the next role then recovers from the data directory).
    fn retire(self: Box<Self>) -> Option<Segment>;
}

/// Called with the highest durable zxid.
pub type DurableCallback = Box<dyn Fn(i64) + Send>;

/// The local durable log. Records appended between two flushes are written
/// and fdatasync'd together (group commit: the core flushes once per batch
/// of requests, and requests arriving during a sync form the next batch).
/// Snapshot files are written by a background thread.
pub struct FileLog {
    dir: PathBuf,
    segment: Segment,
    pending: Vec<u8>,
    /// Zxid of the last record appended (durable or not).
    last_appended: i64,
    on_durable: DurableCallback,
    snapshotter: Option<std::thread::JoinHandle<()>>,
}

impl FileLog {
    /// A log appending to `segment` (from [`recover`]) in `dir`, whose last
    /// record is `last_zxid`.
    pub fn new(
        dir: PathBuf,
        segment: Segment,
        last_zxid: i64,
        on_durable: DurableCallback,
    ) -> FileLog {
        FileLog {
            dir,
            segment,
            pending: Vec::with_capacity(64 * 1024),
            last_appended: last_zxid,
            on_durable,
            snapshotter: None,
        }
    }

    /// Replaces the callback told of durable zxids.
    pub fn set_on_durable(&mut self, on_durable: DurableCallback) {
        self.on_durable = on_durable;
    }

    /// Appends `txn` like [`Log::append`] and returns its encoded form (the
    /// record's payload), e.g. to send it to learners.
    pub fn append_record(&mut self, txn: &Txn) -> &[u8] {
        let last = self.last_appended;
        crate::invariant::check(
            follows(last, txn.zxid),
            "the log has no gap and never goes back",
            || format!("{:#x} appended after {last:#x}", txn.zxid),
        );
        let mut w = Writer {
            buf: std::mem::take(&mut self.pending),
        };
        let start = w.buf.len();
        w.i32(0).i32(0);
        txn.encode(&mut w);
        let payload_len = (w.buf.len() - start - 8) as u32;
        let crc = crc32(&w.buf[start + 8..]);
        w.buf[start..start + 4].copy_from_slice(&payload_len.to_be_bytes());
        w.buf[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
        self.pending = w.buf;
        self.last_appended = txn.zxid;
        &self.pending[start + 8..]
    }

    /// Zxid of the last record appended.
    pub fn last_appended(&self) -> i64 {
        self.last_appended
    }

    /// [`Log::retire`] for the file log itself: flushes (telling no one) and
    /// waits for a snapshot being stored.
    pub fn retire(mut self) -> Option<Segment> {
        self.on_durable = Box::new(|_| {});
        self.flush();
        if let Some(t) = self.snapshotter.take() {
            let _ = t.join();
        }
        self.segment.reopen().ok()
    }
}

impl Drop for FileLog {
    fn drop(&mut self) {
        // A snapshot being written finishes before the data dir is used again.
        if let Some(t) = self.snapshotter.take() {
            let _ = t.join();
        }
    }
}

impl Log for FileLog {
    fn append(&mut self, txn: &Txn) {
        self.append_record(txn);
    }

    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        self.segment
            .write(&self.pending)
            .unwrap_or_else(|e| fatal("write log", e));
        self.segment.sync().unwrap_or_else(|e| fatal("sync log", e));
        self.pending.clear();
        (self.on_durable)(self.last_appended);
    }

    fn retire(self: Box<Self>) -> Option<Segment> {
        FileLog::retire(*self)
    }

    fn can_snapshot(&self) -> bool {
        self.snapshotter.as_ref().is_none_or(|t| t.is_finished())
    }

    fn snapshot(&mut self, capture: Capture) {
        self.flush();
        let zxid = capture.last_zxid;
        let started = Instant::now();
        // Named after the next record: a learner's log may hold proposals
        // beyond the (committed) capture, and every record of a segment is
        // below the next segment's name.
        self.segment = Segment::create(&self.dir, self.last_appended + 1)
            .unwrap_or_else(|e| fatal("start log segment", e));
        let rolled = started.elapsed();
        if let Some(previous) = self.snapshotter.take() {
            let _ = previous.join();
        }
        let dir = self.dir.clone();
        self.snapshotter = Some(std::thread::spawn(move || {
            crate::sched::background();
            let bytes =
                write_snapshot(&dir, capture).unwrap_or_else(|e| fatal("write snapshot", e));
            tracing::info!(
                "snapshot {zxid:#x} stored: {bytes} bytes in {:?} (new log segment in {rolled:?})",
                started.elapsed()
            );
            purge(&dir);
        }));
    }
}

fn fatal(what: &str, e: io::Error) -> ! {
    tracing::error!(
        "transaction log failure, stopping to avoid acknowledging lost writes: {what}: {e}"
    );
    eprintln!("keeperd: fatal: {what}: {e}");
    std::process::exit(2);
}

/// Runs a sync of the log, unless the failpoint `skip-fsync` is on.
fn unless_skipped(sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    if crate::failpoint::active(crate::failpoint::Failpoint::SkipFsync) {
        Ok(())
    } else {
        sync()
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn segment_path(dir: &Path, first_zxid: i64) -> PathBuf {
    dir.join(format!("log.{first_zxid:016x}"))
}

/// Writes the snapshot file; returns its size.
fn write_snapshot(dir: &Path, capture: Capture) -> io::Result<u64> {
    let zxid = capture.last_zxid;
    let tmp = dir.join(format!("snapshot.{zxid:016x}.tmp"));
    let f = File::create(&tmp)?;
    let header = SNAPSHOT_MAGIC.len() as u64 + 4;
    let mut crc = Crc32::default();
    let (mut end, mut settled) = (header, 0);
    capture.encode(|piece| {
        crc.update(piece);
        f.write_all_at(piece, end)?;
        // Start writing this piece back and wait for the ones before it, so
        // the disk never holds a long queue of snapshot data in front of the
        // transaction log's syncs.
        let start = end;
        end += piece.len() as u64;
        sync_range(&f, start, end, libc::SYNC_FILE_RANGE_WRITE)?;
        let wait = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        sync_range(&f, settled, start, wait)?;
        settled = start;
        Ok::<(), io::Error>(())
    })?;
    let mut head = SNAPSHOT_MAGIC.to_vec();
    head.extend_from_slice(&crc.value().to_be_bytes());
    f.write_all_at(&head, 0)?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(format!("snapshot.{zxid:016x}")))?;
    sync_dir(dir)?;
    Ok(end)
}

/// `sync_file_range(2)` over `[from, to)` of `f`.
fn sync_range(f: &File, from: u64, to: u64, flags: libc::c_uint) -> io::Result<()> {
    if to <= from {
        return Ok(());
    }
    // SAFETY: a plain syscall on an open descriptor; it reads no memory of ours.
    let r = unsafe { libc::sync_file_range(f.as_raw_fd(), from as i64, (to - from) as i64, flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Files named `<prefix>.<16 hex digits>` in `dir`, sorted by that number.
fn numbered(dir: &Path, prefix: &str) -> io::Result<Vec<(i64, PathBuf)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some(hex) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else {
            continue;
        };
        if hex.len() == 16 {
            if let Ok(n) = u64::from_str_radix(hex, 16) {
                out.push((n as i64, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Deletes snapshots beyond the newest few and segments wholly before the oldest kept one.
fn purge(dir: &Path) {
    let (Ok(snaps), Ok(segs)) = (numbered(dir, "snapshot"), numbered(dir, "log")) else {
        return;
    };
    if snaps.len() <= SNAPSHOTS_KEPT {
        return;
    }
    let oldest_kept = snaps[snaps.len() - SNAPSHOTS_KEPT].0;
    for (_, p) in &snaps[..snaps.len() - SNAPSHOTS_KEPT] {
        let _ = fs::remove_file(p);
    }
    for pair in segs.windows(2) {
        // Segment pair[0] holds zxids below pair[1].0.
        if pair[1].0 <= oldest_kept + 1 {
            let _ = fs::remove_file(&pair[0].1);
        }
    }
}

/// Whether `next` may follow `prev` in a log: the next counter of the same
/// epoch, or the first of a later epoch (zxid = epoch << 32 | counter).
pub fn follows(prev: i64, next: i64) -> bool {
    next == prev + 1 || (next >> 32 > prev >> 32 && next & 0xffff_ffff == 1)
}

/// State rebuilt from disk, and the segment to keep appending to.
pub struct Recovered {
    /// The tree with every logged transaction applied.
    pub tree: DataTree,
    /// Open segment positioned after its last record.
    pub segment: Segment,
    /// Transactions replayed from the log.
    pub replayed: usize,
    /// Description of a torn tail that was cut off, if any.
    pub torn_tail: Option<String>,
}

/// Loads the newest snapshot and replays the log after it (see module docs).
pub fn recover(dir: &Path) -> Result<Recovered, String> {
    fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create data dir: {e}", dir.display()))?;
    let io_err = |what: &Path, e: io::Error| format!("{}: {e}", what.display());
    let snaps = numbered(dir, "snapshot").map_err(|e| io_err(dir, e))?;
    let mut tree = match snaps.last() {
        None => DataTree::new(),
        Some((zxid, path)) => load_snapshot(path, *zxid)?,
    };
    let segs = numbered(dir, "log").map_err(|e| io_err(dir, e))?;
    let mut replayed = 0;
    let mut torn_tail = None;
    let mut last_end = 0;
    let mut changes = Vec::<Change>::new();
    for (i, (_, path)) in segs.iter().enumerate() {
        let newest = i + 1 == segs.len();
        let bytes = fs::read(path).map_err(|e| io_err(path, e))?;
        let (txns, end, torn) = parse_segment(path, &bytes, newest)?;
        if let Some(why) = torn {
            let what = format!(
                "{}: cut off an incomplete final record at offset {end} ({why})",
                path.display()
            );
            tracing::warn!("{what}");
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| io_err(path, e))?;
            f.set_len(end.max(SEGMENT_MAGIC.len()) as u64)
                .map_err(|e| io_err(path, e))?;
            f.write_all_at(SEGMENT_MAGIC, 0)
                .map_err(|e| io_err(path, e))?;
            f.sync_all().map_err(|e| io_err(path, e))?;
            torn_tail = Some(what);
        }
        if newest {
            last_end = end.max(SEGMENT_MAGIC.len()) as u64;
        }
        for (offset, txn) in txns {
            if txn.zxid <= tree.last_zxid {
                continue;
            }
            if !follows(tree.last_zxid, txn.zxid) {
                return Err(format!(
                    "corrupt transaction log {} at offset {offset}: expected zxid {:#x}, found {:#x} (transactions are missing)",
                    path.display(),
                    tree.last_zxid + 1,
                    txn.zxid
                ));
            }
            changes.clear();
            tree.apply(&txn, &mut changes);
            replayed += 1;
        }
    }
    let segment = match segs.last() {
        Some((_, path)) => Segment::open(path, last_end).map_err(|e| io_err(path, e))?,
        None => Segment::create(dir, tree.last_zxid + 1).map_err(|e| io_err(dir, e))?,
    };
    Ok(Recovered {
        tree,
        segment,
        replayed,
        torn_tail,
    })
}

fn load_snapshot(path: &Path, zxid: i64) -> Result<DataTree, String> {
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let corrupt = |why: &str| {
        format!(
            "corrupt snapshot {}: {why}; refusing to start",
            path.display()
        )
    };
    if bytes.len() < 8 || &bytes[..4] != SNAPSHOT_MAGIC {
        return Err(corrupt("bad header"));
    }
    let crc = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if crc32(&bytes[8..]) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    let tree = DataTree::decode_snapshot(&bytes[8..]).map_err(|e| corrupt(&e.to_string()))?;
    if tree.last_zxid != zxid {
        return Err(corrupt("zxid does not match its file name"));
    }
    Ok(tree)
}

/// A segment's transactions (with offsets), the end of its valid records, and
/// why the newest segment's final record was judged torn, if it was.
type Parsed = (Vec<(usize, Txn)>, usize, Option<&'static str>);

/// Parses a segment (see the module docs for what is torn and what is corrupt).
fn parse_segment(path: &Path, bytes: &[u8], newest: bool) -> Result<Parsed, String> {
    let (records, end, torn) = split_segment(path, bytes, newest)?;
    let mut txns = Vec::with_capacity(records.len());
    for (offset, payload) in records {
        let txn = Txn::decode(payload).map_err(|e| corrupt_at(path, offset, &e.to_string()))?;
        txns.push((offset, txn));
    }
    Ok((txns, end, torn))
}

fn corrupt_at(path: &Path, offset: usize, why: &str) -> String {
    format!(
        "corrupt transaction log {} at offset {offset}: {why}; refusing to start (acknowledged writes would be lost)",
        path.display()
    )
}

/// A segment's records (offset and payload), the end of the valid ones, and
/// why the final record was judged torn (newest segment only).
type Split<'a> = (Vec<(usize, &'a [u8])>, usize, Option<&'static str>);

/// Splits a segment into its records' payloads, checking each checksum.
fn split_segment<'a>(path: &Path, bytes: &'a [u8], newest: bool) -> Result<Split<'a>, String> {
    let corrupt = |offset: usize, why: &str| corrupt_at(path, offset, why);
    if bytes.len() < SEGMENT_MAGIC.len() {
        return if newest {
            Ok((Vec::new(), 0, Some("segment shorter than its header")))
        } else {
            Err(corrupt(0, "segment shorter than its header"))
        };
    }
    if &bytes[..SEGMENT_MAGIC.len()] != SEGMENT_MAGIC {
        return Err(corrupt(0, "bad segment header"));
    }
    let blank_from = |from: usize| bytes[from.min(bytes.len())..].iter().all(|b| *b == 0);
    let mut records = Vec::new();
    let mut pos = SEGMENT_MAGIC.len();
    loop {
        if blank_from(pos) {
            return Ok((records, pos, None));
        }
        let rest = &bytes[pos..];
        let torn = |why: &'static str, blank: bool| {
            if newest && blank {
                Ok((pos, Some(why)))
            } else {
                Err(corrupt(pos, why))
            }
        };
        if rest.len() < 8 {
            let (p, w) = torn("truncated record header", true)?;
            return Ok((records, p, w));
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let crc = u32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if !(8..=MAX_RECORD).contains(&len) {
            let (p, w) = torn("record length out of range", blank_from(pos + 8))?;
            return Ok((records, p, w));
        }
        if rest.len() < 8 + len {
            let (p, w) = torn("truncated record", true)?;
            return Ok((records, p, w));
        }
        let payload = &rest[8..8 + len];
        if crc32(payload) != crc {
            let (p, w) = torn("checksum mismatch", blank_from(pos + 8 + len))?;
            return Ok((records, p, w));
        }
        records.push((pos, payload));
        pos += 8 + len;
    }
}

/// The zxid of an encoded transaction (its first field).
pub fn payload_zxid(payload: &[u8]) -> i64 {
    let mut z = [0u8; 8];
    z.copy_from_slice(&payload[..8]);
    i64::from_be_bytes(z)
}

/// Removes every logged transaction after `zxid`, which must be in this
/// server's history: the newest snapshot's zxid, a logged record, or 0 with
/// no snapshot. A learner does this when its new leader's history ends
/// before its own (TRUNC). Nothing at or before `zxid` is touched.
pub fn truncate_after(dir: &Path, zxid: i64) -> Result<(), String> {
    let io_err = |what: &Path, e: io::Error| format!("{}: {e}", what.display());
    let snaps = numbered(dir, "snapshot").map_err(|e| io_err(dir, e))?;
    let snap_zxid = snaps.last().map_or(0, |s| s.0);
    if snap_zxid > zxid {
        return Err(format!(
            "cannot truncate the log to {zxid:#x}: snapshot {snap_zxid:#x} is newer (it should hold committed transactions only)"
        ));
    }
    let segs = numbered(dir, "log").map_err(|e| io_err(dir, e))?;
    let mut found = zxid == snap_zxid;
    // (segment, offset of its first record after zxid)
    let mut cuts: Vec<(PathBuf, Option<usize>)> = Vec::new();
    for (i, (first, path)) in segs.iter().enumerate() {
        if *first > zxid {
            cuts.push((path.clone(), None));
            continue;
        }
        let bytes = fs::read(path).map_err(|e| io_err(path, e))?;
        let (records, _, _) = split_segment(path, &bytes, i + 1 == segs.len())?;
        found |= records.iter().any(|(_, p)| payload_zxid(p) == zxid);
        if let Some((offset, _)) = records.iter().find(|(_, p)| payload_zxid(p) > zxid) {
            cuts.push((path.clone(), Some(*offset)));
        }
    }
    if !found {
        return Err(format!(
            "cannot truncate the log to {zxid:#x}: this server never logged it (its history and the leader's differ before that)"
        ));
    }
    for (path, cut) in cuts {
        match cut {
            None => fs::remove_file(&path).map_err(|e| io_err(&path, e))?,
            Some(offset) => {
                let f = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(|e| io_err(&path, e))?;
                f.set_len(offset as u64).map_err(|e| io_err(&path, e))?;
                f.sync_all().map_err(|e| io_err(&path, e))?;
            }
        }
        tracing::info!("truncated {} after zxid {zxid:#x}", path.display());
    }
    sync_dir(dir).map_err(|e| io_err(dir, e))
}

/// Makes the snapshot file `image` (a complete snapshot file, as a leader
/// sends it) this server's whole state: checked, synced and renamed to
/// `snapshot.<zxid>`; every older log segment goes and a new one starts
/// after it. Returns the tree and the segment to append to.
pub fn install_snapshot(dir: &Path, image: &Path) -> Result<(DataTree, Segment), String> {
    let io_err = |what: &Path, e: io::Error| format!("{}: {e}", what.display());
    let bytes = fs::read(image).map_err(|e| io_err(image, e))?;
    if bytes.len() < 16 {
        return Err(format!("{}: snapshot too short", image.display()));
    }
    let zxid = payload_zxid(&bytes[8..]);
    let tree = load_snapshot(image, zxid)?;
    File::open(image)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_err(image, e))?;
    let path = dir.join(format!("snapshot.{zxid:016x}"));
    fs::rename(image, &path).map_err(|e| io_err(&path, e))?;
    sync_dir(dir).map_err(|e| io_err(dir, e))?;
    // The snapshot is durable: what the old files held is in it or was never committed.
    for (z, p) in numbered(dir, "snapshot").map_err(|e| io_err(dir, e))? {
        if z > zxid {
            fs::remove_file(&p).map_err(|e| io_err(&p, e))?;
        }
    }
    for (_, p) in numbered(dir, "log").map_err(|e| io_err(dir, e))? {
        fs::remove_file(&p).map_err(|e| io_err(&p, e))?;
    }
    let segment = Segment::create(dir, zxid + 1).map_err(|e| io_err(dir, e))?;
    Ok((tree, segment))
}

/// A whole file, read by position (the handle may be read again).
fn read_whole(f: &File) -> io::Result<Vec<u8>> {
    let len = f.metadata()?.len() as usize;
    let mut out = vec![0u8; len];
    f.read_exact_at(&mut out, 0)?;
    Ok(out)
}

/// A leader's history on disk as of one moment: its newest snapshot (open,
/// so a purge cannot take it away) and the segments after it.
pub struct History {
    snapshot: Option<(i64, File)>,
    segments: Vec<(PathBuf, File)>,
}

impl History {
    /// Opens the newest snapshot of `dir` and the segments holding what follows it.
    pub fn open(dir: &Path) -> io::Result<History> {
        let snaps = numbered(dir, "snapshot")?;
        let snapshot = match snaps.last() {
            Some((z, p)) => Some((*z, File::open(p)?)),
            None => None,
        };
        let base = snapshot.as_ref().map_or(0, |s| s.0);
        let segs = numbered(dir, "log")?;
        // The segment holding base + 1 is the last one named at or before it.
        let from = segs
            .iter()
            .rposition(|(first, _)| *first <= base + 1)
            .unwrap_or(0);
        let mut segments = Vec::new();
        for (_, p) in &segs[from..] {
            segments.push((p.clone(), File::open(p)?));
        }
        Ok(History { snapshot, segments })
    }

    /// The zxid of the snapshot the history starts from (0 for none).
    pub fn base(&self) -> i64 {
        self.snapshot.as_ref().map_or(0, |s| s.0)
    }

    /// The snapshot file's bytes.
    pub fn snapshot_bytes(&self) -> io::Result<Vec<u8>> {
        match &self.snapshot {
            Some((_, f)) => read_whole(f),
            None => Ok(Vec::new()),
        }
    }

    /// The encoded transactions after the snapshot, up to `last`.
    pub fn records(&self, last: i64) -> Result<Vec<(i64, Vec<u8>)>, String> {
        let base = self.base();
        let mut out: Vec<(i64, Vec<u8>)> = Vec::new();
        for (i, (path, f)) in self.segments.iter().enumerate() {
            let bytes = read_whole(f).map_err(|e| format!("{}: {e}", path.display()))?;
            // The newest segment may be appended to right now: its tail is lenient.
            let (records, _, _) = split_segment(path, &bytes, i + 1 == self.segments.len())?;
            for (_, payload) in records {
                let z = payload_zxid(payload);
                if z <= base || out.last().is_some_and(|l| z <= l.0) {
                    continue;
                }
                if z > last {
                    return Ok(out);
                }
                out.push((z, payload.to_vec()));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Acl;
    use crate::txn::TxnBody;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("keeperd-log-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn create(zxid: i64) -> Txn {
        Txn {
            zxid,
            time: 1,
            session: 0,
            body: TxnBody::Create {
                path: format!("/n{zxid}"),
                data: vec![1, 2],
                acl: vec![Acl::open()],
                ephemeral_owner: 0,
            },
        }
    }

    fn write_txns(dir: &Path, zxids: std::ops::RangeInclusive<i64>, snapshot_at: Option<i64>) {
        let r = recover(dir).unwrap();
        let durable = Arc::new(Mutex::new(0));
        let d2 = durable.clone();
        let mut log = FileLog::new(
            dir.to_path_buf(),
            r.segment,
            r.tree.last_zxid,
            Box::new(move |z| *d2.lock().unwrap() = z),
        );
        let mut tree = r.tree;
        let last = *zxids.end();
        for z in zxids {
            let t = create(z);
            tree.apply(&t, &mut Vec::new());
            log.append(&t);
            if Some(z) == snapshot_at {
                assert!(log.can_snapshot());
                log.snapshot(tree.capture());
            }
        }
        log.flush();
        let start = Instant::now();
        while *durable.lock().unwrap() != last {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "log never became durable"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        while snapshot_at
            .is_some_and(|z| !numbered(dir, "snapshot").unwrap().iter().any(|s| s.0 == z))
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "snapshot never written"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn recovers_from_log_and_snapshot() {
        let dir = temp_dir("recover");
        write_txns(&dir, 1..=10, Some(5));
        write_txns(&dir, 11..=12, None);
        let r = recover(&dir).unwrap();
        assert_eq!(r.tree.last_zxid, 12);
        assert!(r.tree.get("/n3").is_some() && r.tree.get("/n12").is_some());
        assert_eq!(r.replayed, 7);
        assert!(r.torn_tail.is_none());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn torn_tail_is_cut_but_corruption_refuses() {
        let dir = temp_dir("torn");
        write_txns(&dir, 1..=4, None);
        let seg = numbered(&dir, "log").unwrap().pop().unwrap().1;
        // A crash mid-write: the last record's final bytes never reached the disk.
        let mut bytes = fs::read(&seg).unwrap();
        let last = bytes.iter().rposition(|b| *b != 0).unwrap();
        bytes[last - 2..=last].fill(0);
        fs::write(&seg, &bytes).unwrap();
        let r = recover(&dir).unwrap();
        assert_eq!(r.tree.last_zxid, 3);
        assert!(r.torn_tail.is_some());
        drop(r);
        // Appending after the cut continues the sequence.
        write_txns(&dir, 4..=5, None);
        assert_eq!(recover(&dir).unwrap().tree.last_zxid, 5);
        // A flipped byte in an early record is corruption.
        let mut bytes = fs::read(&seg).unwrap();
        bytes[SEGMENT_MAGIC.len() + 12] ^= 0xff;
        fs::write(&seg, &bytes).unwrap();
        let e = recover(&dir).err().unwrap();
        assert!(
            e.contains("corrupt transaction log") && e.contains("checksum"),
            "{e}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn corrupt_snapshot_refuses() {
        let dir = temp_dir("snap");
        write_txns(&dir, 1..=3, Some(3));
        let snap = numbered(&dir, "snapshot").unwrap().pop().unwrap().1;
        let mut bytes = fs::read(&snap).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        fs::write(&snap, &bytes).unwrap();
        assert!(recover(&dir).err().unwrap().contains("corrupt snapshot"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
