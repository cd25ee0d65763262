//! `rewind clone` and `rewind pull`: a history's op log and packs from a remote.
//!
//! Invariants:
//! - Everything is verified before it is used: segments by size and hash, pack tails by their
//!   checksum, packs whole (every object's id) before they are indexed; in an encrypted remote
//!   every object is first authenticated as it is opened (the transport). Damage is an error
//!   naming the remote object (exit 7).
//! - A clone fetches the packs of the tree it materialises, into a staging store under the
//!   state directory (`$REWIND_HOME/tmp/clone-*`), and writes into its directory only once
//!   they are all there and verified; then the engine materialises and registers
//!   (`rewind_core::clone_into`). The rest of the history's packs come with `rewind pull`.
//! - A pull imports a history's new segments only into a workspace that recorded nothing of
//!   its own since its last pull (two histories are never interleaved), and takes in every pack
//!   of the history the store lacks.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rewind_core::{CloneSource, OplogSegment, RemoteLink, SegmentRecord, Workspace};
use rewind_store::{EntryKind, ObjectId, Store, StoreConfig};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::layout::{self, Manifest};
use crate::transport::Remote;

/// Files over this size are chunked: their tree entry names a `file` object listing chunks.
const CHUNK_THRESHOLD: u64 = 1 << 20;

/// What a clone did.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct CloneReport {
    /// The remote's URL.
    pub url: String,
    /// The new workspace's directory.
    pub root: String,
    /// Its id.
    pub id: String,
    /// The history it holds (the id of the workspace that pushed it).
    pub history: String,
    /// The checkpoint whose tree was written.
    pub checkpoint: String,
    /// That tree (hex).
    pub tree: String,
    /// Files written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packs fetched (those the tree needs).
    pub packs_fetched: u64,
    /// Their bytes.
    pub pack_bytes: u64,
    /// Packs of the history not fetched yet (`rewind pull` fetches them).
    pub packs_left: u64,
    /// Op-log segments imported.
    pub segments: u64,
}

/// What a pull did.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct PullReport {
    /// The remote's name here.
    pub remote: String,
    /// Its URL.
    pub url: String,
    /// The history pulled.
    pub history: String,
    /// Op-log segments imported.
    pub segments: u64,
    /// Packs fetched.
    pub packs: u64,
    /// Their bytes.
    pub pack_bytes: u64,
    /// The last op-log position now known from the remote.
    pub pos: i64,
}

/// Staging directory removed when dropped.
struct Staging(PathBuf);

