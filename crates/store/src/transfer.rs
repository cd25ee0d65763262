//! What copying a store to another place needs (a remote: see `docs/format.md`, Remote
//! store): the packs as they are, each pack's tail (its trailer and footer) as a small index
//! of what it holds, inline objects sealed into a pack first, and a pack fetched from
//! elsewhere taken in only once every object in it is verified.
//!
//! Invariants:
//! - A pack is immutable once published: its bytes, and so its tail, never change; a copy
//!   anywhere is the same file.
//! - [`Store::import_pack`] never indexes a pack it has not read whole: every object's header,
//!   length and id are checked before the file gets its place and its rows. A damaged copy is
//!   refused naming the pack and the object, and leaves nothing behind.
//! - [`Store::seal_inline`] moves objects, it never drops one: the new pack is durable and in
//!   place before the transaction that points the objects at it and deletes their inline rows.
//!   The caller holds whatever lock keeps garbage collection away.

use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::pack::{self, PublishedPack};
use crate::{Error, ObjectId, Result, Store};

/// A published pack as a copy needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackFile {
    /// Its name: 32 hex digits, unique across machines (random, not a content hash).
    pub name: String,
    /// Its length in bytes.
    pub size: u64,
    /// Where it is on disk.
    pub path: PathBuf,
}

/// The ids of the objects a pack tail (the bytes [`Store::pack_tail`] returns) lists, after
/// checking its footer and its checksum. The error says what is wrong with it.
pub fn pack_tail_ids(tail: &[u8]) -> Result<Vec<ObjectId>, String> {
    if tail.len() < 8 || &tail[tail.len() - 4..] != b"RWPT" {
        return Err("not a pack tail (bad footer)".into());
    }
    let n = tail.len();
    let tlen = u32::from_le_bytes(tail[n - 8..n - 4].try_into().expect("4 bytes")) as usize;
    if tlen + 8 != n || tlen < 36 {
        return Err(format!(
            "trailer length {tlen} does not match the tail's {n} bytes"
        ));
    }
    let (body, sum) = tail[..tlen].split_at(tlen - 32);
    if blake3::hash(body).as_bytes() != sum {
        return Err("trailer checksum mismatch".into());
    }
    let count = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
    let rows = &body[4..];
    if rows.len() != count.saturating_mul(50) {
        return Err("trailer entry count does not match its length".into());
    }
    Ok(rows
        .chunks_exact(50)
        .map(|r| ObjectId(r[..32].try_into().expect("32 bytes")))
        .collect())
}

impl Store {
    /// Every pack the index names, oldest first, with its size and path.
    pub fn pack_files(&self) -> Result<Vec<PackFile>> {
        let conn = self.index.conn();
        let mut st = conn.prepare("SELECT name, size FROM store_packs ORDER BY id")?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        let mut out = Vec::new();
        for row in rows {
            let (name, size) = row?;
            let path = pack::pack_path(&self.packs_dir, &name);
            out.push(PackFile {
                name,
                size: size as u64,
                path,
            });
        }
        Ok(out)
    }

    /// The tail of pack `name`: its trailer (what it holds and where) and footer, the last
    /// bytes of the file. Small (50 bytes an object), and enough to learn a pack's objects
    /// without reading it.
    pub fn pack_tail(&self, name: &str) -> Result<Vec<u8>> {
        let path = pack::pack_path(&self.packs_dir, name);
        let file = File::open(&path).map_err(|source| match source.kind() {
            io::ErrorKind::NotFound => Error::MissingPack {
                pack: name.to_string(),
            },
            _ => Error::Io {
                op: "open pack",
                path: path.clone(),
                source,
            },
        })?;
        pack::read_trailer(&file)
            .map_err(|reason| Error::Format(format!("pack {name}: {reason}")))?;
        let len = file
            .metadata()
            .map_err(|source| Error::Io {
                op: "inspect pack",
                path: path.clone(),
                source,
            })?
            .len();
        let mut footer = [0u8; 8];
        file.read_exact_at(&mut footer, len - 8)
            .map_err(|source| Error::Io {
                op: "read pack",
                path: path.clone(),
                source,
            })?;
        let tlen = u64::from(u32::from_le_bytes(footer[..4].try_into().expect("4")));
        let mut tail = vec![0u8; tlen as usize + 8];
        file.read_exact_at(&mut tail, len - 8 - tlen)
            .map_err(|source| Error::Io {
                op: "read pack",
                path,
                source,
            })?;
        Ok(tail)
    }

