//! The Rewind object store: content-addressed, deduplicated, compressed, crash-safe.
//!
//! Why it exists: agent checkpointers that borrow git's object database pay zlib + SHA-1 per
//! file, one loose file per object, and +1 GiB per version of a 1 GiB file. This store keeps
//! objects in immutable pack files, compresses with reused zstd contexts (raw when that does not
//! pay), splits large files with FastCDC so an edit in the middle of a big file stores about the
//! edit, and indexes everything in SQLite.
//!
//! It knows nothing of agents, sessions or workspaces: it stores bytes and trees and gives them
//! back, verified.
//!
//! Crash safety follows restic's rule (see `docs/format.md`): a pack is durable (fsync, rename,
//! fsync of the directory) before any index row points into it, and the index rows of one
//! [`Writer`] commit in one SQLite transaction. A crash leaves at most a dead writer's temp
//! packs, which the next [`Store::open`] removes, and orphan packs (in place, not indexed),
//! which it adopts from their trailers.
//!
//! Modules: `pack` (pack files, temp packs and their locks), `index` (the SQLite tables),
//! `writer` (dedup, compression, commit), `chunk` (content splitting, the `file` object),
//! `compress` (zstd and when not to use it), `clone` (large files cloned in, not copied),
//! `fsck`, `gc` (sweep and repack), and for a process that keeps running, `known` (the ids it
//! knows are stored) and `wal` (WAL checkpoints on a thread of their own).

mod chunk;
mod clone;
mod compress;
#[cfg(test)]
mod crash_tests;
mod extents;
mod fsck;
mod gc;
mod id;
mod idset;
mod index;
mod known;
mod pack;
mod transfer;
mod tree;
mod wal;
mod writer;

pub use clone::{reflink, CloneContent};
pub use extents::{exclusive_bytes, same_content};
pub use gc::{object_cost, ObjectCost, SweepPlan, SweepStats};
pub use id::{ObjectId, ObjectKind};
pub use index::{open_database, PAGE_CACHE_BYTES};
pub use known::KnownIds;
pub use transfer::{link_store_files, pack_tail_ids, PackFile};
pub use tree::{valid_name, EntryKind, Listing, Tree, TreeEntry, FANOUT_AT};
pub use wal::{RequestUnderWay, WalCheckpointer};
pub use writer::{Prepared, Writer};

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use chunk::FileObject;
use pack::{PackCache, PublishedPack, ReadError};

/// Reads the little-endian fixed layouts Rewind writes (trees, the stat cache, restore plans):
/// every read is bounds-checked and returns `None` past the end, so damaged input is an error,
/// never a panic.
pub struct ByteReader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> ByteReader<'a> {
        ByteReader { data, pos: 0 }
    }
    /// The next `n` bytes; `None` (and nothing consumed) if fewer remain.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.data.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    /// The next byte.
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    /// The next 4 bytes as a little-endian `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    /// The next 8 bytes as a little-endian `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// The next 32 bytes as an [`ObjectId`].
    pub fn id(&mut self) -> Option<ObjectId> {
        Some(ObjectId(self.take(32)?.try_into().ok()?))
    }
    /// How many bytes were read.
    pub fn position(&self) -> usize {
        self.pos
    }
    /// Whether every byte was read.
    pub fn is_done(&self) -> bool {
        self.pos == self.data.len()
    }
}

/// Files larger than this are split into content-defined chunks.
pub const CHUNK_THRESHOLD: u64 = 1 << 20;

/// Everything that can go wrong in the store. Variants are what a caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object is not in the index (never stored, or collected).
    #[error("object {id} is not in the store")]
    Missing {
        /// The object asked for.
        id: ObjectId,
    },
    /// The object's bytes do not hash to its id, or cannot be decoded.
    #[error("object {id} in pack {pack} is corrupt: {reason}")]
    Corrupt {
        /// The object whose bytes are bad.
        id: ObjectId,
        /// The pack holding it (its 32-hex-digit name), or [`INLINE`].
        pack: String,
        /// What is wrong, for a person: hash mismatch, bad zstd frame, undecodable layout.
        reason: String,
    },
    /// The index points into a pack file that is not on disk.
    #[error("pack {pack} is missing from the store")]
    MissingPack {
        /// The pack's name (32 hex digits).
        pack: String,
    },
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, such as "open pack" or "create store directory".
        op: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Reading the caller's stream failed while storing it.
    #[error("reading input: {0}")]
    Input(std::io::Error),
    /// Writing to the caller's stream failed while reading content out.
    #[error("writing output: {0}")]
    Output(std::io::Error),
    /// The SQLite index failed.
    #[error("object index: {0}")]
    Db(#[from] rusqlite::Error),
    /// Malformed data (a tree, a file object, a pack trailer).
    #[error("{0}")]
    Format(String),
}

