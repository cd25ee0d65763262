//! Cloned content: a large file captured by `FICLONE` (a reflink) into the store instead of
//! being read, hashed and packed.
//!
//! On a file system with copy-on-write clones (btrfs, XFS with reflink, bcachefs), a clone
//! takes no bytes and reads nothing: the store's copy shares the workspace file's blocks
//! until one side is written. A 4 GiB data file is captured in milliseconds where packing it
//! reads, hashes and compresses 4 GiB and stores a second copy. The object the trees refer to
//! is a small `clone` record; the bytes live in a read-only file beside the packs,
//! `clones/<xx>/<id>.clone`.
//!
//! Record encoding (integers little-endian): `b"RWC1"`, `u64` size, 16 random bytes. The
//! object's id is the hash of the record, like every object's.
//!
//! Invariants:
//! - A clone's id names the capture, not the content: the same bytes cloned twice get two
//!   ids. Same id still means same bytes, so a consumer that compares ids may see a change
//!   where there is none (a file touched but not edited), never miss one.
//! - A clone file is complete, read-only and durable (fsync) before it is renamed into place,
//!   and in place (renamed, directory fsynced) before the index row of its record commits
//!   ([`crate::Writer::commit`]). A crash leaves a locked temp under `tmp/` (removed by the
//!   next [`crate::Store::open`]) or a clone file with no row (removed by the next sweep).
//! - A clone holds at least [`crate::CLONE_FROM`] bytes.
//! - A clone file is never written after it is in place. Reading one checks its length; its
//!   bytes have no hash to be checked against, and `fsck` says so rather than claim it.

use std::fs::{self, File, OpenOptions, Permissions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::pack::{self, TmpGuard};
use crate::{Error, ObjectId, ObjectKind, Result};

/// Where clone files live, under the packs directory.
pub(crate) const CLONES_DIR: &str = "clones";

const RECORD_MAGIC: &[u8; 4] = b"RWC1";
const RECORD_LEN: usize = 28;

/// `FICLONE` (`_IOW(0x94, 9, int)`): make the destination share the source's blocks.
const FICLONE: libc::c_ulong = 0x4004_9409;

/// A decoded `clone` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CloneRecord {
    /// The content's length in bytes.
    pub size: u64,
    /// Makes each clone's id its own.
    pub token: [u8; 16],
}

impl CloneRecord {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(RECORD_LEN);
        out.extend_from_slice(RECORD_MAGIC);
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.token);
        out
    }

    pub fn decode(data: &[u8]) -> Result<CloneRecord, String> {
        if data.len() != RECORD_LEN || &data[..4] != RECORD_MAGIC {
            return Err("clone record: bad magic or length".into());
        }
        let mut size = [0; 8];
        size.copy_from_slice(&data[4..12]);
        let mut token = [0; 16];
        token.copy_from_slice(&data[12..]);
        Ok(CloneRecord {
            size: u64::from_le_bytes(size),
            token,
        })
    }
}

/// Where the content of clone `id` lives.
pub(crate) fn clone_path(packs_dir: &Path, id: &ObjectId) -> PathBuf {
    let hex = id.to_hex();
    packs_dir
        .join(CLONES_DIR)
        .join(&hex[..2])
        .join(format!("{hex}.clone"))
}

/// Makes `dst` share `src`'s blocks. `Ok(false)`: this file system (or this pair of files:
/// two file systems) cannot clone, so the caller copies instead.
pub fn reflink(src: &File, dst: &File) -> io::Result<bool> {
    // SAFETY: two valid descriptors; FICLONE reads nothing from memory.
    if unsafe { libc::ioctl(dst.as_raw_fd(), FICLONE as _, src.as_raw_fd()) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // No reflinks here (EOPNOTSUPP, ENOTTY: not an ioctl this file system knows), two
        // file systems (EXDEV), or a source the file system will not share (EINVAL: a swap
        // file, a file open for direct I/O; EPERM: an append-only or immutable file).
        Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EXDEV | libc::EINVAL | libc::EPERM) => {
            Ok(false)
        }
        _ => Err(e),
    }
}

/// A clone made under `tmp/` and not yet in place: removed when dropped.
pub(crate) struct TempClone {
    guard: TmpGuard,
    /// Kept open: it holds the lock that tells other processes this writer lives.
    _file: File,
    pub id: ObjectId,
    pub record: Vec<u8>,
    pub size: u64,
}

