//! `rewind push`: the sealed packs the remote lacks, their tails, the op log's new rows as one
//! segment, then one manifest.
//!
//! Invariants (the upload order makes an interrupted push safe, as restic's does):
//! - Packs and their tails first, then the segment, then the manifest last: a manifest never
//!   names an object that is not in the remote. An interrupted push leaves objects no manifest
//!   names yet; the next push finds them (`HEAD`) and does not upload them again.
//! - Each upload is verified before it is recorded: its size (`HEAD`), and for a segment its
//!   bytes read back and hashed. In an encrypted remote the transport seals what goes up and
//!   maps sizes back to plaintext sizes, so every size here (the tables', the manifest's) is
//!   the plaintext's; a segment read back is opened, so it is authenticated too. The local table of what the remote holds is a cache: an
//!   object it lists that the newest manifest does not is checked in the remote before it is
//!   trusted, and uploaded again if the remote does not have it.
//! - One push of a workspace at a time (`remote.lock`): two never export overlapping segments.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use rewind_core::{SegmentRecord, Workspace};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::gc::{self, Protection};
use crate::layout::{self, CheckpointRef, Manifest, PackRef};
use crate::transport::{Created, Remote};

/// What a push did.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct PushReport {
    /// The remote's name here.
    pub remote: String,
    /// Its URL.
    pub url: String,
    /// The history pushed to (this workspace's id).
    pub history: String,
    /// Objects kept inline in the index that were first sealed into a pack.
    pub sealed: u64,
    /// Large files cloned into the state whose content was first packed (clone files do not
    /// leave this machine; see `docs/format.md`, Cloned content).
    #[serde(default)]
    pub clones_packed: u64,
    /// Packs uploaded (each with its tail).
    pub packs: u64,
    /// Their bytes.
    pub pack_bytes: u64,
    /// Packs the remote already had.
    pub packs_present: u64,
    /// Op-log segments uploaded (0 or 1).
    pub segments: u64,
    /// Their bytes.
    pub segment_bytes: u64,
    /// The manifest written, or `None` when the remote was up to date.
    pub manifest: Option<String>,
    /// The last op-log position the remote now has.
    pub pos: i64,
    /// The op log's last position here; above `pos` when rows wait behind an open epoch.
    pub local_pos: i64,
    /// Packs the history's manifest stopped listing (a compacting push: `gc --remote`).
    pub packs_unlisted: u64,
}

/// How a push runs.
#[derive(Clone, Debug, Default)]
pub struct PushOptions {
    /// Compact the history (`gc --remote`'s first step): the manifest lists only the packs
    /// this workspace holds, which hold everything its own gc kept, and, in a clone of this
    /// remote, the packs it knows there and never fetched (its origin's). What it stops
    /// listing is no longer this history's, and a remote gc can collect it.
    pub compact: bool,
}

/// Pushes `ws` to `remote`.
pub fn push(ws: &Workspace, remote: &Remote) -> Result<PushReport> {
    push_with(ws, remote, &PushOptions::default())
}

/// Pushes `ws` to `remote` as `opts` say.
pub fn push_with(ws: &Workspace, remote: &Remote, opts: &PushOptions) -> Result<PushReport> {
    let _one = ws.remote_lock(std::time::Duration::from_secs(30))?;
    // A remote gc can delete an object this push relies on before it sees the push's veto;
    // the push then starts over, uploading it again. Three times in a row is not a race.
    let mut distrust = HashSet::new();
    for _ in 0..3 {
        match push_once(ws, remote, opts, &distrust)? {
            Ok(report) => return Ok(report),
            Err(gone) => {
                distrust.insert(gone);
            }
        }
    }
    Err(Error::State(format!(
        "{}'s garbage collection deleted objects this push relies on three times; push again",
        remote.url()
    )))
}