/// The store's result: [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A locked handle on the store's connection: see [`Store::db`].
pub struct Db<'a>(parking_lot::ReentrantMutexGuard<'a, rusqlite::Connection>);

impl std::ops::Deref for Db<'_> {
    type Target = rusqlite::Connection;
    fn deref(&self) -> &rusqlite::Connection {
        &self.0
    }
}

/// What errors and fsck name as the "pack" of an object kept inline in the index.
pub const INLINE: &str = "(inline in the index)";

/// Tunables. The defaults are what the benchmarks in `docs/benchmarks.md` were run with.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// zstd level for new objects; 1 by default (why: `docs/format.md`, Compression).
    pub zstd_level: i32,
    /// A pack is closed and a new one started once it holds this many bytes.
    pub pack_target_size: u64,
    /// A writer whose objects come to at most this many stored bytes keeps them in the index
    /// instead of writing a pack (see [`Writer::commit`]); 0 always writes packs.
    pub inline_limit: usize,
    /// Files of at least this many bytes are cloned into the store (`FICLONE`) where the file
    /// system can, instead of being chunked into packs ([`Writer::put_file`]); `u64::MAX`
    /// never clones.
    pub clone_from: u64,
}

/// The default [`StoreConfig::clone_from`]: below it, packing costs little (a few
/// milliseconds of hashing) and deduplicates and compresses; above it, a clone costs no
/// reading and, until the file changes, no space.
pub const CLONE_FROM: u64 = 8 << 20;

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            zstd_level: 1,
            pack_target_size: 32 << 20,
            inline_limit: 64 << 10,
            clone_from: CLONE_FROM,
        }
    }
}

/// Sizes, for `rewind status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Pack files in the index.
    pub packs: u64,
    /// Objects in the index, packed and inline (one object stored twice by racing writers may
    /// count twice).
    pub objects: u64,
    /// Bytes of pack files on disk.
    pub pack_bytes: u64,
    /// Bytes the objects hold uncompressed.
    pub raw_bytes: u64,
    /// Clone files in place (large files cloned in: see the `clone` module).
    pub clones: u64,
    /// Their length in bytes.
    pub clone_bytes: u64,
    /// Of that, the blocks only they hold ([`exclusive_bytes`]): what they cost on disk.
    pub clone_own_bytes: u64,
}

/// What one [`Writer::commit`] made durable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Objects this writer stored that were not in the store before it started (packed or
    /// inline).
    pub new_objects: u64,
    /// Their uncompressed size in bytes.
    pub new_raw_bytes: u64,
    /// Bytes of the pack files it published (0 when everything went inline in the index).
    pub new_pack_bytes: u64,
}

/// A problem `fsck` found, naming what is lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsckProblem {
    /// The object's stored bytes are damaged.
    Corrupt {
        /// The damaged object.
        id: ObjectId,
        /// Its kind, as the index records it: says what is lost (file content or a directory).
        kind: ObjectKind,
        /// The pack holding it, or [`INLINE`].
        pack: String,
        /// What is wrong, for a person.
        reason: String,
    },
    /// A pack the index refers to is gone; these objects are lost with it.
    MissingPack {
        /// The pack's name (32 hex digits), or `#N (no such pack row)` for object rows that
        /// name a pack row `N` the index does not have.
        pack: String,
        /// Every object the index says it held.
        objects: Vec<ObjectId>,
    },
    /// A pack on disk that no index row refers to and whose trailer cannot be read.
    UnreadablePack {
        /// The pack's name (32 hex digits).
        pack: String,
        /// Why its trailer could not be read.
        reason: String,
    },
}

