//! Pack files: many objects in one immutable file, with an index in a trailer.
//!
//! Why packs: one file per object costs an inode and a directory entry per object; the research
//! prototype measured 2.8x the time of packs even before compression.
//!
//! Layout (integers little-endian; see `docs/format.md`):
//!
//! ```text
//! header   b"RWPK" u32 version=1
//! object*  u8 kind, u8 compression, u32 raw_len, u32 stored_len, [32] id, stored bytes
//! trailer  u32 count, count x (id[32], u8 kind, u8 compression, u64 offset,
//!          u32 stored_len, u32 raw_len), [32] BLAKE3 of the preceding trailer bytes
//! footer   u32 trailer length, b"RWPT"
//! ```
//!
//! Every object carries its own header so that a pack whose trailer is lost can still be read
//! object by object; the trailer lets `Store::open` re-index an orphan pack in one read.
//!
//! A pack is written under `tmp/` while its writer holds an exclusive kernel lock on it (so a
//! dead writer's temp pack is recognisable: its lock is gone), then fsynced and renamed to
//! `<first two hex digits>/<name>.pack`.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::{compress, Error, ObjectId, ObjectKind, Result};

const PACK_MAGIC: &[u8; 4] = b"RWPK";
const PACK_VERSION: u32 = 1;
const FOOTER_MAGIC: &[u8; 4] = b"RWPT";
pub(crate) const HEADER_LEN: u64 = 8;
pub(crate) const OBJECT_HEADER_LEN: usize = 42;
const ENTRY_LEN: usize = 50;
const FOOTER_LEN: u64 = 8;
/// Name of the directory holding packs being written.
pub(crate) const TMP_DIR: &str = "tmp";

/// How an object's bytes are stored. The discriminants are part of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    Raw = 0,
    Zstd = 1,
}

impl Compression {
    pub fn from_u8(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::Raw),
            1 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// Where one object sits in its pack: a trailer entry, and an index row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub id: ObjectId,
    pub kind: ObjectKind,
    pub compression: Compression,
    /// Offset of the object's header in the pack.
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
}

fn object_header(e: &Entry) -> [u8; OBJECT_HEADER_LEN] {
    let mut h = [0u8; OBJECT_HEADER_LEN];
    h[0] = e.kind as u8;
    h[1] = e.compression as u8;
    h[2..6].copy_from_slice(&e.raw_len.to_le_bytes());
    h[6..10].copy_from_slice(&e.stored_len.to_le_bytes());
    h[10..42].copy_from_slice(&e.id.0);
    h
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0; N];
    a.copy_from_slice(b);
    a
}

/// A fresh, unique pack name: 32 hex digits. Random rather than content-derived, because two
/// processes writing the same objects must still produce distinct files.
pub(crate) fn new_pack_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = blake3::Hasher::new();
    h.update(&std::process::id().to_le_bytes());
    h.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    h.update(&now.as_nanos().to_le_bytes());
    // Seeded from the OS's randomness, once per process.
    h.update(
        &std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
            .to_le_bytes(),
    );
    hex::encode(&h.finalize().as_bytes()[..16])
}