/// Clones `src` into a new temp file, read-only and durable. `Err(true)`: the file system
/// cannot; `Err(false)`: the clone holds fewer than [`crate::CLONE_FROM`] bytes (the file
/// shrank since its `stat`), so the caller packs it: every clone is at least that large,
/// which lets readers skip the lookup for smaller entries.
pub(crate) fn make(packs_dir: &Path, src: &File) -> Result<Result<TempClone, bool>> {
    let (name, file, guard) = pack::new_locked_temp(packs_dir, "clone")?;
    let io = |op: &'static str| {
        let path = guard.path.clone();
        move |source| Error::Io { op, path, source }
    };
    // On a refusal the guard removes the temp file.
    if !reflink(src, &file).map_err(io("clone into"))? {
        return Ok(Err(true));
    }
    let size = file.metadata().map_err(io("inspect clone"))?.len();
    if size < crate::CLONE_FROM {
        return Ok(Err(false));
    }
    file.set_permissions(Permissions::from_mode(0o444))
        .map_err(io("make read-only"))?;
    file.sync_all().map_err(io("fsync clone"))?;
    // The temp name is already random and unique: its 16 bytes are the record's token.
    let mut token = [0; 16];
    hex::decode_to_slice(&name, &mut token).expect("a pack name is 32 hex digits");
    let record = CloneRecord { size, token }.encode();
    Ok(Ok(TempClone {
        id: ObjectId::compute(ObjectKind::Clone, &record),
        guard,
        _file: file,
        record,
        size,
    }))
}

impl TempClone {
    /// Renames the clone into place. Returns its directory and whether it was created (both
    /// need an fsync before the index may name the clone).
    pub fn publish(mut self, packs_dir: &Path) -> Result<(PathBuf, bool)> {
        let to = clone_path(packs_dir, &self.id);
        let dir = to
            .parent()
            .expect("a clone path has a directory")
            .to_owned();
        let created = match fs::create_dir(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                fs::create_dir_all(&dir).map_err(|source| Error::Io {
                    op: "create clone directory",
                    path: dir.clone(),
                    source,
                })?;
                true
            }
            Err(source) => {
                return Err(Error::Io {
                    op: "create clone directory",
                    path: dir,
                    source,
                })
            }
        };
        fs::rename(&self.guard.path, &to).map_err(|source| Error::Io {
            op: "rename clone into place",
            path: to.clone(),
            source,
        })?;
        self.guard.armed = false;
        Ok((dir, created))
    }
}

/// Opens clone `id`'s content, checked against its record's length.
pub(crate) fn open(packs_dir: &Path, id: &ObjectId, raw: &[u8]) -> Result<(File, u64)> {
    let rec = CloneRecord::decode(raw).map_err(|reason| corrupt(id, reason))?;
    let path = clone_path(packs_dir, id);
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| corrupt(id, format!("its clone file cannot be opened: {e}")))?;
    let len = file
        .metadata()
        .map_err(|e| corrupt(id, format!("its clone file cannot be inspected: {e}")))?
        .len();
    if len != rec.size {
        return Err(corrupt(
            id,
            format!(
                "its clone file holds {len} bytes, the record says {}",
                rec.size
            ),
        ));
    }
    Ok((file, rec.size))
}

fn corrupt(id: &ObjectId, reason: String) -> Error {
    Error::Corrupt {
        id: *id,
        pack: CLONES_DIR.to_string(),
        reason,
    }
}

/// The ids of every clone file in place (not under `tmp/`).
pub(crate) fn clones_on_disk(packs_dir: &Path) -> Result<Vec<ObjectId>> {
    let top = packs_dir.join(CLONES_DIR);
    let list = |dir: &Path| match fs::read_dir(dir) {
        Ok(l) => Ok(Some(l)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            op: "list clones",
            path: dir.to_owned(),
            source,
        }),
    };
    let mut ids = Vec::new();
    let Some(fans) = list(&top)? else {
        return Ok(ids);
    };
    for fan in fans.flatten() {
        let Some(files) = list(&fan.path())? else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name();
            let id = name
                .to_str()
                .and_then(|n| n.strip_suffix(".clone"))
                .and_then(ObjectId::from_hex);
            ids.extend(id);
        }
    }
    Ok(ids)
}

/// Removes clone `id`'s file; gone already is fine.
pub(crate) fn remove(packs_dir: &Path, id: &ObjectId) -> Result<()> {
    let path = clone_path(packs_dir, id);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            op: "remove clone",
            path,
            source,
        }),
    }
}

/// Where the bytes of a clone are.
pub enum CloneContent {
    /// Its clone file, open, and its length (checked against the record).
    File(File, u64),
    /// Not on this machine (the clone came from a remote): its packed twin, a content id.
    Packed(ObjectId),
}

impl crate::Store {
    /// The bytes of `id` when it is a clone (`None` for any other object): its file, or, when
    /// the file is not here, the content it was packed as. A clone with neither is corrupt.
    pub fn clone_content(&self, id: &ObjectId) -> Result<Option<CloneContent>> {
        let (kind, raw) = self.read_object(id)?;
        if kind != ObjectKind::Clone {
            return Ok(None);
        }
        match open(&self.packs_dir, id, &raw) {
            Ok((file, size)) => Ok(Some(CloneContent::File(file, size))),
            Err(e) => match self.clone_packed(id)? {
                Some(content) => Ok(Some(CloneContent::Packed(content))),
                None => Err(e),
            },
        }
    }