/// What [`Store::fsck`] checked and found. Clean when `problems` is empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    /// Indexed packs found on disk and read.
    pub packs_checked: u64,
    /// Objects read, decompressed, hashed and decoded (packed and inline).
    pub objects_checked: u64,
    /// Of them, clone objects: each clone file checked present at its record's length, and
    /// hashed against its packed twin where it has one.
    pub clones_checked: u64,
    /// Of those, clones with no packed twin: their bytes have nothing to be checked against.
    pub clones_unhashed: u64,
    /// Everything wrong, in the order found; the objects each one loses are named in it.
    pub problems: Vec<FsckProblem>,
}

/// An open store. Cheap to share between threads (`&Store` is `Sync`); several processes may
/// open the same store at once.
pub struct Store {
    packs_dir: PathBuf,
    config: StoreConfig,
    index: index::Index,
    open_packs: PackCache,
    /// Set once a clone was refused (no reflinks here, or the workspace on another file
    /// system): later large files are packed without trying again.
    clones_refused: std::sync::atomic::AtomicBool,
    /// Ids this process knows are indexed, shared with its other stores of this database
    /// (see [`Store::share_known_ids`]).
    known: std::sync::OnceLock<std::sync::Arc<KnownIds>>,
}

impl Store {
    /// The tunables it was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// Opens (creating if needed) the store whose packs live in `packs_dir` and whose index
    /// lives in the SQLite database `index_db` (which other crates share for their own tables).
    /// Cleans up temporary packs of dead writers and adopts orphan packs.
    ///
    /// Runs on every CLI command, so it stays cheap: one listing of `tmp/` (dead writers' temp
    /// packs and publish markers); pack directories are listed only by
    /// [`Store::adopt_orphans`].
    pub fn open(packs_dir: &Path, index_db: &Path, config: StoreConfig) -> Result<Store> {
        let tmp = packs_dir.join(pack::TMP_DIR);
        fs::create_dir_all(&tmp).map_err(|source| Error::Io {
            op: "create store directory",
            path: tmp,
            source,
        })?;
        if let Some(parent) = index_db.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|source| Error::Io {
                op: "create index directory",
                path: parent.to_owned(),
                source,
            })?;
        }
        let store = Store {
            packs_dir: packs_dir.to_owned(),
            config,
            index: index::Index::open(index_db)?,
            open_packs: PackCache::default(),
            clones_refused: Default::default(),
            known: Default::default(),
        };
        pack::remove_dead_temp_packs(packs_dir)?;
        let dead = pack::dead_publications(packs_dir)?;
        if !dead.is_empty() {
            store.adopt(dead.iter().map(|(name, _)| name.clone()).collect())?;
            for (_, marker) in &dead {
                pack::remove_marker(marker);
            }
        }
        Ok(store)
    }

    /// Indexes every pack that is in place but not in the index (one listing of every pack
    /// directory). Open already adopts the packs of writers that died while publishing; this
    /// catches the rest (for example packs copied in by hand).
    pub fn adopt_orphans(&self) -> Result<()> {
        self.adopt(pack::packs_on_disk(&self.packs_dir)?)
    }

    /// Indexes those of `names` that are in place but not in the index: a writer that died
    /// between renaming its packs and committing their rows. Their trailers say what they hold.
    /// A pack whose trailer cannot be read is left for `fsck` to report.
    fn adopt(&self, names: Vec<String>) -> Result<()> {
        let indexed = self.index.pack_names()?;
        let mut orphans = Vec::new();
        for name in names {
            if indexed.contains(&name) {
                continue;
            }
            let path = pack::pack_path(&self.packs_dir, &name);
            let file = match File::open(&path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(Error::Io {
                        op: "open pack",
                        path,
                        source,
                    })
                }
            };
            let (Ok(entries), Ok(meta)) = (pack::read_trailer(&file), file.metadata()) else {
                continue;
            };
            orphans.push(PublishedPack {
                name,
                size: meta.len(),
                entries,
            });
        }
        if !orphans.is_empty() {
            self.index.insert(&orphans, &[])?;
        }
        Ok(())
    }

    /// The store's SQLite connection, for the tables other crates keep in the same database.
    ///
    /// Sharing one connection means one schema parse and one WAL open per process, and lets a
    /// caller's transaction include the rows a writer commits (see [`Writer::commit`]): one
    /// fsync instead of two. The lock is reentrant on one thread; do not hold the guard while
    /// waiting for other threads that use the store (a capture's workers do).
    pub fn db(&self) -> Db<'_> {
        Db(self.index.conn())
    }

    /// Whether this thread holds the connection ([`Store::db`]): then every store call from
    /// another thread waits until it lets go, so work this thread waits for must not read the
    /// store on other threads.
    pub fn db_held_here(&self) -> bool {
        self.index.conn_held_here()
    }

    /// Asks for the WAL to be checkpointed and started over when the store closes unless it is
    /// nearly empty: for a process that just did slow work (a whole-tree capture), so that the
    /// quick ones after it (exact epochs) find a short WAL and rarely pay for the checkpoint.
    pub fn checkpoint_wal_on_close(&self) {
        self.index.checkpoint_wal_on_close();
    }

    /// How many garbage-collection sweeps have removed objects from the index, ever: while it
    /// stays the same, every object indexed before it was read is still indexed (a sweep
    /// counts itself in the transaction that removes the rows; nothing else removes any).
    pub fn sweeps(&self) -> Result<u64> {
        index::sweeps(&self.index.conn())
    }

    /// Lets this store's writers answer their deduplication lookups from `known`, the set a
    /// long-running process keeps for all its stores of this database (`rewind serve`'s
    /// services), loading it at the first lookup and adding what they commit. Once per store;
    /// a later call changes nothing. See `known.rs` for why a "yes" from it is always true.
    pub fn share_known_ids(&self, known: std::sync::Arc<KnownIds>) {
        let _ = self.known.set(known);
    }

    /// Starts a thread that checkpoints this store's database's WAL when asked
    /// ([`WalCheckpointer::nudge`]), for a process that keeps running; its stores of this
    /// database then leave their checkpoints to it ([`Store::leave_checkpoints_to`]).
    pub fn start_wal_checkpointer(&self) -> Result<WalCheckpointer> {
        WalCheckpointer::start(&self.index.path)
    }

    /// Turns this store's automatic WAL checkpoint off, leaving checkpoints to `checkpointer`,
    /// and the fold of the index's recent rows too (counting the rows it adds for it), if that
    /// checkpoints this store's database (else changes nothing). Its owner must nudge
    /// it after commits, or the WAL grows without bound.
    pub fn leave_checkpoints_to(&self, checkpointer: &WalCheckpointer) -> Result<()> {
        if checkpointer.db() == self.index.path {
            self.index
                .conn()
                .pragma_update(None, "wal_autocheckpoint", 0)?;
            let _ = self.index.recent_added.set(checkpointer.recent_added());
        }
        Ok(())
    }

    /// Bounds the page cache of this store's connection to `bytes` (SQLite's `cache_size`;
    /// [`PAGE_CACHE_BYTES`] when opened). A cache fills up to its bound with every page
    /// a connection writes and keeps them: for a process that holds many stores open at once
    /// (`rewind serve`, one per client), each of them a whole bound.
    pub fn limit_page_cache(&self, bytes: u64) -> Result<()> {
        let kib = i64::try_from(bytes / 1024).unwrap_or(i64::MAX);
        self.index.conn().pragma_update(None, "cache_size", -kib)?;
        Ok(())
    }

    /// The directory holding the pack files.
    pub fn packs_dir(&self) -> &Path {
        &self.packs_dir
    }

    /// Whether the object is in the index.
    pub fn has(&self, id: &ObjectId) -> Result<bool> {
        self.index.contains(id)
    }

    /// Starts a batch of writes. Nothing it writes is visible to other processes until
    /// [`Writer::commit`]; dropping it uncommitted discards its packs.
    pub fn writer(&self) -> Result<Writer<'_>> {
        Ok(Writer::new(self))
    }

    /// Reads one object, verified against its id.
    fn read_object(&self, id: &ObjectId) -> Result<(ObjectKind, Vec<u8>)> {
        let Some((pack_id, entry)) = self.index.lookup(id)? else {
            let (entry, stored) = self
                .index
                .lookup_inline(id)?
                .ok_or(Error::Missing { id: *id })?;
            return match pack::decode_object(&entry, stored) {
                Ok(raw) => Ok((entry.kind, raw)),
                Err(e) => Err(Error::Corrupt {
                    id: *id,
                    pack: INLINE.to_string(),
                    reason: e.reason(),
                }),
            };
        };
        let (pack, file) = self.open_packs.get(&self.packs_dir, pack_id, || {
            self.index.pack_name(pack_id)?.ok_or_else(|| {
                Error::Format(format!(
                    "index row for {id} names pack row {pack_id}, which is gone"
                ))
            })
        })?;
        match pack::read_object(&file, &entry) {
            Ok(raw) => Ok((entry.kind, raw)),
            Err(ReadError::Corrupt(reason)) => Err(Error::Corrupt {
                id: *id,
                pack: pack.to_string(),
                reason,
            }),
            Err(ReadError::Io(source)) => Err(Error::Io {
                op: "read pack",
                path: pack::pack_path(&self.packs_dir, &pack),
                source,
            }),
        }
    }

    fn read_kind(&self, id: &ObjectId, want: ObjectKind) -> Result<Vec<u8>> {
        let (kind, raw) = self.read_object(id)?;
        if kind != want {
            return Err(Error::Format(format!(
                "object {id} is a {kind:?}, not a {want:?}"
            )));
        }
        Ok(raw)
    }

    /// The bytes of a blob, verified against its id.
    pub fn read_blob(&self, id: &ObjectId) -> Result<Vec<u8>> {
        self.read_kind(id, ObjectKind::Blob)
    }

    /// A tree, verified: a fan-out's parts read, checked and put together (see
    /// `tree::fanout`).
    pub fn read_tree(&self, id: &ObjectId) -> Result<Tree> {
        let raw = self.read_kind(id, ObjectKind::Tree)?;
        let tree = if tree::is_fanout(&raw) {
            Tree::assemble(&raw, |part| self.read_kind(part, ObjectKind::Tree))
        } else {
            Tree::decode(&raw)
        };
        tree.map_err(|e| match e {
            Error::Format(why) => self.undecodable(id, why),
            e => e,
        })
    }

    /// The parts of a fan-out tree (see `tree::fanout`), each with its entry count, read and
    /// verified; none for a tree stored as one object. What a copy of a tree needs before
    /// [`Store::read_tree`] can read it, and what a capture that changed a few entries of a
    /// huge directory can reuse.
    pub fn tree_parts(&self, id: &ObjectId) -> Result<Vec<(usize, ObjectId)>> {
        let raw = self.read_kind(id, ObjectKind::Tree)?;
        let parts = tree::fanout_parts(&raw).map_err(|e| self.undecodable(id, e.to_string()))?;
        Ok(parts.unwrap_or_default())
    }

    /// An object that hashes right but does not decode: written by a buggy writer.
    fn undecodable(&self, id: &ObjectId, reason: String) -> Error {
        let pack = match self.index.lookup(id) {
            Ok(Some((pack_id, _))) => self.index.pack_name(pack_id).ok().flatten(),
            _ => None,
        };
        let pack = pack.unwrap_or_else(|| INLINE.to_string());
        Error::Corrupt {
            id: *id,
            pack,
            reason,
        }
    }

    /// Streams file content (a blob or a chunked file object) into `out`, verifying every chunk;
    /// memory use is bounded by one chunk. Returns the number of bytes written.
    pub fn read_content(&self, id: &ObjectId, out: &mut dyn Write) -> Result<u64> {
        let (kind, raw) = self.read_object(id)?;
        match kind {
            ObjectKind::Blob => {
                out.write_all(&raw).map_err(Error::Output)?;
                Ok(raw.len() as u64)
            }
            ObjectKind::File => {
                let file = FileObject::decode(&raw).map_err(|e| self.undecodable(id, e))?;
                drop(raw);
                for (len, chunk) in &file.chunks {
                    let data = self.read_kind(chunk, ObjectKind::Blob)?;
                    if data.len() != *len as usize {
                        return Err(self.undecodable(
                            id,
                            format!("chunk {chunk} is {} bytes, expected {len}", data.len()),
                        ));
                    }
                    out.write_all(&data).map_err(Error::Output)?;
                }
                Ok(file.size)
            }
            ObjectKind::Clone => match self.clone_content(id)? {
                Some(CloneContent::File(mut file, size)) => {
                    let copied = io::copy(&mut file, out).map_err(Error::Output)?;
                    if copied != size {
                        return Err(self.undecodable(
                            id,
                            format!("its clone file gave {copied} bytes, the record says {size}"),
                        ));
                    }
                    Ok(size)
                }
                Some(CloneContent::Packed(content)) => self.read_content(&content, out),
                None => unreachable!("read as a clone"),
            },
            ObjectKind::Tree => Err(Error::Format(format!(
                "object {id} is a tree, not file content"
            ))),
        }
    }

    /// The content of `id` as a file, and its length, when `id` is a clone whose file is here
    /// (`None` for any other object, or a clone known only by its packed twin). A clone's id is
    /// not a content hash: a caller that wants to know whether a file holds a clone's content
    /// compares bytes with this (or, for a packed twin, ids with [`Store::packed_id`]).
    pub fn open_clone(&self, id: &ObjectId) -> Result<Option<(File, u64)>> {
        Ok(match self.clone_content(id)? {
            Some(CloneContent::File(file, size)) => Some((file, size)),
            _ => None,
        })
    }

    /// The id content `id` would have if it had been packed: `id` itself, except for a clone:
    /// its packed twin's id when it has one, else its file read and hashed.
    pub fn packed_id(&self, id: &ObjectId) -> Result<ObjectId> {
        match self.clone_content(id) {
            Ok(Some(CloneContent::File(mut file, size))) => {
                if let Some(content) = self.clone_packed(id)? {
                    return Ok(content);
                }
                match content_id(&mut file)? {
                    (hashed, len) if len == size => Ok(hashed),
                    (_, len) => Err(self.undecodable(
                        id,
                        format!("its clone file gave {len} bytes, the record says {size}"),
                    )),
                }
            }
            Ok(Some(CloneContent::Packed(content))) => Ok(content),
            Ok(None) | Err(Error::Missing { .. }) => Ok(*id),
            Err(e) => Err(e),
        }
    }

    /// Checks that content `id` (of `size` bytes) can be read back whole: read and verified
    /// against its ids, or, for a clone, its file present with its record's length (its bytes
    /// have no hash to check, so reading them would prove nothing more) or its packed twin
    /// verified.
    pub fn verify_content(&self, id: &ObjectId, size: u64) -> Result<()> {
        if size >= CLONE_FROM {
            match self.clone_content(id)? {
                Some(CloneContent::File(..)) => return Ok(()),
                Some(CloneContent::Packed(twin)) => {
                    return self.read_content(&twin, &mut io::sink()).map(drop)
                }
                None => {}
            }
        }
        self.read_content(id, &mut io::sink()).map(drop)
    }

    /// Writes content `id` into the empty file `dst` by cloning, when `id` is a clone and the
    /// file system can share its blocks with `dst`: nothing is read or copied. `false`: not
    /// done, the caller streams it with [`Store::read_content`].
    pub fn clone_content_into(&self, id: &ObjectId, dst: &File) -> Result<bool> {
        let Some((src, size)) = self.open_clone(id)? else {
            return Ok(false);
        };
        let cloned = clone::reflink(&src, dst).map_err(Error::Output)?;
        if cloned {
            let len = dst.metadata().map_err(Error::Output)?.len();
            if len != size {
                return Err(
                    self.undecodable(id, format!("cloned {len} bytes, the record says {size}"))
                );
            }
        }
        Ok(cloned)
    }

    /// Packs the index names that are not on disk: every object in them is lost. Cheap (one
    /// `stat` per pack), so that writers can check before trusting the index's word that an
    /// object is stored.
    pub fn missing_packs(&self) -> Result<Vec<String>> {
        let mut gone: Vec<String> = self
            .index
            .pack_names()?
            .into_iter()
            .filter(|name| !pack::pack_path(&self.packs_dir, name).exists())
            .collect();
        gone.sort();
        Ok(gone)
    }

    /// Checks every pack and every object. Never modifies anything.
    pub fn fsck(&self) -> Result<FsckReport> {
        fsck::run(self)
    }

    /// Counts and sizes from the index (no pack is read), and of the clone files.
    pub fn stats(&self) -> Result<StoreStats> {
        let mut stats = self.index.stats()?;
        for id in clone::clones_on_disk(&self.packs_dir)? {
            if let Ok(f) = File::open(clone::clone_path(&self.packs_dir, &id)) {
                stats.clones += 1;
                stats.clone_bytes += f.metadata().map_or(0, |m| m.len());
                stats.clone_own_bytes += exclusive_bytes(&f);
            }
        }
        Ok(stats)
    }
}

/// The content id `put_content` would return for these bytes, without storing anything.
pub fn content_id(reader: &mut dyn Read) -> Result<(ObjectId, u64)> {
    chunk::split_content(reader, &mut chunk::HashOnly)
}