/// One attempt: the report, or the object a sweep deleted under it.
fn push_once(
    ws: &Workspace,
    remote: &Remote,
    opts: &PushOptions,
    distrust: &HashSet<String>,
) -> Result<std::result::Result<PushReport, String>> {
    let key = remote.location.key();
    let mut report = PushReport {
        remote: remote.location.name.clone(),
        url: remote.url().to_string(),
        history: ws.id().to_string(),
        ..PushReport::default()
    };
    layout::ensure_config(remote)?;
    // Clone files stay here: their content goes as packs (before the inline objects are
    // sealed, so that small content joins them).
    report.clones_packed = ws.pack_clones()?;
    report.sealed = ws.seal_inline()?;
    let clones: Vec<[String; 2]> = ws
        .store()
        .clone_pairs()?
        .into_iter()
        .map(|(c, p)| [c.to_hex(), p.to_hex()])
        .collect();
    let prev = layout::newest_manifest(remote, ws.id())?.map(|(_, m)| m);
    let mut confirmed: HashSet<String> = HashSet::new();
    if let Some(m) = &prev {
        for p in &m.packs {
            confirmed.insert(layout::pack_object(&p.name));
            confirmed.insert(layout::index_object(&p.name));
        }
        for s in &m.segments {
            confirmed.insert(layout::segment_object(&s.name));
        }
    }
    confirmed.retain(|n| !distrust.contains(n));
    let mut known = ws.remote_objects(&key)?;
    known.retain(|n, _| !distrust.contains(n));
    // Whether the remote holds `name` (`size` bytes): the newest manifest names it, or this
    // workspace recorded it and the remote confirms (a `HEAD`: the table is only a cache).
    let holds = |name: &str, size: Option<u64>| -> Result<bool> {
        if confirmed.contains(name) {
            return Ok(true);
        }
        match (known.get(name), size) {
            (Some(k), Some(s)) if *k != s => Ok(false),
            (Some(k), _) => Ok(remote.head(name)? == Some(*k)),
            (None, _) => Ok(false),
        }
    };
    // Packs and their tails.
    let packs = ws.store().pack_files()?;
    for p in &packs {
        let obj = layout::pack_object(&p.name);
        let idx = layout::index_object(&p.name);
        if holds(&obj, Some(p.size))? {
            report.packs_present += 1;
        } else {
            let bytes = std::fs::read(&p.path).map_err(|e| rewind_core::Error::Io {
                op: "reading",
                path: p.path.clone(),
                source: e,
            })?;
            upload_verified(remote, &obj, bytes)?;
            ws.record_remote_objects(&key, &[(obj, p.size)])?;
            report.packs += 1;
            report.pack_bytes += p.size;
        }
        if !holds(&idx, None)? {
            let tail = ws.store().pack_tail(&p.name)?;
            let len = tail.len() as u64;
            upload_verified(remote, &idx, tail)?;
            ws.record_remote_objects(&key, &[(idx, len)])?;
        }
        rewind_core::failpoint::hit("push-after-pack");
    }
    // The op log: segments recorded here but unknown to the remote are checked; from the
    // first one missing there, they are exported again.
    let mut segs = ws.remote_segments(&key)?;
    if let Some(bad) = segs.iter().position(|s| {
        let name = layout::segment_object(&s.name);
        !confirmed.contains(&name) && !matches!(remote.head(&name), Ok(Some(n)) if n == s.size)
    }) {
        let gone: Vec<String> = segs.drain(bad..).map(|s| s.name).collect();
        ws.forget_remote_segments(&key, &gone)?;
    }
    let after = segs.last().map_or(0, |s| s.to_pos);
    let mut new_segment = None;
    if let Some(seg) = ws.export_oplog(after)? {
        let bytes = layout::encode_segment(&seg)?;
        let hash = remote.content_name(&bytes);
        let rec = SegmentRecord {
            name: hash.clone(),
            from_pos: seg.from_pos,
            to_pos: seg.to_pos,
            size: bytes.len() as u64,
        };
        let obj = layout::segment_object(&hash);
        upload_verified(remote, &obj, bytes.clone())?;
        let back = remote.get(&obj)?.ok_or_else(|| Error::Missing {
            remote: remote.url().to_string(),
            object: obj.clone(),
            what: "an op-log segment just uploaded".into(),
        })?;
        if remote.content_name(&back) != hash {
            return Err(Error::Corrupt {
                remote: remote.url().to_string(),
                object: obj,
                reason: "read back after upload, its content does not match its name".into(),
            });
        }
        report.segments = 1;
        report.segment_bytes = rec.size;
        segs.push(rec.clone());
        new_segment = Some(rec);
    }
    rewind_core::failpoint::hit("push-before-manifest");
    // The manifest, last. Written when anything changed, or when the remote's newest does not
    // cover what this push confirmed (an interrupted push's objects).
    let mut pack_refs: HashMap<String, u64> = match (&prev, opts.compact) {
        (Some(m), false) => m.packs.iter().map(|p| (p.name.clone(), p.size)).collect(),
        _ => HashMap::new(),
    };
    for p in &packs {
        pack_refs.insert(p.name.clone(), p.size);
    }
    // And every pack the remote is known to hold for this workspace: a clone's origin packs it
    // never fetched, packs local gc removed since they were pushed. A compaction keeps only
    // the first kind: what a workspace that made its history does not hold, its gc dropped.
    // The history this workspace was cloned from, in this remote.
    let source = ws
        .remote_links()?
        .into_iter()
        .find(|l| l.remote == key)
        .map(|l| l.history);
    if !opts.compact || source.is_some() {
        for (name, size) in ws.remote_objects(&key)? {
            if let Some(pack) = pack_of(&name) {
                pack_refs.insert(pack.to_string(), size);
            }
        }
    }
    let unlisted: Vec<String> = prev
        .iter()
        .flat_map(|m| m.packs.iter())
        .filter(|p| !pack_refs.contains_key(&p.name))
        .map(|p| p.name.clone())
        .collect();
    report.packs_unlisted = unlisted.len() as u64;
    let collected = ws.collected()?;
    let pos = segs.last().map_or(0, |s| s.to_pos);
    let changed = match &prev {
        None => !segs.is_empty() || !pack_refs.is_empty(),
        Some(m) => {
            m.segments != segs
                || m.packs.len() != pack_refs.len()
                || new_segment.is_some()
                || !unlisted.is_empty()
                || m.collected != collected
                || m.clones != clones
                || m.version != layout::MANIFEST_VERSION
        }
    };
    report.pos = pos;
    report.local_pos = ws.last_pos()?;
    if !changed {
        return Ok(Ok(report));
    }
    let mut packs_sorted: Vec<PackRef> = pack_refs
        .iter()
        .map(|(name, size)| PackRef {
            name: name.clone(),
            size: *size,
        })
        .collect();
    packs_sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let newest = {
        let db = ws.store().db();
        rewind_core::oplog::checkpoints(&db, None, 64)?
            .into_iter()
            .filter(|c| c.pos <= pos)
            .max_by_key(|c| c.pos)
            .map(|c| CheckpointRef {
                id: c.id,
                created_ns: c.created_ns,
            })
    };
    // Nothing the manifest names may be swept by a pending mark (see `gc`): listed, vetoed if
    // marked, and the manifest written within the window of that listing.
    let names: HashSet<String> = pack_refs
        .keys()
        .flat_map(|p| [layout::pack_object(p), layout::index_object(p)])
        .chain(segs.iter().map(|s| layout::segment_object(&s.name)))
        .collect();
    let mut suspects = HashSet::new();
    let listed = loop {
        let listed = Instant::now();
        match gc::protect(remote, &names, &mut suspects)? {
            Protection::Clear => break listed,
            Protection::Waited => continue,
            Protection::Missing(gone) => {
                ws.forget_remote_objects(&key, std::slice::from_ref(&gone))?;
                return Ok(Err(gone));
            }
        }
    };
    let created_ns = rewind_core::now_ns();
    let manifest = Manifest {
        format: layout::MANIFEST_FORMAT.into(),
        version: layout::MANIFEST_VERSION,
        history: ws.id().to_string(),
        source,
        created_ns,
        pos,
        segments: segs.clone(),
        packs: packs_sorted,
        newest_checkpoint: newest,
        collected,
        clones,
    };
    if listed.elapsed() >= gc::window() {
        // Too slow since the marks were listed: a mark made since may be swept before a gc
        // sees this manifest. Start over (the uploads are there; only the checks run again).
        return push_once(ws, remote, opts, distrust);
    }
    let name = layout::manifest_object(ws.id(), created_ns);
    let bytes = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::State(e.to_string()))?;
    upload_verified(remote, &name, bytes)?;
    if let Some(rec) = &new_segment {
        ws.record_remote_segment(&key, rec)?;
    }
    if !unlisted.is_empty() {
        let names: Vec<String> = unlisted
            .iter()
            .flat_map(|p| [layout::pack_object(p), layout::index_object(p)])
            .collect();
        ws.forget_remote_objects(&key, &names)?;
    }
    report.manifest = Some(name);
    Ok(Ok(report))
}

