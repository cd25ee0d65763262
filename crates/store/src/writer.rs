//! Writing objects: deduplicate, compress, append to a temp pack, and commit.
//!
//! A [`Writer`] is shared by the threads of a capture. Each put hashes and compresses on the
//! calling thread; only the append to the pack (a copy into a buffer, now and then a write)
//! happens under the writer's lock. When a pack reaches the target size it is handed to a
//! thread of its own to be sealed (trailer, fsync) and a new one is started: the putting
//! threads keep hashing and compressing while the disk flushes, and commit no longer fsyncs
//! the packs one after another (at 100k files on a journaled volume, commit went from
//! 0.45-0.96 s to 0.25 s with this and the parallel directory fsyncs). At most
//! [`SEALING_MAX`] seals run at once.
//!
//! Nothing a writer does is visible before [`Writer::commit`]: sealed packs stay under `tmp/`
//! (locked, so no other process removes them) until commit renames them into place, fsyncs the
//! directories and then inserts all index rows in one transaction. A dropped writer's temp packs
//! are removed; a killed writer's are removed by the next `Store::open`.
//!
//! A writer starts by keeping objects in memory and opens a pack only once they exceed
//! [`crate::StoreConfig::inline_limit`] stored bytes. A writer that never gets there (a guarded
//! write, an exact epoch, a capture that found a few edits) stores its objects as rows of the
//! index instead: one SQLite commit makes them durable, where a pack costs a file, a data
//! fsync, a rename and one or two directory fsyncs before that same commit.

use std::collections::HashSet;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::chunk::{self, ContentSink};
use crate::clone::{self, TempClone};
use crate::idset::IdSet;
use crate::index::{InlineObject, Inserted};
use crate::known::{Answer, KnownIds, Stamp};
use crate::pack::{self, Compression, PackWriter, SealedPack};
use crate::{compress, CommitStats, Error, ObjectId, ObjectKind, Result, Store, Tree};

/// A batch of writes into new packs. `&Writer` is `Sync`: many threads may put at once.
pub struct Writer<'s> {
    store: &'s Store,
    state: Mutex<State>,
    /// How many ids were looked up in the index, or announced ([`Writer::expect_lookups`]).
    /// See [`Writer::indexed`].
    lookups: AtomicU64,
    snapshot_after: OnceLock<u64>,
    /// All indexed ids, once loaded (`None` if loading failed: keep querying).
    snapshot: OnceLock<Option<IdSet>>,
    /// Whether the process's known ids (see `known.rs`) answer this writer's lookups: decided
    /// at its first lookup.
    known: OnceLock<bool>,
}

/// Seals in flight past which a putting thread waits for the oldest (bounds memory and threads
/// when the disk is slower than hashing).
const SEALING_MAX: usize = 2;

/// Lookups a writer always sends to SQLite before it considers loading all ids: a warm
/// capture that stores a handful of objects must not scan the index.
const QUERIES_BEFORE_SNAPSHOT: u64 = 1024;

#[derive(Default)]
struct State {
    /// Objects not yet in a pack: all of them, until they exceed the inline limit.
    pending: Vec<InlineObject>,
    pending_bytes: usize,
    /// Whether this writer has started writing packs (then `pending` stays empty).
    packing: bool,
    open: Option<PackWriter>,
    sealed: Vec<SealedPack>,
    /// Packs being sealed by their own threads, oldest first.
    sealing: Vec<std::thread::JoinHandle<Result<SealedPack>>>,
    /// Clones made by this writer, under `tmp/` until commit renames them into place.
    clones: Vec<TempClone>,
    /// Ids appended by this writer, so a second put of the same bytes writes nothing.
    written: HashSet<ObjectId>,
    stats: CommitStats,
    /// The first write error. A failed append may leave a torn pack, so the writer refuses all
    /// further work; the caller must drop it and start over.
    failed: Option<(&'static str, PathBuf, io::ErrorKind, String)>,
}

impl Drop for State {
    /// A writer dropped without committing waits for its seals, so that their temp packs are
    /// gone when the drop returns (each removes itself when dropped).
    fn drop(&mut self) {
        for h in self.sealing.drain(..) {
            let _ = h.join();
        }
    }
}

impl State {
    fn check(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some((op, path, kind, msg)) => Err(Error::Io {
                op,
                path: path.clone(),
                source: io::Error::new(*kind, format!("writer failed earlier: {msg}")),
            }),
        }
    }

