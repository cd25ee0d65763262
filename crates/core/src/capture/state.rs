//! The stat cache (`state.bin`): what every captured path looked like on disk the last time it
//! was hashed, so an unchanged tree is re-read without hashing anything.
//!
//! It is a cache, never the source of truth: if it is missing or unreadable, the next capture
//! re-hashes everything (slow, but correct) and the store deduplicates. Written as temp file +
//! fsync + rename, so readers see the old or the new file, never a torn one.
//!
//! Layout (little-endian), per directory so a directory's cached children are one slice the
//! walker merge-joins against its `read_dir`:
//! `b"RWS2"`, root tree id (32), `i64` op-log position, `u32` directory count, then per
//! directory: `u32` path length, path bytes (`""` for the root), `u8` 1 if a [`DirStamp`]
//! follows (`i64` mtime ns, `i64` ctime ns, `u64` inode, `i64` listed ns, 16 bytes of rules
//! digest) or 0, `u32` entry count, then per entry sorted by name: `u32` name length, name,
//! `u8` kind, `u32` mode, `u64` size, `i64` mtime ns, `i64` ctime ns, `u64` inode, id (32; a
//! directory's tree id). A trailing BLAKE3 of everything before it detects damage. `b"RWS1"`
//! files (before directory stamps) are read as having no stamps.
//!
//! Racy timestamps (git's racy-git, jj's rule): an entry is trusted only if its mtime is
//! strictly older than the state file's own mtime; anything modified in the same tick as the
//! write is re-hashed on the next scan.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use rewind_store::{EntryKind, ObjectId};

use crate::Error;

/// One cached path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatEntry {
    pub name: Vec<u8>,
    pub kind: EntryKind,
    pub mode: u32,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub id: ObjectId,
}

impl StatEntry {
    /// The entry of the regular file `rel` with metadata `m` and content `id`.
    pub(crate) fn of_file(rel: &[u8], m: &std::fs::Metadata, id: ObjectId) -> StatEntry {
        StatEntry {
            name: crate::fs::relpath::split(rel).1.to_vec(),
            kind: EntryKind::File,
            mode: m.mode() & 0o7777,
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            ino: m.ino(),
            id,
        }
    }

    /// Kind, mode, size, mtime, ctime and inode all equal: the same file, as far as `lstat`
    /// tells (the content ids are not compared).
    pub(crate) fn same_file(&self, other: &StatEntry) -> bool {
        self.kind == other.kind
            && self.mode == other.mode
            && self.size == other.size
            && self.mtime_ns == other.mtime_ns
            && self.ctime_ns == other.ctime_ns
            && self.ino == other.ino
    }
}

/// Which `state.bin` a [`State`] in memory corresponds to: the file's device, inode, size and
/// mtime. A save writes a new file and renames it into place (a new inode; the rename keeps
/// the mtime), so a process that kept the state it loaded or saved can tell, with one `stat`,
/// whether the file is still that one and skip reading and decoding 8 MB (at 100k files).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
}

impl StateStamp {
    fn of_meta(m: &std::fs::Metadata) -> StateStamp {
        StateStamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        }
    }

    /// The stamp of the file at `path` now, if there is one.
    pub fn of(path: &Path) -> Option<StateStamp> {
        std::fs::symlink_metadata(path)
            .ok()
            .map(|m| StateStamp::of_meta(&m))
    }

    /// The state file's mtime: entries modified at or after it are racy.
    pub fn mtime_ns(&self) -> i64 {
        self.mtime_ns
    }
}

/// A directory's cached entries, sorted by name; shared between the states made from it.
pub type Listing = Arc<Vec<StatEntry>>;

/// When and under which ignore rules a directory's listing was read, and the directory's own
/// `lstat` taken before that: what lets a later walk reuse the listing without reading the
/// directory (see `scan`'s trusted listings and `docs/format.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirStamp {
    /// The directory's mtime, ctime and inode, taken before the listing was read.
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    /// The coarse real-time clock (what file systems stamp inodes with) just before the
    /// listing was read, in ns since the Unix epoch.
    pub listed_ns: i64,
    /// The ignore rules the listing was filtered with (see `scan::listing_rules`).
    pub rules: [u8; 16],
}

