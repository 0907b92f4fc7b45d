//! The FUSE filesystem: a pass-through to a backing directory that remembers, per file,
//! what was written since its last fsync (see [`Undo`]) and can throw all of it away.
//!
//! Durability model: file data and size are durable only once the file is fsync'd or
//! fdatasync'd (through any of its handles); metadata operations (create, mkdir, rename,
//! unlink, rmdir, chmod) are applied to the backing directory at once and are durable at
//! once, so a directory fsync has nothing left to do. A file created and never synced thus
//! survives a loss empty, and a file renamed over another before its data was synced is
//! empty after it (as on ext4 without `auto_da_alloc`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use super::undo::{read_at_most, Undo};

/// Attributes and entries are not cached by the kernel: after a loss it must see the files
/// as they are.
const TTL: Duration = Duration::ZERO;

/// What a loss threw away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Lost {
    /// Bytes written or cut since their file's last fsync.
    pub bytes: u64,
    /// Files that had such bytes.
    pub files: u64,
}

/// The state of a mounted layer, shared between the FUSE session and its control port.
#[derive(Default)]
pub struct State {
    /// The path of each inode the kernel knows, relative to the backing directory.
    paths: HashMap<u64, PathBuf>,
    /// The inode number given to each backing inode.
    inodes: HashMap<u64, u64>,
    next_inode: u64,
    /// Open files by handle.
    handles: HashMap<u64, Arc<File>>,
    next_handle: u64,
    /// Files with data not yet synced, by inode.
    unsynced: HashMap<u64, Undo>,
}

impl State {
    /// Throws away every file's unsynced data, as a power loss would.
    pub fn lose_unsynced(&mut self) -> io::Result<Lost> {
        let mut lost = Lost::default();
        for (_, undo) in self.unsynced.drain() {
            lost.bytes += undo.lose()?;
            lost.files += 1;
        }
        Ok(lost)
    }

    /// Makes every file's data durable (used once the server's initial files are written).
    pub fn sync_all(&mut self) -> io::Result<u64> {
        let files = self.unsynced.len() as u64;
        for (_, undo) in self.unsynced.drain() {
            undo.sync(false)?;
        }
        Ok(files)
    }
}

/// The filesystem over `backing`.
pub struct LazyFs {
    backing: PathBuf,
    state: Arc<Mutex<State>>,
}