    /// Records `e` as the writer's failure and hands it back.
    fn fail(&mut self, e: Error) -> Error {
        if self.failed.is_none() {
            let (op, path, kind) = match &e {
                Error::Io { op, path, source } => (*op, path.clone(), source.kind()),
                _ => ("write", PathBuf::new(), io::ErrorKind::Other),
            };
            self.failed = Some((op, path, kind, e.to_string()));
        }
        e
    }
}

impl<'s> Writer<'s> {
    pub(crate) fn new(store: &'s Store) -> Writer<'s> {
        Writer {
            store,
            state: Mutex::new(State::default()),
            lookups: AtomicU64::new(0),
            snapshot_after: OnceLock::new(),
            snapshot: OnceLock::new(),
            known: OnceLock::new(),
        }
    }

    fn state(&self) -> Result<MutexGuard<'_, State>> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        st.check()?;
        Ok(st)
    }

    /// Stores one blob (deduplicated) and returns its id.
    pub fn put_blob(&self, data: &[u8]) -> Result<ObjectId> {
        self.put(ObjectKind::Blob, data)
    }

    /// Stores file content read from `reader`, streaming: up to [`crate::CHUNK_THRESHOLD`]
    /// bytes become one blob; more become FastCDC chunks (256K/1M/4M) plus a file object.
    /// Returns the content id and the number of bytes read. Same bytes, same id, whatever the
    /// reader.
    pub fn put_content(&self, reader: &mut dyn Read) -> Result<(ObjectId, u64)> {
        chunk::split_content(reader, &mut WriterSink(self))
    }

    /// Stores the content of `file`, an open regular file of `len` bytes (by its `stat`):
    /// cloned when it is at least [`crate::StoreConfig::clone_from`] bytes and the file system
    /// can ([`Writer::clone_file`]), else as [`Writer::put_content`] reads it. Returns the
    /// content id, the number of bytes stored, and whether they were cloned (nothing read).
    pub fn put_file(&self, file: &mut std::fs::File, len: u64) -> Result<(ObjectId, u64, bool)> {
        if len >= self.store.config.clone_from {
            if let Some((id, size)) = self.clone_file(file)? {
                return Ok((id, size, true));
            }
        }
        let (id, size) = self.put_content(file)?;
        Ok((id, size, false))
    }

    /// Clones `file` into the store (`FICLONE`: its blocks shared, nothing read or copied)
    /// and returns the id of its `clone` object and its length; `None` when the file system
    /// cannot (remembered for the store's lifetime), the file holds fewer than
    /// [`crate::CLONE_FROM`] bytes, or the store never clones (`clone_from` is `u64::MAX`). The content is what the file held
    /// at the instant of the clone, whatever is written to it after.
    pub fn clone_file(&self, file: &std::fs::File) -> Result<Option<(ObjectId, u64)>> {
        use std::sync::atomic::Ordering::Relaxed;
        if self.store.config.clone_from == u64::MAX || self.store.clones_refused.load(Relaxed) {
            return Ok(None);
        }
        drop(self.state()?); // a failed writer clones nothing
        let made = match clone::make(&self.store.packs_dir, file)? {
            Ok(made) => made,
            Err(refused) => {
                if refused {
                    self.store.clones_refused.store(true, Relaxed);
                }
                return Ok(None);
            }
        };
        let (id, size) = (made.id, made.size);
        self.put(ObjectKind::Clone, &made.record)?;
        self.state()?.clones.push(made);
        Ok(Some((id, size)))
    }