/// The cache: directory path → its entries sorted by name.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub root: ObjectId,
    /// The op-log position this cache is consistent with: every difference between it and the
    /// op log's view was recorded at or before this position.
    pub pos: i64,
    /// Shared listings: a capture that re-read a few directories makes its new state from
    /// the old one by replacing those, without copying the rest (O(directories), not O(files)).
    pub dirs: HashMap<Vec<u8>, Listing>,
    /// How each listing was read, for the directories that have a stamp (a directory without
    /// one is read again by the next walk).
    pub stamps: HashMap<Vec<u8>, DirStamp>,
    /// mtime of the state file when it was loaded; entries at or after it are racy.
    pub written_ns: i64,
}

impl State {
    /// Loads the cache; a missing or damaged file gives an empty cache (everything re-hashed).
    pub fn load(path: &Path) -> State {
        State::load_stamped(path).0
    }

    /// Loads the cache and says which file it came from (`None`: no usable file).
    ///
    /// The stamp is taken before reading: if the file is replaced in between, the state read
    /// is newer than its stamp, so its racy cutoff is older (more re-hashing, never less) and
    /// the stamp no longer matches the file (the next user reads it again).
    pub fn load_stamped(path: &Path) -> (State, Option<StateStamp>) {
        let Some(stamp) = StateStamp::of(path) else {
            return (State::default(), None);
        };
        let Some(data) = Mapped::open(path) else {
            return (State::default(), None);
        };
        match decode(data.bytes()) {
            Some(mut s) => {
                s.written_ns = stamp.mtime_ns;
                (s, Some(stamp))
            }
            None => (State::default(), None),
        }
    }

    /// Writes the cache (temp file, fsync, rename) and returns the stamp of the file written.
    pub fn save(&self, path: &Path) -> Result<StateStamp, Error> {
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let file = File::create(&tmp).map_err(Error::io("creating", path))?;
        // Streamed: at 300k files the encoded cache is 24 MB, and a capture saves it while
        // its own listings are still held (a first capture's peak memory was this buffer).
        let mut out = std::io::BufWriter::with_capacity(1 << 18, Hashing::new(file));
        let f = encode(self, &mut out)
            .and_then(|()| out.into_inner().map_err(|e| e.into_error()))
            .and_then(Hashing::finish)
            .map_err(Error::io("writing", path))?;
        f.sync_all().map_err(Error::io("syncing", path))?;
        let stamp = StateStamp::of_meta(&f.metadata().map_err(Error::io("reading", path))?);
        drop(f);
        std::fs::rename(&tmp, path).map_err(Error::io("renaming into place", path))?;
        Ok(stamp)
    }

    /// Whether a cached entry can be trusted without reading the file.
    pub fn is_racy(&self, e: &StatEntry) -> bool {
        e.mtime_ns >= self.written_ns
    }

    /// Whether a cache was loaded (a missing or damaged file gives an empty one).
    pub fn is_empty(&self) -> bool {
        self.dirs.is_empty()
    }

    /// The cached entry of one path.
    pub fn get(&self, rel: &[u8]) -> Option<&StatEntry> {
        let (dir, name) = crate::fs::relpath::split(rel);
        let entries = self.dirs.get(dir)?;
        entries
            .binary_search_by(|e| e.name.as_slice().cmp(name))
            .ok()
            .map(|i| &entries[i])
    }
}

/// A writer that hashes what it passes on, for the trailing BLAKE3 of the cache.
struct Hashing {
    file: File,
    hasher: blake3::Hasher,
}

impl Hashing {
    fn new(file: File) -> Hashing {
        Hashing {
            file,
            hasher: blake3::Hasher::new(),
        }
    }

    /// Appends the hash of everything written so far; gives the file back.
    fn finish(mut self) -> std::io::Result<File> {
        let sum = self.hasher.finalize();
        self.file.write_all(sum.as_bytes())?;
        Ok(self.file)
    }
}