/// Whether `s` is a pack name as [`new_pack_name`] makes them.
pub(crate) fn is_pack_name(s: &str) -> bool {
    s.len() == 32 && is_lower_hex(s)
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(crate) fn pack_path(packs_dir: &Path, name: &str) -> PathBuf {
    packs_dir.join(&name[..2]).join(format!("{name}.pack"))
}

fn io_err<'p>(op: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> Error + 'p {
    move |source| Error::Io {
        op,
        path: path.to_owned(),
        source,
    }
}

/// Removes a temp pack when dropped, unless it was renamed into place.
pub(crate) struct TmpGuard {
    pub(crate) path: PathBuf,
    pub(crate) armed: bool,
}

impl Drop for TmpGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A pack being appended to, under `tmp/`.
pub(crate) struct PackWriter {
    // Declared first so the file is unlinked before the buffer's final flush on drop.
    guard: TmpGuard,
    name: String,
    out: BufWriter<File>,
    len: u64,
    entries: Vec<Entry>,
}

/// A new temp file `tmp/<name>.<ext>` under a fresh name, created and locked: a live writer
/// holds the lock, so another process's [`remove_dead_temp_packs`] leaves it alone. Removed
/// when the guard drops, unless disarmed.
pub(crate) fn new_locked_temp(packs_dir: &Path, ext: &str) -> Result<(String, File, TmpGuard)> {
    let mut attempts = 0;
    loop {
        let name = new_pack_name();
        let path = packs_dir.join(TMP_DIR).join(format!("{name}.{ext}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err("create temp file", &path))?;
        let guard = TmpGuard {
            path: path.clone(),
            armed: true,
        };
        file.lock().map_err(io_err("lock temp file", &path))?;
        // Between our create and our lock, another process's `Store::open` may have locked
        // the new file, taken it for a dead writer's and unlinked it. If the path no longer
        // names our file, start over under a new name.
        let ours = file.metadata().map_err(io_err("stat temp file", &path))?;
        let still_ours = match fs::metadata(&path) {
            Ok(m) => m.dev() == ours.dev() && m.ino() == ours.ino(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(io_err("stat temp file", &path)(e)),
        };
        if still_ours {
            return Ok((name, file, guard));
        }
        std::mem::forget(guard); // the path is not ours to remove
        attempts += 1;
        if attempts >= 5 {
            return Err(Error::Io {
                op: "keep temp file",
                path,
                source: io::Error::other("removed by another process while being created"),
            });
        }
    }
}

impl PackWriter {
    pub fn create(packs_dir: &Path) -> Result<PackWriter> {
        let (name, file, guard) = new_locked_temp(packs_dir, "pack")?;
        let path = guard.path.clone();
        let mut out = BufWriter::with_capacity(256 << 10, file);
        out.write_all(PACK_MAGIC)
            .and_then(|()| out.write_all(&PACK_VERSION.to_le_bytes()))
            .map_err(io_err("write temp pack", &path))?;
        Ok(PackWriter {
            guard,
            name,
            out,
            len: HEADER_LEN,
            entries: Vec::new(),
        })
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends one object. On error the pack is torn and must be abandoned.
    pub fn append(
        &mut self,
        id: ObjectId,
        kind: ObjectKind,
        compression: Compression,
        raw_len: u32,
        stored: &[u8],
    ) -> Result<()> {
        let entry = Entry {
            id,
            kind,
            compression,
            offset: self.len,
            stored_len: stored.len() as u32,
            raw_len,
        };
        self.out
            .write_all(&object_header(&entry))
            .and_then(|()| self.out.write_all(stored))
            .map_err(io_err("write temp pack", &self.guard.path))?;
        self.len += (OBJECT_HEADER_LEN + stored.len()) as u64;
        self.entries.push(entry);
        Ok(())
    }

    /// Writes the trailer and makes the pack durable (still under `tmp/`).
    pub fn seal(mut self) -> Result<SealedPack> {
        // Kept until the writer commits, with every other sealed pack's: the growth slack of
        // pushes (a quarter, on average) would be held as long.
        self.entries.shrink_to_fit();
        let trailer = encode_trailer(&self.entries);
        let path = self.guard.path.clone();
        self.out
            .write_all(&trailer)
            .and_then(|()| self.out.write_all(&(trailer.len() as u32).to_le_bytes()))
            .and_then(|()| self.out.write_all(FOOTER_MAGIC))
            .and_then(|()| self.out.flush())
            .map_err(io_err("write temp pack", &path))?;
        let file = self
            .out
            .into_inner()
            .map_err(|e| io_err("write temp pack", &path)(e.into_error()))?;
        // Start writing the pack back now, without waiting: the fsync that makes it durable
        // happens at publish, by which time most of it is on disk, so hashing the next files
        // overlaps with the I/O instead of stalling behind it.
        // SAFETY: a valid open fd; offsets 0,0 mean the whole file.
        unsafe {
            libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WRITE);
        }
        Ok(SealedPack {
            guard: self.guard,
            name: self.name,
            size: self.len + trailer.len() as u64 + FOOTER_LEN,
            entries: self.entries,
            _file: file,
        })
    }
}

/// A complete pack still under `tmp/` (its writeback started), its lock held until it is
/// fsynced and renamed.
pub(crate) struct SealedPack {
    guard: TmpGuard,
    pub name: String,
    pub size: u64,
    pub entries: Vec<Entry>,
    _file: File,
}

impl SealedPack {
    /// Makes the pack's bytes durable now (a sealing thread's job, so the capture's threads
    /// need not wait for it); the fsync at publish then finds nothing left to write.
    pub fn synced(self) -> Result<SealedPack> {
        self._file
            .sync_data()
            .map_err(io_err("fsync temp pack", &self.guard.path))?;
        // The writer never reads its packs back, and a first capture writes hundreds of MB of
        // them: let the kernel drop these pages (clean now) so that the next pack's writes
        // reuse them, instead of reclaiming other memory for every page. Right after another
        // tool filled the page cache that reclaim was most of a first capture's kernel time.
        // SAFETY: a valid open fd; offsets 0,0 mean the whole file.
        unsafe {
            libc::posix_fadvise(self._file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        Ok(self)
    }

    /// Renames the pack into place. Returns the directory that must be fsynced, and whether it
    /// was created (then its parent must be fsynced too).
    pub fn publish(mut self, packs_dir: &Path) -> Result<(PathBuf, bool, PublishedPack)> {
        // Durable before it gets its final name (restic's order: data, then index).
        self._file
            .sync_data()
            .map_err(io_err("fsync temp pack", &self.guard.path))?;
        let dest = pack_path(packs_dir, &self.name);
        let dir = dest.parent().map(Path::to_owned).unwrap_or_default();
        let created = match fs::create_dir(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(io_err("create pack directory", &dir)(e)),
        };
        fs::rename(&self.guard.path, &dest).map_err(io_err("rename pack into place", &dest))?;
        self.guard.armed = false;
        Ok((
            dir,
            created,
            PublishedPack {
                name: std::mem::take(&mut self.name),
                size: self.size,
                entries: std::mem::take(&mut self.entries),
            },
        ))
    }
}

/// `tmp/<name>.publishing`, locked by the writer from before its pack is renamed into place
/// until the pack's index rows are committed.
pub(crate) struct PublishMarker {
    path: PathBuf,
    _file: File,
}

pub(crate) const PUBLISHING: &str = "publishing";

impl PublishMarker {
    pub fn create(packs_dir: &Path, name: &str) -> Result<PublishMarker> {
        let path = packs_dir.join(TMP_DIR).join(format!("{name}.{PUBLISHING}"));
        let file = File::create(&path).map_err(io_err("create publish marker", &path))?;
        file.lock().map_err(io_err("lock publish marker", &path))?;
        Ok(PublishMarker { path, _file: file })
    }

    pub fn remove(self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Pack names whose publisher died before indexing them (their marker's lock is free); the
/// markers are removed by [`remove_marker`] once the packs are dealt with.
pub(crate) fn dead_publications(packs_dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let tmp = packs_dir.join(TMP_DIR);
    let mut out = Vec::new();
    for f in fs::read_dir(&tmp).map_err(io_err("list temp packs", &tmp))? {
        let f = f.map_err(io_err("list temp packs", &tmp))?;
        let path = f.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(&format!(".{PUBLISHING}")))
            .map(str::to_owned)
        else {
            continue;
        };
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            out.push((name, path));
        }
    }
    Ok(out)
}

pub(crate) fn remove_marker(path: &Path) {
    let _ = fs::remove_file(path);
}

impl SealedPack {
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A pack in place under its final name, not necessarily indexed yet.
pub(crate) struct PublishedPack {
    pub name: String,
    pub size: u64,
    pub entries: Vec<Entry>,
}

/// Fsyncs a directory so the renames and creations in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

fn encode_trailer(entries: &[Entry]) -> Vec<u8> {
    let mut t = Vec::with_capacity(4 + entries.len() * ENTRY_LEN + 32);
    t.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        t.extend_from_slice(&e.id.0);
        t.push(e.kind as u8);
        t.push(e.compression as u8);
        t.extend_from_slice(&e.offset.to_le_bytes());
        t.extend_from_slice(&e.stored_len.to_le_bytes());
        t.extend_from_slice(&e.raw_len.to_le_bytes());
    }
    let sum = blake3::hash(&t);
    t.extend_from_slice(sum.as_bytes());
    t
}

/// Reads and checks a pack's header and trailer. The error says what is wrong with the file.
pub(crate) fn read_trailer(file: &File) -> Result<Vec<Entry>, String> {
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    if len < HEADER_LEN + FOOTER_LEN {
        return Err(format!("pack is {len} bytes, too short"));
    }
    let mut header = [0u8; HEADER_LEN as usize];
    file.read_exact_at(&mut header, 0)
        .map_err(|e| e.to_string())?;
    if &header[..4] != PACK_MAGIC {
        return Err("bad pack magic".into());
    }
    let version = u32::from_le_bytes(arr(&header[4..]));
    if version != PACK_VERSION {
        return Err(format!("unsupported pack version {version}"));
    }
    let mut footer = [0u8; FOOTER_LEN as usize];
    file.read_exact_at(&mut footer, len - FOOTER_LEN)
        .map_err(|e| e.to_string())?;
    if &footer[4..] != FOOTER_MAGIC {
        return Err("bad trailer magic".into());
    }
    let tlen = u64::from(u32::from_le_bytes(arr(&footer[..4])));
    let data_end = (len - FOOTER_LEN)
        .checked_sub(tlen)
        .filter(|&end| end >= HEADER_LEN)
        .ok_or("trailer length exceeds the pack")?;
    let mut t = vec![0u8; tlen as usize];
    file.read_exact_at(&mut t, data_end)
        .map_err(|e| e.to_string())?;
    if t.len() < 36 {
        return Err("trailer too short".into());
    }
    let (body, sum) = t.split_at(t.len() - 32);
    if blake3::hash(body).as_bytes() != sum {
        return Err("trailer checksum mismatch".into());
    }
    let count = u32::from_le_bytes(arr(&body[..4])) as usize;
    let rows = &body[4..];
    if rows.len() != count.saturating_mul(ENTRY_LEN) {
        return Err("trailer entry count does not match its length".into());
    }
    let mut entries = Vec::with_capacity(count);
    for r in rows.chunks_exact(ENTRY_LEN) {
        let e = Entry {
            id: ObjectId(arr(&r[..32])),
            kind: ObjectKind::from_u8(r[32]).ok_or("unknown object kind in trailer")?,
            compression: Compression::from_u8(r[33]).ok_or("unknown compression in trailer")?,
            offset: u64::from_le_bytes(arr(&r[34..42])),
            stored_len: u32::from_le_bytes(arr(&r[42..46])),
            raw_len: u32::from_le_bytes(arr(&r[46..50])),
        };
        let end = e
            .offset
            .checked_add(OBJECT_HEADER_LEN as u64 + u64::from(e.stored_len));
        if e.offset < HEADER_LEN || end.is_none_or(|end| end > data_end) {
            return Err(format!(
                "trailer entry for {} points outside the pack",
                e.id
            ));
        }
        entries.push(e);
    }
    Ok(entries)
}

/// Why an object could not be read from its pack.
pub(crate) enum ReadError {
    Io(io::Error),
    Corrupt(String),
}

impl ReadError {
    pub(crate) fn reason(self) -> String {
        match self {
            ReadError::Corrupt(reason) => reason,
            ReadError::Io(err) => format!("read error: {err}"),
        }
    }
}

/// Reads one object and verifies it: the header must match the index entry, the bytes must
/// decompress to `raw_len` and hash to the id. Returns the raw bytes.
pub(crate) fn read_object(file: &File, e: &Entry) -> Result<Vec<u8>, ReadError> {
    let total = OBJECT_HEADER_LEN + e.stored_len as usize;
    let mut buf = vec![0u8; total];
    file.read_exact_at(&mut buf, e.offset).map_err(|err| {
        if err.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::Corrupt("pack is truncated".into())
        } else {
            ReadError::Io(err)
        }
    })?;
    if buf[..OBJECT_HEADER_LEN] != object_header(e) {
        return Err(ReadError::Corrupt(
            "object header does not match the index".into(),
        ));
    }
    buf.drain(..OBJECT_HEADER_LEN);
    decode_object(e, buf)
}

/// The raw bytes of an object from its stored bytes (as in a pack, after the header, or as
/// inlined in the index), verified against its id.
pub(crate) fn decode_object(e: &Entry, stored: Vec<u8>) -> Result<Vec<u8>, ReadError> {
    if stored.len() != e.stored_len as usize {
        return Err(ReadError::Corrupt(format!(
            "{} stored bytes, expected {}",
            stored.len(),
            e.stored_len
        )));
    }
    let raw = match e.compression {
        Compression::Raw => stored,
        Compression::Zstd => {
            compress::decompress(&stored, e.raw_len as usize).map_err(ReadError::Corrupt)?
        }
    };
    if raw.len() != e.raw_len as usize {
        return Err(ReadError::Corrupt(format!(
            "{} bytes, expected {}",
            raw.len(),
            e.raw_len
        )));
    }
    if ObjectId::compute(e.kind, &raw) != e.id {
        return Err(ReadError::Corrupt("content does not match its id".into()));
    }
    Ok(raw)
}

/// Open pack files by index row id, kept so that reading 100k small objects neither opens a
/// file nor looks up a pack name each time.
///
/// A cached handle keeps a pack readable even if the file is removed meanwhile; that is only
/// ever stale in the harmless direction (the bytes are still verified).
#[derive(Default)]
pub(crate) struct PackCache {
    files: Mutex<HashMap<i64, OpenPack>>,
}

/// A pack's name and open file.
pub(crate) type OpenPack = (Arc<str>, Arc<File>);

const MAX_OPEN_PACKS: usize = 64;

impl PackCache {
    /// The open pack with row id `id`; `name` resolves the id on a cache miss.
    pub fn get(
        &self,
        packs_dir: &Path,
        id: i64,
        name: impl FnOnce() -> Result<String>,
    ) -> Result<OpenPack> {
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = files.get(&id) {
            return Ok(f.clone());
        }
        let name: Arc<str> = name()?.into();
        let path = pack_path(packs_dir, &name);
        let file = match File::open(&path) {
            Ok(f) => Arc::new(f),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(Error::MissingPack {
                    pack: name.to_string(),
                })
            }
            Err(e) => return Err(io_err("open pack", &path)(e)),
        };
        if files.len() >= MAX_OPEN_PACKS {
            files.clear();
        }
        files.insert(id, (name.clone(), file.clone()));
        Ok((name, file))
    }
}

/// The names of all pack files in place (not under `tmp/`).
pub(crate) fn packs_on_disk(packs_dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let top = fs::read_dir(packs_dir).map_err(io_err("list packs", packs_dir))?;
    for sub in top {
        let sub = sub.map_err(io_err("list packs", packs_dir))?;
        let fan = sub.file_name();
        let Some(fan) = fan.to_str() else { continue };
        if fan.len() != 2 || !is_lower_hex(fan) {
            continue;
        }
        let dir = sub.path();
        let list = match fs::read_dir(&dir) {
            Ok(l) => l,
            Err(e) if e.kind() == io::ErrorKind::NotADirectory => continue,
            Err(e) => return Err(io_err("list packs", &dir)(e)),
        };
        for f in list {
            let f = f.map_err(io_err("list packs", &dir))?;
            let file_name = f.file_name();
            let Some(name) = file_name.to_str().and_then(|n| n.strip_suffix(".pack")) else {
                continue;
            };
            if is_pack_name(name) && name.starts_with(fan) {
                names.push(name.to_owned());
            }
        }
    }
    Ok(names)
}

/// Removes temp packs (and temp clones, `crate::clone`) whose writer is dead: a live writer holds a lock on its temp pack, and
/// the kernel drops the lock when the process dies, however it dies.
pub(crate) fn remove_dead_temp_packs(packs_dir: &Path) -> Result<()> {
    let tmp = packs_dir.join(TMP_DIR);
    let list = fs::read_dir(&tmp).map_err(io_err("list temp packs", &tmp))?;
    for f in list {
        let f = f.map_err(io_err("list temp packs", &tmp))?;
        let path = f.path();
        // Only files this store names; anything else in tmp/ is not ours to remove.
        let ours = path
            .extension()
            .is_some_and(|e| e == "pack" || e == "clone")
            && f.file_type().is_ok_and(|t| t.is_file());
        if !ours {
            continue;
        }
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue, // just renamed or removed
            Err(e) => return Err(io_err("open temp pack", &path)(e)),
        };
        match file.try_lock() {
            Ok(()) => match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err("remove dead temp pack", &path)(e)),
            },
            Err(fs::TryLockError::WouldBlock) => {} // a live writer
            Err(fs::TryLockError::Error(e)) => {
                return Err(io_err("lock temp pack", &path)(e));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailer_round_trips_and_damage_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join(TMP_DIR)).unwrap();
        let mut w = PackWriter::create(dir.path()).unwrap();
        for i in 0..5u8 {
            let data = vec![i; 100 + i as usize];
            let id = ObjectId::compute(ObjectKind::Blob, &data);
            w.append(
                id,
                ObjectKind::Blob,
                Compression::Raw,
                data.len() as u32,
                &data,
            )
            .unwrap();
        }
        let sealed = w.seal().unwrap();
        let (_, _, published) = sealed.publish(dir.path()).unwrap();
        assert!(fs::read_dir(dir.path().join(TMP_DIR))
            .unwrap()
            .next()
            .is_none());
        let path = pack_path(dir.path(), &published.name);
        assert_eq!(fs::metadata(&path).unwrap().len(), published.size);

        let file = File::open(&path).unwrap();
        let entries = read_trailer(&file).unwrap();
        assert_eq!(entries, published.entries);
        for e in &entries {
            let raw = read_object(&file, e).ok().unwrap();
            assert_eq!(ObjectId::compute(e.kind, &raw), e.id);
        }

        // One flipped bit in the trailer: the checksum refuses it.
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 8 - 40] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let err = read_trailer(&File::open(&path).unwrap()).unwrap_err();
        assert!(err.contains("checksum"), "{err}");
    }

    #[test]
    fn pack_names_are_unique_and_well_formed() {
        let a = new_pack_name();
        let b = new_pack_name();
        assert_ne!(a, b);
        assert!(is_pack_name(&a) && is_pack_name(&b));
        assert!(!is_pack_name("tmp"));
        assert!(!is_pack_name(&a.to_uppercase()));
    }
}