/// The pack an object name is (`packs/<xx>/<name>.pack`), if it is one.
fn pack_of(name: &str) -> Option<&str> {
    name.strip_prefix("packs/")
        .and_then(|n| n.rsplit('/').next())
        .and_then(|n| n.strip_suffix(".pack"))
}

/// Uploads `name` (unless it exists with the same size) and checks its size in the remote.
fn upload_verified(remote: &Remote, name: &str, bytes: Vec<u8>) -> Result<()> {
    let size = bytes.len() as u64;
    let corrupt = |reason: String| Error::Corrupt {
        remote: remote.url().to_string(),
        object: name.to_string(),
        reason,
    };
    match remote.create(name, bytes)? {
        Created::Existed(n) if n != size => {
            return Err(corrupt(format!(
                "it exists with {n} bytes where this push has {size}; it was not overwritten \
                 (remove it from the remote if it is damaged, then push again)"
            )))
        }
        _ => {}
    }
    match remote.head(name)? {
        Some(n) if n == size => Ok(()),
        Some(n) => Err(corrupt(format!("{n} bytes after upload, expected {size}"))),
        None => Err(Error::Missing {
            remote: remote.url().to_string(),
            object: name.to_string(),
            what: "just uploaded, it is not there".into(),
        }),
    }
}