impl Write for Hashing {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Writes the cache without its trailing hash (the caller's [`Hashing`] adds it).
fn encode(s: &State, out: &mut impl Write) -> std::io::Result<()> {
    out.write_all(b"RWS2")?;
    out.write_all(&s.root.0)?;
    out.write_all(&s.pos.to_le_bytes())?;
    let mut dirs: Vec<_> = s.dirs.iter().collect();
    dirs.sort_by(|a, b| a.0.cmp(b.0));
    out.write_all(&(dirs.len() as u32).to_le_bytes())?;
    for (path, entries) in dirs {
        out.write_all(&(path.len() as u32).to_le_bytes())?;
        out.write_all(path)?;
        match s.stamps.get(path) {
            Some(st) => {
                out.write_all(&[1])?;
                out.write_all(&st.mtime_ns.to_le_bytes())?;
                out.write_all(&st.ctime_ns.to_le_bytes())?;
                out.write_all(&st.ino.to_le_bytes())?;
                out.write_all(&st.listed_ns.to_le_bytes())?;
                out.write_all(&st.rules)?;
            }
            None => out.write_all(&[0])?,
        }
        out.write_all(&(entries.len() as u32).to_le_bytes())?;
        for e in entries.iter() {
            // One entry's bytes together: a `BufWriter` call per field costs more than the copy.
            out.write_all(&(e.name.len() as u32).to_le_bytes())?;
            out.write_all(&e.name)?;
            let mut b = [0u8; ENTRY_FIXED];
            b[0] = e.kind as u8;
            b[1..5].copy_from_slice(&e.mode.to_le_bytes());
            b[5..13].copy_from_slice(&e.size.to_le_bytes());
            b[13..21].copy_from_slice(&e.mtime_ns.to_le_bytes());
            b[21..29].copy_from_slice(&e.ctime_ns.to_le_bytes());
            b[29..37].copy_from_slice(&e.ino.to_le_bytes());
            b[37..69].copy_from_slice(&e.id.0);
            out.write_all(&b)?;
        }
    }
    Ok(())
}

/// Bytes of an entry after its name: kind, mode, size, mtime, ctime, inode, id.
const ENTRY_FIXED: usize = 1 + 4 + 8 + 8 + 8 + 8 + 32;

/// Decoding is on the path of every capture (8 MB at 100k files), so it runs in two passes:
/// a cheap one that only finds where each directory's entries are, then the allocating one
/// over all directories in parallel.
fn decode(data: &[u8]) -> Option<State> {
    use rayon::prelude::*;
    let (body, sum) = data.split_at(data.len().checked_sub(32)?);
    let mut hasher = blake3::Hasher::new();
    hasher.update_rayon(body);
    if hasher.finalize().as_bytes() != sum {
        return None;
    }
    let mut r = rewind_store::ByteReader::new(body);
    let stamped = match r.take(4)? {
        b"RWS2" => true,
        b"RWS1" => false,
        _ => return None,
    };
    let root = ObjectId(r.take(32)?.try_into().ok()?);
    let pos = r.u64()? as i64;
    let ndirs = r.u32()? as usize;
    let mut spans: Vec<(&[u8], usize, &[u8])> = Vec::with_capacity(ndirs.min(1 << 20));
    let mut stamps = HashMap::new();
    for _ in 0..ndirs {
        let plen = r.u32()? as usize;
        let path = r.take(plen)?;
        if stamped && r.u8()? == 1 {
            let stamp = DirStamp {
                mtime_ns: r.u64()? as i64,
                ctime_ns: r.u64()? as i64,
                ino: r.u64()?,
                listed_ns: r.u64()? as i64,
                rules: r.take(16)?.try_into().ok()?,
            };
            stamps.insert(path.to_vec(), stamp);
        }
        let n = r.u32()? as usize;
        let start = r.position();
        for _ in 0..n {
            let nlen = r.u32()? as usize;
            r.take(nlen.checked_add(ENTRY_FIXED)?)?;
        }
        spans.push((path, n, &body[start..r.position()]));
    }
    if !r.is_done() {
        return None;
    }
    let decoded: Option<Vec<(Vec<u8>, Listing)>> = spans
        .into_par_iter()
        .map(|(path, n, bytes)| Some((path.to_vec(), Arc::new(decode_entries(bytes, n)?))))
        .collect();
    Some(State {
        root,
        pos,
        dirs: decoded?.into_iter().collect(),
        stamps,
        written_ns: 0,
    })
}

fn decode_entries(bytes: &[u8], n: usize) -> Option<Vec<StatEntry>> {
    let mut r = rewind_store::ByteReader::new(bytes);
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let nlen = r.u32()? as usize;
        let name = r.take(nlen)?.to_vec();
        let kind = EntryKind::from_u8(r.u8()?)?;
        entries.push(StatEntry {
            name,
            kind,
            mode: r.u32()?,
            size: r.u64()?,
            mtime_ns: r.u64()? as i64,
            ctime_ns: r.u64()? as i64,
            ino: r.u64()?,
            id: r.id()?,
        });
    }
    Some(entries)
}

/// A read-only mapping of a whole file, faulted in up front: a state file is read once, in
/// full, and mapping it skips copying 8 MB into freshly faulted heap pages. The file is never
/// changed in place (a save writes a new file and renames it over), so the mapped bytes
/// cannot change under the reader.
struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapped {
    fn open(path: &Path) -> Option<Mapped> {
        use std::os::fd::AsRawFd;
        let f = File::open(path).ok()?;
        let len = usize::try_from(f.metadata().ok()?.len()).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a fresh private read-only mapping of an open file; checked for failure.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_POPULATE,
                f.as_raw_fd(),
                0,
            )
        };
        (ptr != libc::MAP_FAILED).then_some(Mapped { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes and lives as long as `self`. A file
        // truncated by someone else would fault on access (SIGBUS); Rewind never truncates a
        // state file, it replaces it.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.len) }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `open`.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage_means_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.bin");
        let mut s = State {
            root: ObjectId([1; 32]),
            ..Default::default()
        };
        s.dirs.insert(
            b"a\xff".to_vec(),
            Arc::new(vec![StatEntry {
                name: b"x".to_vec(),
                kind: EntryKind::File,
                mode: 0o755,
                size: 9,
                mtime_ns: 5,
                ctime_ns: 6,
                ino: 7,
                id: ObjectId([2; 32]),
            }]),
        );
        s.stamps.insert(
            b"a\xff".to_vec(),
            DirStamp {
                mtime_ns: -3,
                ctime_ns: 4,
                ino: 5,
                listed_ns: 6,
                rules: [7; 16],
            },
        );
        s.save(&p).unwrap();
        let l = State::load(&p);
        assert_eq!(l.root, s.root);
        assert_eq!(l.dirs, s.dirs);
        assert_eq!(l.stamps, s.stamps);
        assert!(l.written_ns > 0);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[40] ^= 1;
        std::fs::write(&p, bytes).unwrap();
        assert!(State::load(&p).dirs.is_empty());
    }
    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(24))]
        /// A saved cache loads back as it was, with its checksum accepted: also when it is
        /// many times the writer's buffer, so that the checksum covers every write of a
        /// streamed save exactly once.
        #[test]
        fn any_cache_round_trips(
            dirs in proptest::collection::vec(
                (proptest::collection::vec(proptest::num::u8::ANY, 0..12), 0usize..3000,
                 proptest::num::u64::ANY, proptest::bool::ANY),
                0..6),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("state.bin");
            let mut s = State { pos: 42, ..Default::default() };
            for (path, n, seed, stamped) in dirs {
                let entries = (0..n as u64)
                    .map(|i| {
                        let v = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                        StatEntry {
                            name: format!("{i:06}-{}", v % 977).into_bytes(),
                            kind: [EntryKind::File, EntryKind::Symlink, EntryKind::Dir,
                                   EntryKind::Uncovered][(v % 4) as usize],
                            mode: (v % 0o7777) as u32,
                            size: v >> 3,
                            mtime_ns: v as i64,
                            ctime_ns: (v >> 1) as i64,
                            ino: v.rotate_left(7),
                            id: ObjectId([(v % 251) as u8; 32]),
                        }
                    })
                    .collect();
                if stamped {
                    let stamp = DirStamp {
                        mtime_ns: seed as i64,
                        ctime_ns: 1,
                        ino: 2,
                        listed_ns: 3,
                        rules: [seed as u8; 16],
                    };
                    s.stamps.insert(path.clone(), stamp);
                }
                s.dirs.insert(path, Arc::new(entries));
            }
            s.save(&p).unwrap();
            let l = State::load(&p);
            proptest::prop_assert_eq!(l.pos, 42);
            proptest::prop_assert_eq!(&l.dirs, &s.dirs);
            proptest::prop_assert_eq!(&l.stamps, &s.stamps);
        }
    }
}