    /// Takes in the pack file at `src` (downloaded, outside the store) as pack `name`: every
    /// object is read and verified first; then the file is moved into place, made durable, and
    /// indexed. A pack already indexed is left as it is (and `src` removed). A damaged file is
    /// refused ([`Error::Corrupt`] naming the object and `name`, or [`Error::Format`] for its
    /// trailer) and removed; nothing is indexed.
    pub fn import_pack(&self, name: &str, src: &Path) -> Result<()> {
        if !pack::is_pack_name(name) {
            return Err(Error::Format(format!("{name:?} is not a pack name")));
        }
        if self.index.pack_names()?.contains(name) {
            let _ = fs::remove_file(src);
            return Ok(());
        }
        let verified = (|| {
            let file = File::open(src).map_err(|source| Error::Io {
                op: "open downloaded pack",
                path: src.to_owned(),
                source,
            })?;
            let entries = pack::read_trailer(&file)
                .map_err(|reason| Error::Format(format!("pack {name}: {reason}")))?;
            // Every object read back and checked against its id (decompressed and hashed:
            // the cost of an import), on every core: a clone waits for it.
            let threads = std::thread::available_parallelism()
                .map_or(1, |n| n.get())
                .min(entries.len().max(1));
            let per = entries.len().div_ceil(threads).max(1);
            std::thread::scope(|s| {
                let checks: Vec<_> = entries
                    .chunks(per)
                    .map(|chunk| {
                        let file = &file;
                        s.spawn(move || {
                            for e in chunk {
                                if let Err(err) = pack::read_object(file, e) {
                                    return Err(Error::Corrupt {
                                        id: e.id,
                                        pack: name.to_string(),
                                        reason: err.reason(),
                                    });
                                }
                            }
                            Ok(())
                        })
                    })
                    .collect();
                checks
                    .into_iter()
                    .try_for_each(|h| h.join().expect("a pack check panicked"))
            })?;
            file.sync_data().map_err(|source| Error::Io {
                op: "fsync downloaded pack",
                path: src.to_owned(),
                source,
            })?;
            let size = file
                .metadata()
                .map_err(|source| Error::Io {
                    op: "inspect downloaded pack",
                    path: src.to_owned(),
                    source,
                })?
                .len();
            Ok(PublishedPack {
                name: name.to_string(),
                size,
                entries,
            })
        })();
        let published = match verified {
            Ok(p) => p,
            Err(e) => {
                let _ = fs::remove_file(src);
                return Err(e);
            }
        };
        let dest = pack::pack_path(&self.packs_dir, name);
        let dir = dest.parent().map(Path::to_owned).unwrap_or_default();
        let created = match fs::create_dir(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(source) => {
                return Err(Error::Io {
                    op: "create pack directory",
                    path: dir,
                    source,
                })
            }
        };
        // Under a publish marker, as a writer's packs: a crash between the rename and the rows
        // leaves a pack the next open adopts.
        let marker = pack::PublishMarker::create(&self.packs_dir, name)?;
        fs::rename(src, &dest).map_err(|source| Error::Io {
            op: "rename pack into place",
            path: dest.clone(),
            source,
        })?;
        pack::sync_dir(&dir)?;
        if created {
            pack::sync_dir(&self.packs_dir)?;
        }
        self.index.insert(&[published], &[])?;
        marker.remove();
        Ok(())
    }

    /// Moves every object kept inline in the index into one new pack (a copy elsewhere holds
    /// packs only). Returns how many moved. Objects are copied as stored, each verified against
    /// its id first; one that does not verify stays inline (fsck names it).
    pub fn seal_inline(&self) -> Result<u64> {
        let ids = self.index.inline_ids()?;
        if ids.is_empty() {
            return Ok(0);
        }
        let mut plan = crate::gc::SweepPlan::inline_only(ids);
        self.repack(&mut plan)?;
        self.commit_sweep(&plan)?;
        let moved = plan.inline_moved();
        self.finish_sweep(plan, &|| {})?;
        Ok(moved)
    }
}

/// Hard-links every complete pack and every clone file (`clones/<xx>/`) of the packs
/// directory `from` into the same place under `to` (copied where a link fails), skipping what
/// is there already and the writers' unfinished files in `tmp/`; every directory written is
/// synced. Both kinds of file are immutable once in place, so sharing them is safe: how a
/// worktree, an adopted history or a clone from a remote gets the objects of another store.
pub fn link_store_files(from: &Path, to: &Path) -> Result<()> {
    link_tree(from, to, true)
}

fn link_tree(from: &Path, to: &Path, top: bool) -> Result<()> {
    let io = |op: &'static str, path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { op, path, source }
    };
    let Ok(rd) = fs::read_dir(from) else {
        return Ok(());
    };
    fs::create_dir_all(to).map_err(io("create directory", to))?;
    for e in rd.flatten() {
        let name = e.file_name();
        let target = to.join(&name);
        match e.file_type() {
            Ok(t) if t.is_dir() && !(top && name == pack::TMP_DIR) => {
                link_tree(&e.path(), &target, false)?;
            }
            Ok(t) if t.is_file() && !top && !target.exists() => {
                let linked = fs::hard_link(e.path(), &target).is_ok();
                if !linked {
                    fs::copy(e.path(), &target).map_err(io("copy", &e.path()))?;
                }
            }
            _ => {}
        }
    }
    pack::sync_dir(to)
}
