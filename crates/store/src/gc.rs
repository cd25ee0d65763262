//! Garbage collection of the store: sweep what the caller did not mark live, and repack.
//!
//! The store does not know what is live (the op log does); the caller marks it and hands over
//! the set. What the store does with it, in the order that keeps a crash harmless
//! (`docs/format.md`, "Garbage collection"):
//!
//! 1. [`Store::plan_sweep`]: which objects are dead, which packs are deleted whole, which are
//!    rewritten (mostly dead, or any dead byte when the caller asks for it) and which live
//!    inline objects move into a pack. Reads the index only; a dry run stops here.
//! 2. [`Store::repack`]: the live objects of rewritten packs and the inline objects that move
//!    are copied (stored bytes as they are, each verified against its id) into new packs, made
//!    durable and renamed into place under publish markers, as a [`crate::Writer`] does. Not
//!    indexed yet: a crash here leaves packs whose objects the index points elsewhere, which
//!    the next sweep deletes as wholly dead.
//! 3. [`Store::commit_sweep`]: one transaction (the caller's, if one is open) deletes the rows
//!    of dead objects, points moved objects at their new packs and drops the rows of deleted
//!    packs.
//! 4. [`Store::finish_sweep`]: the files of the packs no row names any more are removed.
//!
//! No writer may commit while this runs: a writer that found an object in the index (dedup)
//! would reference it after the sweep removed it. The caller holds the lock every writer takes.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io;

use rusqlite::params;

use crate::chunk::FileObject;
use crate::pack::{self, Entry, PackWriter, PublishMarker, PublishedPack, OBJECT_HEADER_LEN};
use crate::{Error, ObjectId, ObjectKind, Result, Store};

/// A pack whose live bytes are less than this share of its size is rewritten.
const REWRITE_BELOW_LIVE: f64 = 0.5;

/// Live inline objects move into a pack once they come to this many stored bytes.
const INLINE_TO_PACK_AT: u64 = 64 << 10;

/// What keeping one object costs on disk, in bytes: its stored bytes and, in a pack, its
/// header and trailer entry.
pub fn object_cost(stored_len: u64, packed: bool) -> u64 {
    if packed {
        stored_len + OBJECT_HEADER_LEN as u64 + 50
    } else {
        stored_len
    }
}

/// Where an indexed object is and what it costs (see [`Store::object_costs`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectCost {
    /// Its kind.
    pub kind: ObjectKind,
    /// Bytes it takes on disk ([`object_cost`]).
    pub bytes: u64,
}

/// What a sweep removes and rewrites; made by [`Store::plan_sweep`].
pub struct SweepPlan {
    /// Dead objects kept in packs.
    dead_packed: Vec<ObjectId>,
    /// Of those, the ones in packs that stay (neither rewritten nor deleted): their index rows
    /// go one by one; the others' go with their packs' rows.
    dead_kept: Vec<ObjectId>,
    /// Dead objects kept inline in the index.
    dead_inline: Vec<ObjectId>,
    /// Packs (row id, name) whose live objects are rewritten, then deleted.
    rewrite: Vec<(i64, String)>,
    /// Packs (row id, name) with nothing live: deleted.
    delete: Vec<(i64, String)>,
    /// Live inline objects that move into a pack.
    inline_moves: Vec<ObjectId>,
    /// New packs written by [`Store::repack`], in place, with their markers.
    written: Vec<(PublishedPack, PublishMarker)>,
    /// The counts, for the report.
    pub stats: SweepStats,
}

/// What a sweep did (or, planned, would do).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Objects removed from the store.
    pub objects_removed: u64,
    /// Bytes freed: pack files deleted minus packs written, and inline bytes removed.
    pub bytes_freed: u64,
    /// Pack files deleted.
    pub packs_deleted: u64,
    /// Pack files written by the repack.
    pub packs_written: u64,
    /// Live objects copied into new packs (from rewritten packs and from the index).
    pub objects_moved: u64,
    /// Clone files removed (their blocks are freed only where nothing else shares them, so
    /// they are not in `bytes_freed`).
    pub clones_removed: u64,
}

impl SweepPlan {
    /// A plan that only moves the inline objects `ids` into a pack (no object dies, no pack
    /// goes): [`Store::seal_inline`].
    pub(crate) fn inline_only(ids: Vec<ObjectId>) -> SweepPlan {
        SweepPlan {
            dead_packed: Vec::new(),
            dead_kept: Vec::new(),
            dead_inline: Vec::new(),
            rewrite: Vec::new(),
            delete: Vec::new(),
            inline_moves: ids,
            written: Vec::new(),
            stats: SweepStats::default(),
        }
    }