    /// Stores a tree (deduplicated) and returns its id: one object, or for a directory of
    /// more than [`crate::FANOUT_AT`] entries its parts and a fan-out object (see
    /// `tree::fanout`), of which only the parts not stored yet are written.
    pub fn put_tree(&self, tree: &Tree) -> Result<ObjectId> {
        crate::tree::store_listing(tree, |raw| self.put(ObjectKind::Tree, raw))
    }

    /// Stores a directory given entry by entry (see [`crate::Listing`]) and returns its tree
    /// id, the same id [`Writer::put_tree`] gives the same entries. For a huge directory the
    /// parts the listing says are stored are neither built nor encoded: a capture that
    /// changed one entry of 100,000 encodes one part.
    pub fn put_listing(&self, listing: &dyn crate::Listing) -> Result<ObjectId> {
        crate::tree::store_listing(listing, |raw| self.put(ObjectKind::Tree, raw))
    }

    fn put(&self, kind: ObjectKind, data: &[u8]) -> Result<ObjectId> {
        let id = ObjectId::compute(kind, data);
        if self.has(&id)? {
            return Ok(id);
        }
        let raw_len = raw_len(data)?;
        let compressed = compress::compress(data, self.store.config.zstd_level);
        let (compression, stored) = match &compressed {
            Some(c) => (Compression::Zstd, c.as_slice()),
            None => (Compression::Raw, data),
        };
        self.append(id, kind, compression, raw_len, stored)?;
        Ok(id)
    }

    /// Stores content hashed and compressed ahead of this writer (see [`Prepared`]), as
    /// [`Writer::put_content`] would have stored the same bytes, and returns its id.
    pub fn put_prepared(&self, p: &Prepared) -> Result<ObjectId> {
        if !self.has(&p.id)? {
            self.append(p.id, ObjectKind::Blob, p.compression, p.raw_len, &p.stored)?;
        }
        Ok(p.id)
    }

    /// Whether `id` is written by this writer or already indexed: nothing to store.
    fn has(&self, id: &ObjectId) -> Result<bool> {
        // The state's lock is let go before the index lookup: a guard taken in the first
        // operand of `||` would live through the second, holding every other putting thread
        // (and the pack appends) behind this one's SQLite query.
        let written = self.state()?.written.contains(id);
        Ok(written || self.indexed(id)?)
    }

    /// Appends one object not stored yet, kept in memory while the writer is under its inline
    /// limit, else in the open pack, which is handed to a thread to be sealed once full.
    fn append(
        &self,
        id: ObjectId,
        kind: ObjectKind,
        compression: Compression,
        raw_len: u32,
        stored: &[u8],
    ) -> Result<()> {
        let full = {
            let mut guard = self.state()?;
            let st = &mut *guard;
            if st.written.contains(&id) {
                return Ok(()); // another thread stored it meanwhile
            }
            st.written.insert(id);
            st.stats.new_objects += 1;
            st.stats.new_raw_bytes += u64::from(raw_len);
            if !st.packing && st.pending_bytes + stored.len() <= self.store.config.inline_limit {
                st.pending_bytes += stored.len();
                st.pending.push(InlineObject {
                    id,
                    kind,
                    compression,
                    raw_len,
                    stored: stored.to_vec(),
                });
                return Ok(());
            }
            let mut pack = match st.open.take() {
                Some(p) => p,
                None => {
                    let mut p =
                        PackWriter::create(&self.store.packs_dir).map_err(|e| st.fail(e))?;
                    st.packing = true;
                    st.pending_bytes = 0;
                    for o in std::mem::take(&mut st.pending) {
                        p.append(o.id, o.kind, o.compression, o.raw_len, &o.stored)
                            .map_err(|e| st.fail(e))?;
                    }
                    p
                }
            };
            // On error the pack is dropped, which removes it.
            pack.append(id, kind, compression, raw_len, stored)
                .map_err(|e| st.fail(e))?;
            if pack.len() >= self.store.config.pack_target_size {
                Some(pack)
            } else {
                st.open = Some(pack);
                None
            }
        };
        if let Some(p) = full {
            // The pack goes to the thread through a slot, so that if no thread can be started
            // (a process or memory limit) it is still here to be sealed on this one.
            let slot = std::sync::Arc::new(Mutex::new(Some(p)));
            let theirs = std::sync::Arc::clone(&slot);
            let spawned = std::thread::Builder::new()
                .name("rewind-seal".into())
                .spawn(move || {
                    let p = theirs.lock().unwrap_or_else(|p| p.into_inner()).take();
                    p.expect("the pack to seal").seal()?.synced()
                });
            let oldest = match spawned {
                Ok(h) => {
                    let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                    st.sealing.push(h);
                    (st.sealing.len() > SEALING_MAX).then(|| st.sealing.remove(0))
                }
                Err(_) => {
                    let p = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                    let p = p.expect("not taken: the thread never ran");
                    self.file_sealed(p.seal().and_then(SealedPack::synced))?;
                    None
                }
            };
            if let Some(h) = oldest {
                self.finish_seal(h)?;
            }
        }
        Ok(())
    }