    /// The content id clone `id` was packed as, if it was ([`crate::Store::pack_clones`], or
    /// recorded from a remote's manifest).
    pub fn clone_packed(&self, id: &ObjectId) -> Result<Option<ObjectId>> {
        let conn = self.index.conn();
        let mut st =
            conn.prepare_cached("SELECT content FROM store_clone_packed WHERE clone = ?1")?;
        let row: Option<Vec<u8>> =
            st.query_row([&id.0[..]], |r| r.get(0))
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })?;
        row.map(|b| to_id(b, "store_clone_packed")).transpose()
    }

    /// Every (clone, packed content) pair, sorted.
    pub fn clone_pairs(&self) -> Result<Vec<(ObjectId, ObjectId)>> {
        let conn = self.index.conn();
        let mut st =
            conn.prepare_cached("SELECT clone, content FROM store_clone_packed ORDER BY clone")?;
        let rows = st.query_map([], |r| {
            Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (a, b) = row?;
            out.push((
                to_id(a, "store_clone_packed")?,
                to_id(b, "store_clone_packed")?,
            ));
        }
        Ok(out)
    }

    /// Records (clone, packed content) pairs, as a remote's manifest lists them. The caller
    /// stores the content first: a pair must never name content that is not there.
    pub fn record_clone_pairs(&self, pairs: &[(ObjectId, ObjectId)]) -> Result<()> {
        if pairs.is_empty() {
            return Ok(());
        }
        let conn = self.index.conn();
        crate::index::in_transaction(&conn, || {
            let mut st = conn.prepare_cached(
                "INSERT OR IGNORE INTO store_clone_packed (clone, content) VALUES (?1, ?2)",
            )?;
            for (clone, content) in pairs {
                st.execute([&clone.0[..], &content.0[..]])?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// Packs the content of every clone that has no packed twin yet, as a capture without
    /// clones would have (chunks, deduplicated against everything stored), and records the
    /// pairs: what a copy of the store elsewhere (a remote) needs, since clone files stay on
    /// this machine. The content is committed before its pair. Returns how many were packed.
    /// Under the lock that keeps garbage collection away.
    pub fn pack_clones(&self) -> Result<u64> {
        let unpacked: Vec<ObjectId> = {
            let conn = self.index.conn();
            let mut st = conn.prepare_cached(
                "SELECT id FROM store_objects_all WHERE kind = ?1 AND id NOT IN \
                 (SELECT clone FROM store_clone_packed) \
                 UNION SELECT id FROM store_inline WHERE kind = ?1 AND id NOT IN \
                 (SELECT clone FROM store_clone_packed)",
            )?;
            let rows = st.query_map([ObjectKind::Clone as u8], |r| r.get::<_, Vec<u8>>(0))?;
            let mut out = Vec::new();
            for row in rows {
                out.push(to_id(row?, "store_objects")?);
            }
            out
        };
        if unpacked.is_empty() {
            return Ok(0);
        }
        let writer = self.writer()?;
        let mut pairs = Vec::with_capacity(unpacked.len());
        for id in unpacked {
            if let Some(CloneContent::File(mut file, size)) = self.clone_content(&id)? {
                let (content, len) = writer.put_content(&mut file).map_err(|e| match e {
                    Error::Input(e) => corrupt(&id, format!("its clone file cannot be read: {e}")),
                    e => e,
                })?;
                if len != size {
                    return Err(corrupt(
                        &id,
                        format!("its clone file gave {len} bytes, the record says {size}"),
                    ));
                }
                pairs.push((id, content));
            }
        }
        writer.commit()?;
        self.record_clone_pairs(&pairs)?;
        Ok(pairs.len() as u64)
    }

    /// Drops the pairs of clones no longer indexed (after a sweep removed them).
    pub(crate) fn forget_unindexed_clone_pairs(&self) -> Result<()> {
        self.index.conn().execute(
            "DELETE FROM store_clone_packed WHERE clone NOT IN (SELECT id FROM store_objects_all) \
             AND clone NOT IN (SELECT id FROM store_inline)",
            [],
        )?;
        Ok(())
    }
}

fn to_id(bytes: Vec<u8>, table: &str) -> Result<ObjectId> {
    Ok(ObjectId(bytes.try_into().map_err(|_| {
        Error::Format(format!("{table} row with an id that is not 32 bytes"))
    })?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_round_trips_and_damage_is_refused() {
        let r = CloneRecord {
            size: 4 << 30,
            token: [7; 16],
        };
        let bytes = r.encode();
        assert_eq!(CloneRecord::decode(&bytes), Ok(r));
        assert!(CloneRecord::decode(&bytes[..27]).is_err());
        let mut bad = bytes.clone();
        bad[0] = b'X';
        assert!(CloneRecord::decode(&bad).is_err());
    }
}
