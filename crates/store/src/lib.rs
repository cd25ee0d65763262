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
//! [`Writer`] commit in one SQLite transaction. A crash leaves at most orphan packs, which the
//! next [`Store::open`] adopts from their trailers or removes.

mod id;
mod tree;

pub use id::{ObjectId, ObjectKind};
pub use tree::{valid_name, EntryKind, Tree, TreeEntry};

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// Files larger than this are split into content-defined chunks.
pub const CHUNK_THRESHOLD: u64 = 1 << 20;

/// Everything that can go wrong in the store. Variants are what a caller can act on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The object is not in the index (never stored, or collected).
    #[error("object {id} is not in the store")]
    Missing { id: ObjectId },
    /// The object's bytes do not hash to its id, or cannot be decoded.
    #[error("object {id} in pack {pack} is corrupt: {reason}")]
    Corrupt {
        id: ObjectId,
        pack: String,
        reason: String,
    },
    /// The index points into a pack file that is not on disk.
    #[error("pack {pack} is missing from the store")]
    MissingPack { pack: String },
    /// A file-system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Reading the caller's stream failed while storing it.
    #[error("reading input: {0}")]
    Input(std::io::Error),
    /// The SQLite index failed.
    #[error("object index: {0}")]
    Db(#[from] rusqlite::Error),
    /// Malformed data (a tree, a file object, a pack trailer).
    #[error("{0}")]
    Format(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Tunables. The defaults are what the benchmarks in `docs/benchmarks.md` were run with.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub zstd_level: i32,
    /// A pack is closed and a new one started once it holds this many bytes.
    pub pack_target_size: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            zstd_level: 3,
            pack_target_size: 32 << 20,
        }
    }
}

/// Sizes, for `rewind status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub packs: u64,
    pub objects: u64,
    /// Bytes of pack files on disk.
    pub pack_bytes: u64,
    /// Bytes the objects hold uncompressed.
    pub raw_bytes: u64,
}

/// What one [`Writer::commit`] made durable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    pub new_objects: u64,
    pub new_raw_bytes: u64,
    pub new_pack_bytes: u64,
}

/// A problem `fsck` found, naming what is lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsckProblem {
    /// The object's stored bytes are damaged.
    Corrupt {
        id: ObjectId,
        kind: ObjectKind,
        pack: String,
        reason: String,
    },
    /// A pack the index refers to is gone; these objects are lost with it.
    MissingPack {
        pack: String,
        objects: Vec<ObjectId>,
    },
    /// A pack on disk that no index row refers to and whose trailer cannot be read.
    UnreadablePack { pack: String, reason: String },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub packs_checked: u64,
    pub objects_checked: u64,
    pub problems: Vec<FsckProblem>,
}

/// An open store. Cheap to share between threads (`&Store` is `Sync`); several processes may
/// open the same store at once.
pub struct Store {
    _private: (),
}

impl Store {
    /// Opens (creating if needed) the store whose packs live in `packs_dir` and whose index
    /// lives in the SQLite database `index_db` (which other crates share for their own tables).
    /// Cleans up temporary packs of dead writers and adopts orphan packs.
    pub fn open(packs_dir: &Path, index_db: &Path, config: StoreConfig) -> Result<Store> {
        let _ = (packs_dir, index_db, config);
        todo!()
    }

    /// Whether the object is in the index.
    pub fn has(&self, id: &ObjectId) -> Result<bool> {
        let _ = id;
        todo!()
    }

    /// Starts a batch of writes. Nothing it writes is visible to other processes until
    /// [`Writer::commit`]; dropping it uncommitted discards its packs.
    pub fn writer(&self) -> Result<Writer<'_>> {
        todo!()
    }

    /// The bytes of a blob, verified against its id.
    pub fn read_blob(&self, id: &ObjectId) -> Result<Vec<u8>> {
        let _ = id;
        todo!()
    }

    /// A tree, verified.
    pub fn read_tree(&self, id: &ObjectId) -> Result<Tree> {
        let _ = id;
        todo!()
    }

    /// Streams file content (a blob or a chunked file object) into `out`, verifying every chunk;
    /// memory use is bounded by one chunk. Returns the number of bytes written.
    pub fn read_content(&self, id: &ObjectId, out: &mut dyn Write) -> Result<u64> {
        let _ = (id, out);
        todo!()
    }

    /// Checks every pack and every object. Never modifies anything.
    pub fn fsck(&self) -> Result<FsckReport> {
        todo!()
    }

    pub fn stats(&self) -> Result<StoreStats> {
        todo!()
    }
}

/// A batch of writes into new packs. `&Writer` is `Sync`: many threads may put at once.
pub struct Writer<'s> {
    _store: &'s Store,
}

impl Writer<'_> {
    /// Stores one blob (deduplicated) and returns its id.
    pub fn put_blob(&self, data: &[u8]) -> Result<ObjectId> {
        let _ = data;
        todo!()
    }

    /// Stores file content read from `reader`, streaming: up to [`CHUNK_THRESHOLD`] bytes become
    /// one blob; more become FastCDC chunks (256K/1M/4M) plus a file object. Returns the
    /// content id and the number of bytes read. Same bytes, same id, whatever the reader.
    pub fn put_content(&self, reader: &mut dyn Read) -> Result<(ObjectId, u64)> {
        let _ = reader;
        todo!()
    }

    pub fn put_tree(&self, tree: &Tree) -> Result<ObjectId> {
        let _ = tree;
        todo!()
    }

    /// Makes everything written durable: packs fsynced and renamed into place, then the index
    /// rows in one transaction.
    pub fn commit(self) -> Result<CommitStats> {
        todo!()
    }
}

/// The content id `put_content` would return for these bytes, without storing anything.
pub fn content_id(reader: &mut dyn Read) -> Result<(ObjectId, u64)> {
    let _ = reader;
    todo!()
}