impl LazyFs {
    /// A layer over the directory `backing`.
    pub fn new(backing: PathBuf) -> LazyFs {
        let mut state = State {
            next_inode: 2,
            next_handle: 1,
            ..State::default()
        };
        state.paths.insert(INodeNo::ROOT.0, PathBuf::new());
        LazyFs {
            backing,
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// The state, for the control port.
    pub fn state(&self) -> Arc<Mutex<State>> {
        self.state.clone()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn real(&self, relative: &Path) -> PathBuf {
        self.backing.join(relative)
    }

    /// The relative path of inode `ino`.
    fn path(state: &State, ino: INodeNo) -> Result<PathBuf, Errno> {
        state.paths.get(&ino.0).cloned().ok_or(Errno::ENOENT)
    }

    fn child(state: &State, parent: INodeNo, name: &OsStr) -> Result<PathBuf, Errno> {
        Ok(Self::path(state, parent)?.join(name))
    }

    /// The inode number of the backing file at `relative`, given when first seen.
    fn inode_of(state: &mut State, relative: &Path, meta: &fs::Metadata) -> u64 {
        if relative.as_os_str().is_empty() {
            return INodeNo::ROOT.0;
        }
        let ino = match state.inodes.get(&meta.ino()) {
            Some(&ino) => ino,
            None => {
                let ino = state.next_inode;
                state.next_inode += 1;
                state.inodes.insert(meta.ino(), ino);
                ino
            }
        };
        state.paths.insert(ino, relative.to_path_buf());
        ino
    }

    /// Looks up `relative` and returns its attributes, numbering it.
    fn entry(&self, state: &mut State, relative: &Path) -> Result<FileAttr, Errno> {
        let meta = fs::symlink_metadata(self.real(relative)).map_err(Errno::from)?;
        let ino = Self::inode_of(state, relative, &meta);
        Ok(attr(ino, &meta))
    }

    /// Forgets a backing file that is gone (unlinked or replaced): its unsynced data went
    /// with it.
    fn forget_if_gone(&self, state: &mut State, relative: &Path, before: Option<fs::Metadata>) {
        let Some(before) = before else { return };
        let still = fs::symlink_metadata(self.real(relative))
            .map(|m| m.ino() == before.ino())
            .unwrap_or(false);
        if still || before.nlink() > 1 {
            return;
        }
        if let Some(ino) = state.inodes.remove(&before.ino()) {
            state.unsynced.remove(&ino);
            state.paths.remove(&ino);
        }
    }

    /// The unsynced state of `ino`, started on first need.
    fn undo<'a>(&self, state: &'a mut State, ino: INodeNo) -> Result<&'a mut Undo, Errno> {
        if !state.unsynced.contains_key(&ino.0) {
            let path = self.real(&Self::path(state, ino)?);
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(Errno::from)?;
            state
                .unsynced
                .insert(ino.0, Undo::new(file).map_err(Errno::from)?);
        }
        Ok(state.unsynced.get_mut(&ino.0).expect("inserted above"))
    }

    fn open_handle(&self, state: &mut State, path: &Path, flags: i32) -> Result<u64, Errno> {
        // Writable handles are read-write, O_APPEND is left to the kernel (it sends the
        // offset), O_DIRECT is dropped (the layer keeps no cache of its own).
        let writable = flags & libc::O_ACCMODE != libc::O_RDONLY;
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .custom_flags(flags & !(libc::O_ACCMODE | libc::O_APPEND | libc::O_DIRECT))
            .open(path)
            .map_err(Errno::from)?;
        let fh = state.next_handle;
        state.next_handle += 1;
        state.handles.insert(fh, Arc::new(file));
        Ok(fh)
    }

    fn handle(state: &State, fh: FileHandle) -> Result<Arc<File>, Errno> {
        state.handles.get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    /// Removes `name` from `parent` with `remove` (a file or a directory) and forgets it.
    fn remove(
        &self,
        parent: INodeNo,
        name: &OsStr,
        remove: impl FnOnce(&Path) -> io::Result<()>,
    ) -> Result<(), Errno> {
        let mut state = self.lock();
        let relative = Self::child(&state, parent, name)?;
        let before = fs::symlink_metadata(self.real(&relative)).ok();
        remove(&self.real(&relative)).map_err(Errno::from)?;
        self.forget_if_gone(&mut state, &relative, before);
        Ok(())
    }

    fn fsync_inode(&self, ino: INodeNo, fh: FileHandle, datasync: bool) -> Result<(), Errno> {
        let mut state = self.lock();
        match state.unsynced.remove(&ino.0) {
            Some(undo) => undo.sync(datasync).map_err(Errno::from),
            None => {
                let file = Self::handle(&state, fh)?;
                file.sync_data().map_err(Errno::from)
            }
        }
    }
}

/// The FUSE attributes of a backing file.
fn attr(ino: u64, meta: &fs::Metadata) -> FileAttr {
    let time = |secs: i64, nanos: i64| {
        if secs >= 0 {
            UNIX_EPOCH + Duration::new(secs as u64, nanos as u32)
        } else {
            UNIX_EPOCH
        }
    };
    let kind = if meta.is_dir() {
        FileType::Directory
    } else if meta.file_type().is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    FileAttr {
        ino: INodeNo(ino),
        size: meta.size(),
        blocks: meta.blocks(),
        atime: time(meta.atime(), meta.atime_nsec()),
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind,
        perm: (meta.mode() & 0o7777) as u16,
        nlink: meta.nlink() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        rdev: meta.rdev() as u32,
        blksize: 4096,
        flags: 0,
    }
}

fn system_time(t: TimeOrNow) -> SystemTime {
    match t {
        TimeOrNow::SpecificTime(t) => t,
        TimeOrNow::Now => SystemTime::now(),
    }
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let mut state = self.lock();
        let result = Self::child(&state, parent, name).and_then(|p| self.entry(&mut state, &p));
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let mut state = self.lock();
        match Self::path(&state, ino).and_then(|p| self.entry(&mut state, &p)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let mut state = self.lock();
        let result = (|| -> Result<FileAttr, Errno> {
            let relative = Self::path(&state, ino)?;
            let real = self.real(&relative);
            if let Some(mode) = mode {
                fs::set_permissions(&real, fs::Permissions::from_mode(mode & 0o7777))
                    .map_err(Errno::from)?;
            }
            if let Some(len) = size {
                let undo = self.undo(&mut state, ino)?;
                undo.before_set_len(len).map_err(Errno::from)?;
                OpenOptions::new()
                    .write(true)
                    .open(&real)
                    .and_then(|f| f.set_len(len))
                    .map_err(Errno::from)?;
            }
            if atime.is_some() || mtime.is_some() {
                let file = File::options()
                    .read(true)
                    .open(&real)
                    .map_err(Errno::from)?;
                let mut times = fs::FileTimes::new();
                if let Some(t) = atime {
                    times = times.set_accessed(system_time(t));
                }
                if let Some(t) = mtime {
                    times = times.set_modified(system_time(t));
                }
                file.set_times(times).map_err(Errno::from)?;
            }
            self.entry(&mut state, &relative)
        })();
        match result {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let mut state = self.lock();
        let result = Self::child(&state, parent, name).and_then(|p| {
            fs::DirBuilder::new()
                .mode(mode & !umask & 0o7777)
                .create(self.real(&p))
                .map_err(Errno::from)?;
            self.entry(&mut state, &p)
        });
        match result {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent, name, |p| fs::remove_file(p)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        match self.remove(parent, name, |p| fs::remove_dir(p)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        let mut state = self.lock();
        let result = (|| -> Result<(), Errno> {
            if !flags.is_empty() {
                return Err(Errno::EINVAL);
            }
            let from = Self::child(&state, parent, name)?;
            let to = Self::child(&state, newparent, newname)?;
            let replaced = fs::symlink_metadata(self.real(&to)).ok();
            fs::rename(self.real(&from), self.real(&to)).map_err(Errno::from)?;
            self.forget_if_gone(&mut state, &to, replaced);
            // The moved inode and everything under it (a directory) change path.
            for path in state.paths.values_mut() {
                if let Ok(rest) = path.strip_prefix(&from) {
                    *path = to.join(rest);
                }
            }
            Ok(())
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        let mut state = self.lock();
        let result = Self::path(&state, ino).and_then(|p| {
            let real = self.real(&p);
            if flags.0 & libc::O_TRUNC != 0 {
                self.undo(&mut state, ino)?
                    .before_set_len(0)
                    .map_err(Errno::from)?;
            }
            self.open_handle(&mut state, &real, flags.0)
        });
        match result {
            Ok(fh) => reply.opened(FileHandle(fh), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let mut state = self.lock();
        let result = (|| -> Result<(FileAttr, u64), Errno> {
            let relative = Self::child(&state, parent, name)?;
            let real = self.real(&relative);
            let existing = fs::symlink_metadata(&real).is_ok();
            if existing && flags & libc::O_EXCL != 0 {
                return Err(Errno::EEXIST);
            }
            if !existing {
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode & !umask & 0o7777)
                    .open(&real)
                    .map_err(Errno::from)?;
            }
            let attr = self.entry(&mut state, &relative)?;
            if existing && flags & libc::O_TRUNC != 0 {
                self.undo(&mut state, attr.ino)?
                    .before_set_len(0)
                    .map_err(Errno::from)?;
            }
            let fh =
                self.open_handle(&mut state, &real, flags & !(libc::O_CREAT | libc::O_EXCL))?;
            Ok((self.entry(&mut state, &relative)?, fh))
        })();
        match result {
            Ok((attr, fh)) => reply.created(
                &TTL,
                &attr,
                Generation(0),
                FileHandle(fh),
                FopenFlags::empty(),
            ),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let file = match Self::handle(&self.lock(), fh) {
            Ok(file) => file,
            Err(e) => return reply.error(e),
        };
        let mut buf = vec![0; size as usize];
        match read_at_most(&file, &mut buf, offset) {
            Ok(n) => reply.data(&buf[..n]),
            Err(e) => reply.error(e.into()),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut state = self.lock();
        let result = (|| -> Result<(), Errno> {
            let file = Self::handle(&state, fh)?;
            self.undo(&mut state, ino)?
                .before_write(offset, data.len() as u64)
                .map_err(Errno::from)?;
            file.write_all_at(data, offset).map_err(Errno::from)
        })();
        match result {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close() makes nothing durable.
        reply.ok();
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.lock().handles.remove(&fh.0);
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        match self.fsync_inode(ino, fh, datasync) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match Self::path(&self.lock(), ino) {
            Ok(_) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let mut state = self.lock();
        let result = (|| -> Result<Vec<(u64, FileType, std::ffi::OsString)>, Errno> {
            let dir = Self::path(&state, ino)?;
            let mut entries = vec![
                (ino.0, FileType::Directory, ".".into()),
                (ino.0, FileType::Directory, "..".into()),
            ];
            for entry in fs::read_dir(self.real(&dir)).map_err(Errno::from)? {
                let entry = entry.map_err(Errno::from)?;
                let Ok(meta) = entry.metadata() else { continue };
                let relative = dir.join(entry.file_name());
                let child = Self::inode_of(&mut state, &relative, &meta);
                entries.push((child, attr(child, &meta).kind, entry.file_name()));
            }
            Ok(entries)
        })();
        match result {
            Ok(entries) => {
                for (i, (child, kind, name)) in
                    entries.into_iter().enumerate().skip(offset as usize)
                {
                    if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                        break;
                    }
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        // Metadata is durable at once (see the module docs).
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        match nix_statvfs(&self.backing) {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                255,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e.into()),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        match Self::path(&self.lock(), ino) {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let mut state = self.lock();
        let result = (|| -> Result<(), Errno> {
            let file = Self::handle(&state, fh)?;
            self.undo(&mut state, ino)?
                .before_allocate(offset, length)
                .map_err(Errno::from)?;
            use std::os::fd::AsRawFd;
            // SAFETY: fallocate on a file descriptor we own; no memory is passed.
            let rc =
                unsafe { libc::fallocate(file.as_raw_fd(), mode, offset as i64, length as i64) };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error().into())
            }
        })();
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// `statvfs(2)` of `path`.
fn nix_statvfs(path: &Path) -> io::Result<libc::statvfs> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    let mut out = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a valid C string and a pointer to memory statvfs fills.
    let rc = unsafe { libc::statvfs(c.as_ptr(), out.as_mut_ptr()) };
    if rc == 0 {
        // SAFETY: statvfs succeeded and filled `out`.
        Ok(unsafe { out.assume_init() })
    } else {
        Err(io::Error::last_os_error())
    }
}
