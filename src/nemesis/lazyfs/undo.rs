//! What a power loss would take back from one file: its length at its last fsync and the
//! original bytes of every page overwritten since. Writes go straight to the backing file
//! (so reads see them at no cost); losing the unsynced data writes the saved pages back and
//! cuts the file to its synced length.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// The granularity at which original bytes are saved before they are overwritten.
const PAGE: u64 = 4096;

/// The unsynced state of one file since its last fsync.
pub struct Undo {
    /// A read-write handle on the backing file, to save and restore through.
    file: File,
    /// The file's length at its last fsync (or when first written through the layer).
    synced_len: u64,
    /// Original content of the pages below `synced_len` changed since, by page index (the
    /// last one may be short: it ends at `synced_len`).
    saved: BTreeMap<u64, Vec<u8>>,
    /// Bytes written (or truncated away) since the last fsync, for the record.
    unsynced_bytes: u64,
}

impl Undo {
    /// Starts tracking `file` (read-write), whose current content counts as synced.
    pub fn new(file: File) -> io::Result<Undo> {
        let synced_len = file.metadata()?.len();
        Ok(Undo {
            file,
            synced_len,
            saved: BTreeMap::new(),
            unsynced_bytes: 0,
        })
    }

    /// Saves the synced bytes of `[from, to)` that are not saved yet, before they change.
    fn save(&mut self, from: u64, to: u64) -> io::Result<()> {
        let to = to.min(self.synced_len);
        if from >= to {
            return Ok(());
        }
        for page in from / PAGE..=(to - 1) / PAGE {
            if self.saved.contains_key(&page) {
                continue;
            }
            let start = page * PAGE;
            let len = PAGE.min(self.synced_len - start) as usize;
            let mut bytes = vec![0; len];
            let read = read_at_most(&self.file, &mut bytes, start)?;
            bytes.truncate(read);
            self.saved.insert(page, bytes);
        }
        Ok(())
    }

    /// Called before `len` bytes are written at `offset`.
    pub fn before_write(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.save(offset, offset + len)?;
        self.unsynced_bytes += len;
        Ok(())
    }

    /// Called before the file is cut or extended to `len`.
    pub fn before_set_len(&mut self, len: u64) -> io::Result<()> {
        let now = self.file.metadata()?.len();
        self.save(len, now)?;
        self.unsynced_bytes += now.abs_diff(len);
        Ok(())
    }

    /// Called before a range is allocated, punched or zeroed.
    pub fn before_allocate(&mut self, offset: u64, len: u64) -> io::Result<()> {
        self.save(offset, offset + len)
    }

    /// Throws away everything since the last fsync: the saved pages go back and the file is
    /// cut to its synced length. Returns the bytes that were unsynced.
    pub fn lose(self) -> io::Result<u64> {
        for (page, bytes) in &self.saved {
            self.file.write_all_at(bytes, page * PAGE)?;
        }
        self.file.set_len(self.synced_len)?;
        Ok(self.unsynced_bytes)
    }

    /// Makes everything durable (the state is then dropped: the next write starts anew).
    pub fn sync(self, data_only: bool) -> io::Result<()> {
        if data_only {
            self.file.sync_data()
        } else {
            self.file.sync_all()
        }
    }
}

/// Reads into `buf` at `offset` until it is full or the file ends; returns the bytes read.
pub fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    fn file_with(dir: &tempfile::TempDir, content: &[u8]) -> (std::path::PathBuf, File) {
        let path = dir.path().join("f");
        std::fs::write(&path, content).unwrap();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        (path, f)
    }

    #[test]
    fn overwrites_appends_and_cuts_are_undone_to_the_synced_content() {
        let dir = tempfile::tempdir().unwrap();
        let original: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let (path, f) = file_with(&dir, &original);
        let mut undo = Undo::new(f.try_clone().unwrap()).unwrap();
        undo.before_write(4000, 200).unwrap();
        f.write_all_at(&[9; 200], 4000).unwrap();
        undo.before_write(9990, 100).unwrap();
        f.write_all_at(&[7; 100], 9990).unwrap();
        undo.before_set_len(5000).unwrap();
        f.set_len(5000).unwrap();
        undo.before_write(4000, 10).unwrap();
        f.write_all_at(&[1; 10], 4000).unwrap();
        assert_eq!(undo.lose().unwrap(), 200 + 100 + 5090 + 10);
        assert_eq!(std::fs::read(&path).unwrap(), original);
    }

    #[test]
    fn a_new_file_loses_everything_and_a_synced_one_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let (path, f) = file_with(&dir, b"");
        let mut undo = Undo::new(f.try_clone().unwrap()).unwrap();
        undo.before_write(0, 5).unwrap();
        f.write_all_at(b"hello", 0).unwrap();
        undo.sync(true).unwrap();
        let mut undo = Undo::new(f.try_clone().unwrap()).unwrap();
        undo.before_write(5, 6).unwrap();
        f.write_all_at(b" world", 5).unwrap();
        assert_eq!(undo.lose().unwrap(), 6);
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
    }
}