impl Drop for Staging {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn missing(remote: &Remote, object: String, what: &str) -> Error {
    Error::Missing {
        remote: remote.url().to_string(),
        object,
        what: what.to_string(),
    }
}

/// A store error about a downloaded pack, as the remote object it came from.
fn pack_damage(remote: &Remote, name: &str, e: rewind_store::Error) -> Error {
    match e {
        rewind_store::Error::Corrupt { id, reason, .. } => Error::Corrupt {
            remote: remote.url().to_string(),
            object: layout::pack_object(name),
            reason: format!("object {id}: {reason}"),
        },
        rewind_store::Error::Format(reason) => Error::Corrupt {
            remote: remote.url().to_string(),
            object: layout::pack_object(name),
            reason,
        },
        other => Error::Store(other),
    }
}

/// Downloads pack `name` (expected `size` bytes) to `dest`, checking its size.
fn download_pack(remote: &Remote, name: &str, size: u64, dest: &Path) -> Result<()> {
    let obj = layout::pack_object(name);
    let bytes = remote
        .get(&obj)?
        .ok_or_else(|| missing(remote, obj.clone(), "a pack the history's manifest lists"))?;
    if bytes.len() as u64 != size {
        return Err(Error::Corrupt {
            remote: remote.url().to_string(),
            object: obj,
            reason: format!("{} bytes, the manifest says {size}", bytes.len()),
        });
    }
    // Not flushed here: `import_pack` makes it durable once it has verified it.
    std::fs::write(dest, &bytes).map_err(|e| rewind_core::Error::Io {
        op: "writing",
        path: dest.to_path_buf(),
        source: e,
    })?;
    Ok(())
}

/// Downloads the segments of a manifest, verified, in order.
fn fetch_segments(remote: &Remote, m: &Manifest) -> Result<Vec<OplogSegment>> {
    let mut out = Vec::new();
    for s in &m.segments {
        out.push(layout::fetch_segment(remote, s)?);
    }
    Ok(out)
}

/// The newest manifest of every history in the remote.
fn histories(remote: &Remote) -> Result<Vec<Manifest>> {
    if layout::read_config(remote)?.is_none() {
        return Err(Error::Unknown(format!(
            "nothing was pushed to {} (it has no config object); check the URL",
            remote.url()
        )));
    }
    let mut out = Vec::new();
    for h in remote.list_dirs("histories/")? {
        if !layout::is_history_id(&h) {
            continue;
        }
        if let Some((_, m)) = layout::newest_manifest(remote, &h)? {
            out.push(m);
        }
    }
    Ok(out)
}

/// Clones into `dir` (empty or absent) the tree of `checkpoint` (an id or unique prefix; the
/// newest checkpoint of the remote when `None`) with its history, under state directory `home`.
pub fn clone(
    home: &Path,
    remote: &Remote,
    dir: &Path,
    checkpoint: Option<&str>,
) -> Result<CloneReport> {
    // Refused before anything is fetched, and checked again before anything is written.
    let dest = rewind_core::remote::check_clone_dest(home, dir)?;
    let mut all = histories(remote)?;
    if all.is_empty() {
        return Err(Error::Unknown(format!(
            "{} holds no history yet (no manifest); push to it first",
            remote.url()
        )));
    }
    all.sort_by_key(|m| {
        std::cmp::Reverse(
            m.newest_checkpoint
                .as_ref()
                .map_or(i64::MIN, |c| c.created_ns),
        )
    });
    let (manifest, segments, ckpt) = match checkpoint {
        None => {
            let m = all.into_iter().next().expect("not empty");
            let Some(c) = m.newest_checkpoint.clone() else {
                return Err(Error::Unknown(format!(
                    "{} holds no checkpoint yet; make one (rewind checkpoint) and push",
                    remote.url()
                )));
            };
            let segs = fetch_segments(remote, &m)?;
            let found = find_checkpoint(&segs, &c.id);
            let [one] = found.as_slice() else {
                return Err(Error::Corrupt {
                    remote: remote.url().to_string(),
                    object: layout::manifests_dir(&m.history),
                    reason: format!(
                        "its newest manifest names checkpoint {} that its segments do not hold",
                        c.id
                    ),
                });
            };
            let one = one.clone();
            (m, segs, one)
        }
        Some(prefix) => {
            let prefix = prefix.to_ascii_lowercase();
            let mut hits = Vec::new();
            for m in all {
                let segs = fetch_segments(remote, &m)?;
                let found = find_checkpoint(&segs, &prefix);
                if !found.is_empty() {
                    hits.push((m, segs, found));
                }
            }
            let n: usize = hits.iter().map(|h| h.2.len()).sum();
            if n == 0 {
                return Err(Error::Unknown(format!(
                    "no checkpoint {prefix} in {}; `rewind log` in a clone lists them",
                    remote.url()
                )));
            }
            if n > 1 {
                return Err(Error::Unknown(format!(
                    "{prefix} matches {n} checkpoints in {}; give more of the id",
                    remote.url()
                )));
            }
            let (m, segs, mut found) = hits.pop().expect("one");
            (m, segs, found.pop().expect("one"))
        }
    };
    let (ckpt_id, tree) = ckpt;
    rewind_core::trace::phase("clone: manifests and segments read");
    if let Some(ns) = manifest.collected.checkpoint(&ckpt_id) {
        return Err(Error::Core(rewind_core::Error::Unavailable(format!(
            "checkpoint {ckpt_id} was collected by garbage collection at {} (ns since the Unix \
             epoch {ns}); its content may be gone from {}. Clone a kept one: `rewind log` in \
             a clone of the newest lists them",
            rewind_core::utc(ns),
            remote.url()
        ))));
    }
    // Staging store: filled and verified before the directory is touched.
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| rewind_core::Error::Io {
        op: "creating",
        path: tmp.clone(),
        source: e,
    })?;
    // Named by its process (and start time: pids are reused), so a later clone removes the
    // staging store of one that was killed.
    remove_dead_staging(&tmp);
    let (pid, start) = match rewind_core::this_process() {
        rewind_core::Owner::Process { pid, start } => (pid, start),
        rewind_core::Owner::Session => (std::process::id(), 0),
    };
    let rand = blake3::hash(format!("{pid} {:?}", std::time::SystemTime::now()).as_bytes());
    let staging = Staging(tmp.join(format!("clone-{pid}-{start}-{}", &rand.to_hex()[..8])));
    let packs_dir = staging.0.join("packs");
    let index_db = staging.0.join("meta.sqlite");
    let store = Store::open(&packs_dir, &index_db, StoreConfig::default())?;
    // Not the store's `tmp/`: its open removes files there that no live writer locks.
    let downloads = staging.0.join("download");
    std::fs::create_dir_all(&downloads).map_err(|e| rewind_core::Error::Io {
        op: "creating",
        path: downloads.clone(),
        source: e,
    })?;
    let mut located: HashMap<ObjectId, String> = HashMap::new();
    let mut objects: Vec<(String, u64)> = Vec::new();
    let sizes: HashMap<String, u64> = manifest
        .packs
        .iter()
        .map(|p| (p.name.clone(), p.size))
        .collect();
    for p in &manifest.packs {
        let obj = layout::index_object(&p.name);
        let tail = remote.get(&obj)?.ok_or_else(|| {
            missing(
                remote,
                obj.clone(),
                "the index of a pack the manifest lists",
            )
        })?;
        let ids = rewind_store::pack_tail_ids(&tail).map_err(|reason| Error::Corrupt {
            remote: remote.url().to_string(),
            object: obj.clone(),
            reason,
        })?;
        for id in ids {
            located.entry(id).or_insert_with(|| p.name.clone());
        }
        objects.push((obj, tail.len() as u64));
        objects.push((layout::pack_object(&p.name), p.size));
    }
    rewind_core::trace::phase("clone: pack indexes read");
    let mut fetched = Fetched::default();
    let mut fetch = |id: &ObjectId| -> Result<()> {
        if store.has(id)? {
            return Ok(());
        }
        let pack = located.get(id).ok_or_else(|| {
            missing(
                remote,
                format!("object {id}"),
                "the checkpoint's tree needs it and no pack index lists it",
            )
        })?;
        let size = sizes[pack];
        let dl = downloads.join(format!("{pack}.pack"));
        download_pack(remote, pack, size, &dl)?;
        store
            .import_pack(pack, &dl)
            .map_err(|e| pack_damage(remote, pack, e))?;
        fetched.packs.insert(pack.clone());
        fetched.bytes += size;
        Ok(())
    };
    // Recorded before the walk, which fetches a clone's packed content through them. The
    // staging store is thrown away if anything below fails.
    store.record_clone_pairs(&manifest_pairs(remote, &manifest)?)?;
    walk(&store, &tree, &mut fetch, remote)?;
    rewind_core::trace::phase("clone: packs fetched and verified");
    let link = RemoteLink {
        remote: remote.location.key(),
        name: remote.location.name.clone(),
        url: remote.location.url.clone(),
        endpoint: remote.location.endpoint.clone(),
        region: remote.location.region.clone(),
        history: manifest.history.clone(),
        pulled_pos: 0,
        pulled_ns: 0,
        // So a pull in the clone finds the key (its path; never the key).
        key_file: remote
            .location
            .key_file
            .as_ref()
            .map(|p| p.display().to_string()),
    };
    for s in &manifest.segments {
        objects.push((layout::segment_object(&s.name), s.size));
    }
    let cloned = rewind_core::clone_into(
        home,
        &dest,
        CloneSource {
            store: &store,
            index_db: &index_db,
            packs_dir: &packs_dir,
            tree,
            segments: &segments,
            link,
            objects,
            segment_records: manifest.segments.clone(),
            collected: manifest.collected.clone(),
        },
    )?;
    drop(store);
    Ok(CloneReport {
        url: remote.url().to_string(),
        root: cloned.root,
        id: cloned.id,
        history: manifest.history.clone(),
        checkpoint: ckpt_id,
        tree: cloned.tree,
        files: cloned.files,
        bytes: cloned.bytes,
        packs_fetched: fetched.packs.len() as u64,
        pack_bytes: fetched.bytes,
        packs_left: (manifest.packs.len() - fetched.packs.len()) as u64,
        segments: segments.len() as u64,
    })
}