    /// Waits for one sealing thread and files its pack (or its error).
    fn finish_seal(&self, h: std::thread::JoinHandle<Result<SealedPack>>) -> Result<()> {
        self.file_sealed(
            h.join()
                .unwrap_or_else(|_| Err(Error::Format("a pack-sealing thread panicked".into()))),
        )
    }

    /// Keeps a sealed pack for commit, or records the writer's failure.
    fn file_sealed(&self, sealed: Result<SealedPack>) -> Result<()> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match sealed {
            Ok(s) => {
                st.sealed.push(s);
                Ok(())
            }
            Err(e) => Err(st.fail(e)),
        }
    }

    /// The store this writer writes to.
    pub fn store(&self) -> &'s Store {
        self.store
    }

    /// Whether `id` is stored (committed by anyone), answered as this writer's dedup answers
    /// it (see [`Writer::indexed`]). For a caller that has an id it did not just put: content
    /// hashed ahead by another writer (a capture's background baseline), to be referred to
    /// only if it is still there.
    pub fn stored(&self, id: &ObjectId) -> Result<bool> {
        self.indexed(id)
    }

    /// Says about `n` lookups of ids ([`Writer::stored`]) are coming, as when a capture takes
    /// the ids a background baseline hashed. When that many would make the writer load its
    /// snapshot of the index anyway (see [`Writer::indexed`]), it loads it at the first of
    /// them instead of after an eighth of the index one query at a time (at 300k files, 37k
    /// queries on one connection: half of such a capture's time).
    pub fn expect_lookups(&self, n: u64) {
        self.lookups.fetch_add(n, Ordering::Relaxed);
    }

    /// Whether `id` is in the index.
    ///
    /// A SQLite point query costs a few microseconds plus contention on the connection; on a
    /// cold capture of 100k files that was the largest cost after hashing and writing, and on
    /// a capture that re-hashes everything (all hits) it was most of the time. So once a writer
    /// has made many lookups (more than 1024, and more than an eighth of the index, so that
    /// loading pays for itself) it loads all indexed ids once and answers from memory.
    ///
    /// The snapshot can be stale in two directions. An object indexed later by another
    /// process is missed: it is stored again, a duplicate, never a loss. An object removed
    /// later would still be found: so garbage collection must not remove objects while
    /// writers run, which it must not do anyway, since a per-object query has the same race
    /// between the query and the commit.
    fn indexed(&self, id: &ObjectId) -> Result<bool> {
        if let Some(known) = self.known() {
            return match known.answer(id) {
                Answer::Indexed => Ok(true),
                Answer::Unknown => Ok(false),
                Answer::Ask => {
                    // One hold of the connection for the query and the transaction check.
                    let _held = self.store.db();
                    let found = self.store.index.contains(id)?;
                    // Not from inside a transaction: it may see rows that roll back.
                    if found && !self.store.index.in_transaction() {
                        known.confirm(id);
                    }
                    Ok(found)
                }
            };
        }
        let n = self.lookups.fetch_add(1, Ordering::Relaxed);
        if n >= QUERIES_BEFORE_SNAPSHOT {
            let after = *self.snapshot_after.get_or_init(|| {
                let size = self.store.index.approx_objects().unwrap_or(u64::MAX / 8);
                QUERIES_BEFORE_SNAPSHOT.max(size / 8)
            });
            if n >= after {
                let snapshot = self
                    .snapshot
                    .get_or_init(|| self.store.index.all_ids().ok().and_then(IdSet::new));
                if let Some(ids) = snapshot {
                    return Ok(ids.contains(id));
                }
            }
        }
        self.store.index.contains(id)
    }

    /// The process's known ids, if the store shares them and they are current: checked
    /// against the database's instance and sweep count, or loaded from the index, at the
    /// first lookup (about 30 ms at 100k objects, once per process and per sweep). Never
    /// loaded from inside a transaction, whose rows may still roll back; where they cannot be
    /// used, lookups ask the index.
    fn known(&self) -> Option<&KnownIds> {
        let known = self.store.known.get()?;
        let usable = *self.known.get_or_init(|| {
            // Held from the transaction check to the last read, so that no other thread's
            // transaction can begin in between (the connection is reentrant on this one).
            let _held = self.store.db();
            if self.store.index.in_transaction() {
                return false;
            }
            let stamp = match (self.store.index.instance(), self.store.sweeps()) {
                (Ok(instance), Ok(sweeps)) => Stamp { instance, sweeps },
                _ => return false,
            };
            if !known.current(&stamp) {
                // The count first: every id read after it was indexed then.
                let Ok(ids) = self.store.index.all_ids() else {
                    return false;
                };
                known.load(stamp.clone(), ids);
            }
            known.current(&stamp)
        });
        usable.then_some(&**known)
    }

    /// Makes everything written durable: packs fsynced and renamed into place, then the index
    /// rows (and the inline objects, if the writer never needed a pack) in one transaction.
    ///
    /// Called while the connection is inside a transaction of the caller's, the rows join that
    /// transaction: the packs are durable now, the rows when the caller commits.
    ///
    /// If this fails after some packs were renamed into place, those packs are orphans: the
    /// next [`Store::open`] indexes them. Either way nothing committed earlier is affected.
    pub fn commit(self) -> Result<CommitStats> {
        let sealing = std::mem::take(&mut self.state()?.sealing);
        for h in sealing {
            self.finish_seal(h)?;
        }
        let mut st = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        st.check()?;
        // Nothing is put any more: free the dedup sets before the index rows are built (at a
        // first capture of 300k files they are 20-30 MB of its peak memory).
        st.written = HashSet::new();
        drop(self.snapshot);
        if let Some(p) = st.open.take() {
            if !p.is_empty() {
                st.sealed.push(p.seal()?);
            }
        }
        let packs_dir = &self.store.packs_dir;
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut created_dir = false;
        // Clones first: in place (and their directories synced below) before any row names
        // them. One that is in place when the commit fails is an orphan the next sweep removes.
        for c in std::mem::take(&mut st.clones) {
            let (dir, created) = c.publish(packs_dir)?;
            if created {
                for d in [dir.parent().expect("clones/ holds it"), packs_dir] {
                    if !dirs.iter().any(|x| x == d) {
                        dirs.push(d.to_owned());
                    }
                }
            }
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        let mut published = Vec::with_capacity(st.sealed.len());
        // Markers say "being published" (held under a kernel lock): if this process dies between
        // the rename and the index commit, the next open adopts exactly these packs, without
        // listing every pack directory.
        let mut markers = Vec::with_capacity(st.sealed.len());
        for s in &st.sealed {
            markers.push(pack::PublishMarker::create(packs_dir, s.name())?);
        }
        for s in std::mem::take(&mut st.sealed) {
            let (dir, created, p) = s.publish(packs_dir)?;
            created_dir |= created;
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
            published.push(p);
        }
        // At once: on a journaled file system each directory fsync is a journal commit, and
        // concurrent ones share commits (a first capture's 15 pack directories took 0.2 s one
        // after another on a journaled volume).
        if created_dir {
            dirs.push(packs_dir.clone());
        }
        // A directory whose thread cannot be started is synced on this one.
        std::thread::scope(|s| {
            let syncs: Vec<_> = dirs
                .iter()
                .map(|d| {
                    (
                        d,
                        std::thread::Builder::new().spawn_scoped(s, || pack::sync_dir(d)),
                    )
                })
                .collect();
            syncs.into_iter().try_for_each(|(d, h)| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(Error::Format("a directory fsync panicked".into()))),
                Err(_) => pack::sync_dir(d),
            })
        })?;
        #[cfg(test)]
        crate::crash_tests::after_rename_hook();
        if !published.is_empty() || !st.pending.is_empty() {
            let inserted = self.store.index.insert(&published, &st.pending)?;
            if let Some(known) = self.store.known.get() {
                let ids = published
                    .iter()
                    .flat_map(|p| p.entries.iter().map(|e| e.id));
                let ids = ids.chain(st.pending.iter().map(|o| o.id));
                known.add(ids, inserted == Inserted::Committed);
            }
        }
        for m in markers {
            m.remove();
        }
        st.stats.new_pack_bytes = published.iter().map(|p| p.size).sum();
        Ok(std::mem::take(&mut st.stats))
    }
}