    /// How many inline objects the repack moved (after [`Store::repack`]).
    pub(crate) fn inline_moved(&self) -> u64 {
        self.inline_moves.len() as u64
    }

    /// Whether the sweep would change nothing.
    pub fn is_empty(&self) -> bool {
        self.dead_packed.is_empty()
            && self.dead_inline.is_empty()
            && self.rewrite.is_empty()
            && self.delete.is_empty()
            && self.inline_moves.is_empty()
    }
}

impl Store {
    /// Every indexed object with its kind and cost, packed and inline. One pass over the
    /// index.
    pub fn object_costs(&self) -> Result<HashMap<ObjectId, ObjectCost>> {
        let conn = self.index.conn();
        let mut out = HashMap::new();
        for (sql, packed) in [
            ("SELECT id, kind, stored_len FROM store_objects_all", true),
            ("SELECT id, kind, length(data) FROM store_inline", false),
        ] {
            let mut st = conn.prepare(sql)?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let id: Vec<u8> = r.get(0)?;
                let Ok(id) = <[u8; 32]>::try_from(id) else {
                    continue;
                };
                let Some(kind) = ObjectKind::from_u8(r.get(1)?) else {
                    continue;
                };
                let bytes = object_cost(r.get::<_, i64>(2)? as u64, packed);
                out.insert(ObjectId(id), ObjectCost { kind, bytes });
            }
        }
        Ok(out)
    }

    /// The chunks of a chunked file's `file` object, read and verified.
    pub fn file_chunks(&self, id: &ObjectId) -> Result<Vec<ObjectId>> {
        let raw = self.read_kind(id, ObjectKind::File)?;
        let file = FileObject::decode(&raw).map_err(|e| self.undecodable(id, e))?;
        Ok(file.chunks.into_iter().map(|(_, c)| c).collect())
    }

    /// What a tree object's entries refer to (the ids of every entry but uncovered ones), read
    /// and verified: the mark's view of a tree, without building its entries.
    pub fn tree_refs(&self, id: &ObjectId) -> Result<Vec<ObjectId>> {
        let raw = self.read_kind(id, ObjectKind::Tree)?;
        crate::tree::decode_refs(&raw).map_err(|e| self.undecodable(id, e.to_string()))
    }

    /// Pack files in place that no index row names and no live writer is publishing: left by
    /// a sweep killed after its index commit (or a repack before it). Removes them and returns
    /// their names. Only while no writer commits (see the module doc).
    pub fn remove_unindexed_packs(&self) -> Result<Vec<String>> {
        // Dead writers' publications first: their packs are indexed, not removed.
        let dead = pack::dead_publications(&self.packs_dir)?;
        if !dead.is_empty() {
            self.adopt(dead.iter().map(|(name, _)| name.clone()).collect())?;
            for (_, marker) in &dead {
                pack::remove_marker(marker);
            }
        }
        let indexed = self.index.pack_names()?;
        let mut removed = Vec::new();
        let tmp = self.packs_dir.join(pack::TMP_DIR);
        for name in pack::packs_on_disk(&self.packs_dir)? {
            // A live writer between its rename and its index commit: not ours to remove.
            let publishing = tmp.join(format!("{name}.{}", pack::PUBLISHING));
            if indexed.contains(&name) || publishing.exists() {
                continue;
            }
            let path = pack::pack_path(&self.packs_dir, &name);
            match fs::remove_file(&path) {
                Ok(()) => removed.push(name),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(Error::Io {
                        op: "remove unindexed pack",
                        path,
                        source,
                    })
                }
            }
        }
        if !removed.is_empty() {
            self.sync_pack_dirs(&removed)?;
        }
        pack::remove_dead_temp_packs(&self.packs_dir)?;
        self.remove_unindexed_clones()?;
        Ok(removed)
    }

    /// Removes the clone files no index row names: those of clone objects a sweep removed,
    /// and those a writer renamed into place but died before indexing. Returns how many. Only
    /// while no writer commits (see the module doc).
    pub fn remove_unindexed_clones(&self) -> Result<u64> {
        let mut removed = 0;
        for id in crate::clone::clones_on_disk(&self.packs_dir)? {
            if !self.index.contains(&id)? {
                crate::clone::remove(&self.packs_dir, &id)?;
                removed += 1;
            }
        }
        self.forget_unindexed_clone_pairs()?;
        Ok(removed)
    }

    /// Decides what a sweep that keeps exactly `live` does. `rewrite_any_dead`: rewrite every
    /// pack holding a dead byte (to reach a size budget), not only mostly dead ones. Reads the
    /// index only.
    pub fn plan_sweep(
        &self,
        live: &HashSet<ObjectId>,
        rewrite_any_dead: bool,
    ) -> Result<SweepPlan> {
        let by_pack = self.index.objects_by_pack()?;
        let mut plan = SweepPlan {
            dead_packed: Vec::new(),
            dead_kept: Vec::new(),
            dead_inline: Vec::new(),
            rewrite: Vec::new(),
            delete: Vec::new(),
            inline_moves: Vec::new(),
            written: Vec::new(),
            stats: SweepStats::default(),
        };
        let sizes: HashMap<i64, u64> = {
            let conn = self.index.conn();
            let mut st = conn.prepare("SELECT id, size FROM store_packs")?;
            let rows = st.query_map([], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)? as u64))
            })?;
            rows.collect::<Result<_, _>>()?
        };
        let mut moved_bytes = 0u64;
        let packed: HashSet<ObjectId> = by_pack.values().flatten().map(|e| e.id).collect();
        for row in self.index.packs()? {
            let entries = by_pack.get(&row.id).map(Vec::as_slice).unwrap_or(&[]);
            let size = sizes.get(&row.id).copied().unwrap_or(0);
            let (live_e, dead_e): (Vec<&Entry>, Vec<&Entry>) =
                entries.iter().partition(|e| live.contains(&e.id));
            plan.dead_packed.extend(dead_e.iter().map(|e| e.id));
            plan.stats.objects_removed += dead_e.len() as u64;
            if live_e.is_empty() {
                plan.delete.push((row.id, row.name));
                plan.stats.packs_deleted += 1;
                plan.stats.bytes_freed += size;
                continue;
            }
            if dead_e.is_empty() {
                continue;
            }
            let live_bytes: u64 = live_e
                .iter()
                .map(|e| object_cost(u64::from(e.stored_len), true))
                .sum();
            if rewrite_any_dead || (live_bytes as f64) < (size as f64) * REWRITE_BELOW_LIVE {
                plan.rewrite.push((row.id, row.name));
                plan.stats.packs_deleted += 1;
                plan.stats.objects_moved += live_e.len() as u64;
                plan.stats.bytes_freed += size;
                moved_bytes += live_bytes;
            } else {
                plan.dead_kept.extend(dead_e.iter().map(|e| e.id));
            }
        }
        let mut inline_live_bytes = 0u64;
        let mut inline_live = Vec::new();
        {
            let conn = self.index.conn();
            let mut st = conn.prepare("SELECT id, length(data) FROM store_inline")?;
            let mut rows = st.query([])?;
            while let Some(r) = rows.next()? {
                let id: Vec<u8> = r.get(0)?;
                let Ok(id) = <[u8; 32]>::try_from(id) else {
                    continue;
                };
                let id = ObjectId(id);
                let len = r.get::<_, i64>(1)? as u64;
                if packed.contains(&id) {
                    // Also in a pack (adopted from a repack that died before its commit): the
                    // inline copy is redundant.
                    plan.dead_inline.push(id);
                    plan.stats.bytes_freed += len;
                } else if live.contains(&id) {
                    inline_live_bytes += len;
                    inline_live.push((id, len));
                } else {
                    plan.dead_inline.push(id);
                    plan.stats.objects_removed += 1;
                    plan.stats.bytes_freed += len;
                }
            }
        }
        if inline_live_bytes >= INLINE_TO_PACK_AT
            || (!plan.rewrite.is_empty() && !inline_live.is_empty())
        {
            for (id, len) in inline_live {
                plan.inline_moves.push(id);
                plan.stats.objects_moved += 1;
                plan.stats.bytes_freed += len;
                moved_bytes += object_cost(len, true);
            }
        }
        if moved_bytes > 0 {
            // The new packs: their objects, a header and a footer each.
            let packs = moved_bytes.div_ceil(self.config.pack_target_size).max(1);
            plan.stats.packs_written = packs;
            plan.stats.bytes_freed = plan
                .stats
                .bytes_freed
                .saturating_sub(moved_bytes + packs * (pack::HEADER_LEN + 48));
        }
        Ok(plan)
    }

    /// Copies the live objects of the packs being rewritten, and the inline objects that move,
    /// into new packs: durable and in place (under publish markers) when this returns, not
    /// indexed. An object that does not verify is left where it is (its pack is then not
    /// rewritten).
    pub fn repack(&self, plan: &mut SweepPlan) -> Result<()> {
        let by_pack = if plan.rewrite.is_empty() {
            HashMap::new()
        } else {
            self.index.objects_by_pack()?
        };
        let live: HashSet<ObjectId> = {
            let dead: HashSet<&ObjectId> = plan.dead_packed.iter().collect();
            by_pack
                .values()
                .flatten()
                .map(|e| e.id)
                .filter(|id| !dead.contains(id))
                .collect()
        };
        let mut out: Option<PackWriter> = None;
        let mut sealed = Vec::new();
        let mut keep_rewrite = Vec::new();
        for (pack_id, name) in std::mem::take(&mut plan.rewrite) {
            let path = pack::pack_path(&self.packs_dir, &name);
            let file = File::open(&path).map_err(|source| Error::Io {
                op: "open pack",
                path: path.clone(),
                source,
            })?;
            let entries = by_pack.get(&pack_id).map(Vec::as_slice).unwrap_or(&[]);
            let mut copies = Vec::new();
            let mut ok = true;
            for e in entries.iter().filter(|e| live.contains(&e.id)) {
                match read_verified(&file, e) {
                    Some(stored) => copies.push((*e, stored)),
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if !ok {
                // Left as it is: fsck names the damage; its dead rows still go, one by one.
                plan.stats.packs_deleted -= 1;
                plan.dead_kept.extend(
                    entries
                        .iter()
                        .filter(|e| !live.contains(&e.id))
                        .map(|e| e.id),
                );
                continue;
            }
            for (e, stored) in copies {
                self.append_moved(&mut out, &mut sealed, e, &stored)?;
            }
            keep_rewrite.push((pack_id, name));
        }
        plan.rewrite = keep_rewrite;
        let mut moved_inline = Vec::new();
        for id in std::mem::take(&mut plan.inline_moves) {
            let Some((e, stored)) = self.index.lookup_inline(&id)? else {
                continue;
            };
            if pack::decode_object(&e, stored.clone()).is_err() {
                continue;
            }
            self.append_moved(&mut out, &mut sealed, e, &stored)?;
            moved_inline.push(id);
        }
        plan.inline_moves = moved_inline;
        if let Some(p) = out.take().filter(|p| !p.is_empty()) {
            sealed.push(p.seal()?);
        }
        let mut dirs = Vec::new();
        let mut created_dir = false;
        for s in sealed {
            let marker = PublishMarker::create(&self.packs_dir, s.name())?;
            let (dir, created, published) = s.publish(&self.packs_dir)?;
            created_dir |= created;
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
            plan.written.push((published, marker));
        }
        if created_dir {
            dirs.push(self.packs_dir.clone());
        }
        for d in &dirs {
            pack::sync_dir(d)?;
        }
        plan.stats.packs_written = plan.written.len() as u64;
        Ok(())
    }

    fn append_moved(
        &self,
        out: &mut Option<PackWriter>,
        sealed: &mut Vec<pack::SealedPack>,
        e: Entry,
        stored: &[u8],
    ) -> Result<()> {
        let w = match out {
            Some(w) => w,
            None => out.insert(PackWriter::create(&self.packs_dir)?),
        };
        w.append(e.id, e.kind, e.compression, e.raw_len, stored)?;
        if w.len() >= self.config.pack_target_size {
            let full = out.take().expect("just used");
            sealed.push(full.seal()?.synced()?);
        }
        Ok(())
    }

    /// The index side of the sweep, in one transaction (the caller's, if the connection is in
    /// one: then it commits with the caller's rows).
    pub fn commit_sweep(&self, plan: &SweepPlan) -> Result<()> {
        let conn = self.index.conn();
        // The packs that go: every row still naming one after the new packs' rows are in must
        // be a dead object's, and all of them are deleted by one scan (there is no index by
        // pack; a lookup per pack would be a scan per pack).
        let doomed: HashSet<i64> = plan
            .rewrite
            .iter()
            .chain(&plan.delete)
            .map(|(id, _)| *id)
            .collect();
        let in_doomed = {
            let mut ids: Vec<i64> = doomed.iter().copied().collect();
            ids.sort_unstable();
            ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
        };
        crate::index::in_transaction(&conn, || {
            // Every row in the main table first: the statements below then see each packed
            // object's row in one table, and no row of a doomed pack stays behind in the other.
            crate::index::fold(&conn)?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            for (p, _) in &plan.written {
                conn.execute(
                    "INSERT INTO store_packs (name, size, objects, created_at) VALUES (?1, ?2, ?3, ?4)",
                    params![p.name, p.size as i64, p.entries.len() as i64, now],
                )?;
                let pid = conn.last_insert_rowid();
                let mut put = conn.prepare_cached(
                    "INSERT OR REPLACE INTO store_objects
                     (id, pack, kind, compression, offset, stored_len, raw_len)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )?;
                for e in &p.entries {
                    put.execute(params![
                        &e.id.0[..],
                        pid,
                        e.kind as u8,
                        e.compression as u8,
                        e.offset as i64,
                        e.stored_len,
                        e.raw_len
                    ])?;
                }
            }
            if !doomed.is_empty() {
                let dead: HashSet<&ObjectId> = plan.dead_packed.iter().collect();
                let mut st = conn.prepare(&format!(
                    "SELECT id, pack FROM store_objects WHERE pack IN ({in_doomed})"
                ))?;
                let mut rows = st.query([])?;
                while let Some(r) = rows.next()? {
                    let id: Vec<u8> = r.get(0)?;
                    let live =
                        <[u8; 32]>::try_from(id).map_or(true, |id| !dead.contains(&ObjectId(id)));
                    if live {
                        // A live object the repack did not copy (one that raced in twice):
                        // deleting its pack would lose it.
                        let pack: i64 = r.get(1)?;
                        return Err(Error::Format(format!(
                            "pack row {pack} still holds live objects after the repack"
                        )));
                    }
                }
                conn.execute(
                    &format!("DELETE FROM store_objects WHERE pack IN ({in_doomed})"),
                    [],
                )?;
            }
            {
                // Dead objects in packs that stay (mostly live): their rows only.
                let mut del = conn.prepare_cached("DELETE FROM store_objects WHERE id = ?1")?;
                for id in &plan.dead_kept {
                    del.execute([&id.0[..]])?;
                }
                let mut del = conn.prepare_cached("DELETE FROM store_inline WHERE id = ?1")?;
                for id in plan.dead_inline.iter().chain(&plan.inline_moves) {
                    del.execute([&id.0[..]])?;
                }
            }
            if !doomed.is_empty() {
                conn.execute(
                    &format!("DELETE FROM store_packs WHERE id IN ({in_doomed})"),
                    [],
                )?;
            }
            // Counted with the rows it removes: a reader that sees the same count later knows
            // that every id indexed before it read the count is still indexed.
            conn.execute(
                "INSERT INTO store_meta (key, value) VALUES ('sweeps', '1') \
                 ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1",
                [],
            )?;
            Ok(())
        })?;
        Ok(())
    }

    /// After [`Store::commit_sweep`] is durable: removes the files of the packs no row names
    /// now, and the publish markers. `after_each` runs after each file removed (crash tests).
    pub fn finish_sweep(&self, plan: SweepPlan, after_each: &dyn Fn()) -> Result<SweepStats> {
        let mut names = Vec::new();
        for (_, name) in plan.rewrite.iter().chain(&plan.delete) {
            let path = pack::pack_path(&self.packs_dir, name);
            match fs::remove_file(&path) {
                Ok(()) => names.push(name.clone()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(Error::Io {
                        op: "remove pack",
                        path,
                        source,
                    })
                }
            }
            after_each();
        }
        for (_, marker) in plan.written {
            marker.remove();
        }
        self.sync_pack_dirs(&names)?;
        let mut stats = plan.stats;
        stats.clones_removed = self.remove_unindexed_clones()?;
        Ok(stats)
    }

    fn sync_pack_dirs(&self, names: &[String]) -> Result<()> {
        let mut dirs: Vec<_> = names
            .iter()
            .filter_map(|n| {
                pack::pack_path(&self.packs_dir, n)
                    .parent()
                    .map(|p| p.to_owned())
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        for d in dirs {
            pack::sync_dir(&d)?;
        }
        Ok(())
    }
}

/// An object's stored bytes from its pack, if its header matches and it decodes to its id.
fn read_verified(file: &File, e: &Entry) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; OBJECT_HEADER_LEN + e.stored_len as usize];
    file.read_exact_at(&mut buf, e.offset).ok()?;
    let stored = buf.split_off(OBJECT_HEADER_LEN);
    pack::decode_object(e, stored.clone()).ok()?;
    // The header is checked by decoding against the index entry; a mismatch fails there.
    Some(stored)
}