/// Removes the staging stores (`clone-<pid>-<start>-<random>`) of clones whose process is gone.
fn remove_dead_staging(tmp: &Path) {
    let Ok(rd) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let mut parts = name.strip_prefix("clone-").unwrap_or("").split('-');
        let (Some(pid), Some(start), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else {
            continue;
        };
        let owner = rewind_core::Owner::Process { pid, start };
        if e.file_type().is_ok_and(|t| t.is_dir()) && !rewind_core::owner_alive(&owner) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[derive(Default)]
struct Fetched {
    packs: HashSet<String>,
    bytes: u64,
}

/// The checkpoints of `segs` whose id starts with `prefix`: (id, root).
fn find_checkpoint(segs: &[OplogSegment], prefix: &str) -> Vec<(String, ObjectId)> {
    let mut out: Vec<(String, ObjectId)> = Vec::new();
    for s in segs {
        for (id, _, root) in s.checkpoints() {
            if id.starts_with(prefix) && !out.iter().any(|(i, _)| *i == id) {
                out.push((id, root));
            }
        }
    }
    out
}

/// Makes every object of `tree` present in `store`, fetching the packs that hold them.
fn walk(
    store: &Store,
    tree: &ObjectId,
    fetch: &mut dyn FnMut(&ObjectId) -> Result<()>,
    remote: &Remote,
) -> Result<()> {
    if tree.is_zero() {
        return Ok(());
    }
    fetch(tree)?;
    // A huge directory's tree is a fan-out: its parts come before it can be read.
    for (_, part) in store
        .tree_parts(tree)
        .map_err(|e| store_damage(remote, e))?
    {
        fetch(&part)?;
    }
    let t = store.read_tree(tree).map_err(|e| store_damage(remote, e))?;
    for e in t.into_entries() {
        match e.kind {
            EntryKind::Dir => walk(store, &e.id, fetch, remote)?,
            EntryKind::File | EntryKind::Symlink => {
                if e.id.is_zero() {
                    continue;
                }
                fetch(&e.id)?;
                // A large file cloned into the history's state: its packed content.
                let content = match e.kind {
                    EntryKind::File => store
                        .clone_packed(&e.id)
                        .map_err(|err| store_damage(remote, err))?
                        .unwrap_or(e.id),
                    _ => e.id,
                };
                if content != e.id {
                    fetch(&content)?;
                }
                if e.kind == EntryKind::File && e.size > CHUNK_THRESHOLD {
                    for c in store
                        .file_chunks(&content)
                        .map_err(|err| store_damage(remote, err))?
                    {
                        fetch(&c)?;
                    }
                }
            }
            EntryKind::Uncovered => {}
        }
    }
    Ok(())
}

/// The manifest's clone pairs, or the remote named as holding a malformed manifest.
fn manifest_pairs(remote: &Remote, m: &Manifest) -> Result<Vec<(ObjectId, ObjectId)>> {
    m.clone_pairs().map_err(|reason| Error::Corrupt {
        remote: remote.url().to_string(),
        object: layout::manifests_dir(&m.history),
        reason,
    })
}

/// A read of a fetched (and verified) pack that still fails: named as the remote's.
fn store_damage(remote: &Remote, e: rewind_store::Error) -> Error {
    match &e {
        rewind_store::Error::Corrupt { pack, .. } => {
            let pack = pack.clone();
            pack_damage(remote, &pack, e)
        }
        _ => Error::Store(e),
    }
}

/// Pulls `ws`'s view of `remote` up to date: the followed history's new segments (a clone's
/// origin; else this workspace's own history, whose rows it already has), and every pack of
/// it the store lacks.
pub fn pull(ws: &Workspace, remote: &Remote) -> Result<PullReport> {
    let _one = ws.remote_lock(std::time::Duration::from_secs(30))?;
    let key = remote.location.key();
    if layout::read_config(remote)?.is_none() {
        return Err(Error::Unknown(format!(
            "nothing was pushed to {} (it has no config object); check the URL",
            remote.url()
        )));
    }
    let link = ws.remote_links()?.into_iter().find(|l| l.remote == key);
    let history = link
        .as_ref()
        .map_or_else(|| ws.id().to_string(), |l| l.history.clone());
    let mut report = PullReport {
        remote: remote.location.name.clone(),
        url: remote.url().to_string(),
        history: history.clone(),
        ..PullReport::default()
    };
    let Some((_, m)) = layout::newest_manifest(remote, &history)? else {
        return Ok(report);
    };
    report.pos = m.pos;
    let local: HashSet<String> = ws
        .remote_segments(&key)?
        .into_iter()
        .map(|s| s.name)
        .collect();
    let new: Vec<SegmentRecord> = m
        .segments
        .iter()
        .filter(|s| !local.contains(&s.name))
        .cloned()
        .collect();
    if !new.is_empty() {
        match &link {
            Some(l) => {
                if ws.recorded_after(l.pulled_pos)? {
                    return Err(Error::State(format!(
                        "this workspace recorded history of its own since it last pulled from {} \
                         (after position {}); pulling would interleave two histories. Clone the \
                         remote into a new directory to see its newer checkpoints",
                        remote.url(),
                        l.pulled_pos
                    )));
                }
                let mut segs = Vec::new();
                for s in &new {
                    segs.push(layout::fetch_segment(remote, s)?);
                }
                let mut moved = l.clone();
                moved.pulled_pos = m.pos;
                moved.pulled_ns = rewind_core::now_ns();
                // Packs first: the rows that refer to their objects come after them.
                fetch_packs(ws, remote, &m, &mut report)?;
                ws.import_oplog(&segs, Some(&moved))?;
                report.segments = segs.len() as u64;
            }
            None => {
                // This workspace's own history: its rows are here; only the record was lost.
            }
        }
        for s in &new {
            ws.record_remote_segment(&key, s)?;
        }
    }
    fetch_packs(ws, remote, &m, &mut report)?;
    // After the packs: a pair names content that must be stored already.
    ws.store()
        .record_clone_pairs(&manifest_pairs(remote, &m)?)?;
    if link.is_some() {
        // What the origin's gc dropped is dropped here too: restoring to it is refused
        // rather than failing on content the remote may no longer have.
        ws.import_collected(&m.collected, m.pos)?;
    }
    Ok(report)
}

fn fetch_packs(
    ws: &Workspace,
    remote: &Remote,
    m: &Manifest,
    report: &mut PullReport,
) -> Result<()> {
    let key = remote.location.key();
    let have: HashSet<String> = ws
        .store()
        .pack_files()?
        .into_iter()
        .map(|p| p.name)
        .collect();
    // Downloads land beside the store, not in its `tmp/` (whose files no live writer locks are
    // removed by any open); what a killed pull left there is removed under the remote lock.
    let tmp = ws.state_dir().join("remote-tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| rewind_core::Error::Io {
        op: "creating",
        path: tmp.clone(),
        source: e,
    })?;
    for p in m.packs.iter().filter(|p| !have.contains(&p.name)) {
        let dl = tmp.join(format!("{}.pack", p.name));
        download_pack(remote, &p.name, p.size, &dl)?;
        ws.import_pack(&p.name, &dl).map_err(|e| match e {
            rewind_core::Error::Store(s) => pack_damage(remote, &p.name, s),
            other => Error::Core(other),
        })?;
        ws.record_remote_objects(&key, &[(layout::pack_object(&p.name), p.size)])?;
        report.packs += 1;
        report.pack_bytes += p.size;
    }
    Ok(())
}