/// File content hashed and compressed before any writer exists, to be stored later by
/// [`Writer::put_prepared`]: what a server does on its idle core while an agent's command
/// runs, so that the capture after the command only appends it. Only content that is one
/// blob ([`crate::CHUNK_THRESHOLD`] bytes at most): its id is then the content's id, the one
/// [`Writer::put_content`] gives the same bytes.
pub struct Prepared {
    id: ObjectId,
    compression: Compression,
    raw_len: u32,
    stored: Vec<u8>,
}

impl Prepared {
    /// Hashes and compresses `content` (at zstd `level`, the store's `zstd_level`); `None`
    /// when it is too large to be one blob.
    pub fn content(content: &[u8], level: i32) -> Option<Prepared> {
        if content.len() as u64 > crate::CHUNK_THRESHOLD {
            return None;
        }
        let raw_len = raw_len(content).ok()?;
        let id = ObjectId::compute(ObjectKind::Blob, content);
        let (compression, stored) = match compress::compress(content, level) {
            Some(c) => (Compression::Zstd, c),
            None => (Compression::Raw, content.to_vec()),
        };
        Some(Prepared {
            id,
            compression,
            raw_len,
            stored,
        })
    }

    /// The content's id.
    pub fn id(&self) -> ObjectId {
        self.id
    }

    /// The bytes it will take in a pack (compressed, or raw when that is smaller).
    pub fn stored_len(&self) -> usize {
        self.stored.len()
    }
}

/// An object's length as its record holds it.
fn raw_len(data: &[u8]) -> Result<u32> {
    u32::try_from(data.len())
        .map_err(|_| Error::Format(format!("object of {} bytes is too large", data.len())))
}

struct WriterSink<'a, 's>(&'a Writer<'s>);

impl ContentSink for WriterSink<'_, '_> {
    fn put(&mut self, kind: ObjectKind, data: &[u8]) -> Result<ObjectId> {
        self.0.put(kind, data)
    }
}
