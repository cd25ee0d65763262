//! `rewind gc --remote NAME`: remote retention, in two phases with a grace period, so a push
//! from another machine never loses an object it has just come to rely on
//! (`docs/format.md`, Remote store, "Garbage collection").
//!
//! A run does three things. It pushes this workspace's history with its manifest *compacted*
//! (listing only the packs that hold what the workspace's own gc kept), so what that gc
//! dropped stops being referenced. It then *sweeps* the marks older than their grace period:
//! each object a mark names that no history's newest manifest references now, and that no
//! veto protects, is deleted. Last it *marks*: every object no newest manifest references and
//! older than the grace period is named in a new mark, `gc/marks/<stem>.json`, for a later
//! run to sweep.
//!
//! Invariants (the proof is in `docs/format.md`; `W` is [`window`], the grace `g ≥ 2W`):
//! - A sweep deletes only within `W` of the listing of marks and vetoes it decided on, and
//!   lists the manifests at least `g` after the mark was made; past `W` it stops and leaves
//!   the rest to the next run.
//! - A push lists the marks before it writes its manifest, and writes it within `W` of that
//!   listing (else it lists again). An object its manifest names that a mark names gets a
//!   veto (`gc/vetoes/<mark>/<stem>.json`) first; the push then waits until `W` after the
//!   veto, checks the object is there (uploading it again if a sweep deleted it), and only then
//!   writes the manifest.
//! - Only objects are deleted that the listing shows older than the grace period: an object a
//!   push is uploading now is never marked.
//! - `config` is never deleted; a manifest is deleted only when it is not among the two newest
//!   of its history (the two a reader chooses from).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use rewind_core::Workspace;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::layout;
use crate::push::{push_with, PushOptions, PushReport};
use crate::transport::Remote;

/// A mark's format name.
pub const MARK_FORMAT: &str = "rewind-gc-mark";
/// A veto's format name.
pub const VETO_FORMAT: &str = "rewind-gc-veto";
/// The version of marks and vetoes this binary writes and reads.
pub const GC_VERSION: u32 = 1;
/// How long an unreferenced object waits between its mark and its deletion by default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(3600);
const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

/// `W`: a sweep deletes only within it of the listing it decided on; a push writes its
/// manifest within it of the listing of marks it checked, and waits it out after a veto.
/// `REWIND_REMOTE_GC_WINDOW_MS` shortens it for tests (grace periods of seconds); clocks of
/// the machines sharing a remote must agree to well within it.
pub fn window() -> Duration {
    std::env::var("REWIND_REMOTE_GC_WINDOW_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_WINDOW)
}

/// An object a mark names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MarkedObject {
    /// Its name in the remote.
    pub name: String,
    /// Its size.
    pub size: u64,
}

/// A mark: objects no history referenced when it was made, to be deleted by a gc at least
/// `grace_ns` later if still unreferenced and not vetoed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// [`MARK_FORMAT`].
    pub format: String,
    /// [`GC_VERSION`].
    pub version: u32,
    /// When it was made (ns since the Unix epoch).
    pub created_ns: i64,
    /// Its grace period (ns).
    pub grace_ns: i64,
    /// The objects.
    pub objects: Vec<MarkedObject>,
}

/// A veto: objects of a mark a push relies on, never to be deleted by that mark's sweep.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Veto {
    /// [`VETO_FORMAT`].
    pub format: String,
    /// [`GC_VERSION`].
    pub version: u32,
    /// When it was written (ns since the Unix epoch).
    pub created_ns: i64,
    /// The objects.
    pub objects: Vec<String>,
}

/// A mark not yet swept, with its vetoes.
#[derive(Clone, Debug)]
pub struct PendingMark {
    /// Its object name.
    pub name: String,
    /// Its stem (what its vetoes are filed under).
    pub stem: String,
    /// Its content.
    pub mark: Mark,
    /// Its vetoes: (object name, content).
    pub vetoes: Vec<(String, Veto)>,
}

impl PendingMark {
    fn vetoed(&self) -> HashSet<&str> {
        self.vetoes
            .iter()
            .flat_map(|(_, v)| v.objects.iter().map(String::as_str))
            .collect()
    }
}

const MARKS_DIR: &str = "gc/marks/";
const VETOES_DIR: &str = "gc/vetoes/";

fn corrupt(remote: &Remote, object: &str, reason: String) -> Error {
    Error::Corrupt {
        remote: remote.url().to_string(),
        object: object.to_string(),
        reason,
    }
}

fn parse<T: serde::de::DeserializeOwned>(remote: &Remote, name: &str, bytes: &[u8]) -> Result<T> {
    serde_json::from_slice(bytes).map_err(|e| corrupt(remote, name, e.to_string()))
}

/// A veto whose mark is gone: its name and content.
type OrphanVeto = (String, Veto);

/// The marks not yet swept, with their vetoes, oldest first; and the vetoes whose mark is
/// gone.
pub fn pending(remote: &Remote) -> Result<(Vec<PendingMark>, Vec<OrphanVeto>)> {
    let mut marks = Vec::new();
    for (name, _) in remote.list(MARKS_DIR)? {
        let Some(stem) = name
            .strip_prefix(MARKS_DIR)
            .and_then(|n| n.strip_suffix(".json"))
        else {
            continue;
        };
        let stem = stem.to_string();
        // Gone since the listing: a sweep finished it.
        let Some(bytes) = remote.get(&name)? else {
            continue;
        };
        let mark: Mark = parse(remote, &name, &bytes)?;
        if mark.format != MARK_FORMAT || mark.version != GC_VERSION {
            return Err(Error::State(format!(
                "{name} in {} has version {}, which this rewind cannot read; upgrade rewind",
                remote.url(),
                mark.version
            )));
        }
        marks.push(PendingMark {
            name,
            stem,
            mark,
            vetoes: Vec::new(),
        });
    }
    let mut orphans = Vec::new();
    for (name, _) in remote.list(VETOES_DIR)? {
        let Some(stem) = name
            .strip_prefix(VETOES_DIR)
            .and_then(|n| n.split('/').next())
        else {
            continue;
        };
        let Some(bytes) = remote.get(&name)? else {
            continue;
        };
        let veto: Veto = parse(remote, &name, &bytes)?;
        match marks.iter_mut().find(|m| m.stem == stem) {
            Some(m) => m.vetoes.push((name, veto)),
            None => orphans.push((name, veto)),
        }
    }
    Ok((marks, orphans))
}

/// What every history's newest manifest references (its packs, their indexes, its segments),
/// and the two newest manifests of each history.
struct Referenced {
    objects: HashSet<String>,
    /// Every manifest, per history, oldest first.
    manifests: Vec<(String, u64, i64)>,
    histories: u64,
}

fn referenced(remote: &Remote) -> Result<Referenced> {
    let mut r = Referenced {
        objects: HashSet::new(),
        manifests: Vec::new(),
        histories: 0,
    };
    for h in remote.list_dirs("histories/")? {
        if !layout::is_history_id(&h) {
            continue;
        }
        let all: Vec<_> = remote
            .list_meta(&layout::manifests_dir(&h))?
            .into_iter()
            .filter(|o| o.name.ends_with(".json"))
            .collect();
        let names: Vec<String> = all.iter().map(|o| o.name.clone()).collect();
        r.objects.extend(layout::candidates(&names).cloned());
        r.manifests
            .extend(all.into_iter().map(|o| (o.name, o.size, o.modified_ns)));
        // The one a reader chooses: what it names must stay.
        if let Some((_, m)) = layout::newest_among(remote, &names)? {
            r.histories += 1;
            for p in &m.packs {
                r.objects.insert(layout::pack_object(&p.name));
                r.objects.insert(layout::index_object(&p.name));
            }
            for s in &m.segments {
                r.objects.insert(layout::segment_object(&s.name));
            }
        }
    }
    Ok(r)
}

/// How a remote gc runs.
#[derive(Clone, Debug)]
pub struct RemoteGcOptions {
    /// Report what would be deleted and marked; write nothing (no compaction either).
    pub dry_run: bool,
    /// How long an unreferenced object stays after it is marked; at least twice [`window`].
    pub grace: Duration,
}

/// What a remote gc did, or (dry run) would do.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct RemoteGcReport {
    /// The remote's name here.
    pub remote: String,
    /// Its URL.
    pub url: String,
    /// Nothing was written.
    pub dry_run: bool,
    /// The grace period applied, in seconds.
    pub grace_secs: f64,
    /// The push that compacted this workspace's history first (none in a dry run); its
    /// `packs_unlisted` are the packs the history stopped listing.
    pub push: Option<PushReport>,
    /// Histories in the remote.
    pub histories: u64,
    /// Marks swept (all their objects deleted or kept).
    pub marks_swept: u64,
    /// Objects deleted.
    pub deleted: u64,
    /// Their bytes.
    pub deleted_bytes: u64,
    /// Objects of swept marks kept: referenced again, or vetoed by a push.
    pub kept: u64,
    /// Objects named in the new mark, deleted by a gc after the grace period if still
    /// unreferenced.
    pub marked: u64,
    /// Their bytes.
    pub marked_bytes: u64,
    /// Marks left pending (younger than their grace, or a sweep that ran out of time).
    pub marks_pending: u64,
    /// The new mark, if one was written.
    pub mark: Option<String>,
}

/// Refuses a grace period shorter than twice the window (the protocol needs `g ≥ 2W`).
pub fn check_grace(grace: Duration) -> Result<()> {
    let w = window();
    if grace < w * 2 {
        return Err(Error::Usage(format!(
            "a grace period of {}s is shorter than twice the push window ({}s); give --grace \
             of at least {}s",
            grace.as_secs_f64(),
            w.as_secs_f64(),
            (w * 2).as_secs_f64().ceil()
        )));
    }
    Ok(())
}

/// Collects `remote`: compacts `ws`'s history there, sweeps marks past their grace, marks
/// what no history references (see the module's invariants).
pub fn gc(ws: &Workspace, remote: &Remote, opts: &RemoteGcOptions) -> Result<RemoteGcReport> {
    check_grace(opts.grace)?;
    let mut report = RemoteGcReport {
        remote: remote.location.name.clone(),
        url: remote.url().to_string(),
        dry_run: opts.dry_run,
        grace_secs: opts.grace.as_secs_f64(),
        ..RemoteGcReport::default()
    };
    if layout::read_config(remote)?.is_none() {
        return Ok(report); // nothing was ever pushed
    }
    if !opts.dry_run {
        report.push = Some(push_with(ws, remote, &PushOptions { compact: true })?);
    }
    sweep(remote, opts, &mut report)?;
    mark(remote, opts, &mut report)?;
    Ok(report)
}

fn sweep(remote: &Remote, opts: &RemoteGcOptions, report: &mut RemoteGcReport) -> Result<()> {
    let w = window();
    let grace_ns = opts.grace.as_nanos() as i64;
    let mut gone: HashSet<String> = HashSet::new();
    // Each round decides on one listing and deletes only within `W` of it; a round that runs
    // out of time lists again (a veto written since must be seen).
    for round in 0.. {
        // The deadline runs from this listing: a veto written after it is a push's that waits
        // `W` before it relies on the object.
        let listed = Instant::now();
        let (marks, orphans) = pending(remote)?;
        let now = rewind_core::now_ns();
        let (due, young): (Vec<_>, Vec<_>) = marks
            .into_iter()
            .partition(|m| now >= m.mark.created_ns.saturating_add(m.mark.grace_ns));
        report.marks_pending = young.len() as u64;
        if round == 0 && !opts.dry_run {
            for (name, v) in &orphans {
                if now >= v.created_ns.saturating_add(grace_ns) {
                    remote.delete(name)?;
                }
            }
        }
        if due.is_empty() {
            return Ok(());
        }
        let refs = referenced(remote)?;
        let mut out_of_time = false;
        'marks: for m in &due {
            let vetoed = m.vetoed();
            for o in &m.mark.objects {
                if gone.contains(&o.name) {
                    continue;
                }
                if refs.objects.contains(&o.name) || vetoed.contains(o.name.as_str()) {
                    report.kept += 1;
                    gone.insert(o.name.clone());
                    continue;
                }
                if listed.elapsed() >= w {
                    out_of_time = true;
                    break 'marks;
                }
                if !opts.dry_run {
                    remote.delete(&o.name)?;
                    rewind_core::failpoint::hit("remote-gc-after-delete");
                }
                gone.insert(o.name.clone());
                report.deleted += 1;
                report.deleted_bytes += o.size;
            }
            if !opts.dry_run {
                // The mark first: killed in between, its vetoes are orphans (deleted after
                // the grace); the other way round, the next sweep would find the mark
                // without the vetoes that protect some of its objects.
                remote.delete(&m.name)?;
                for (name, _) in &m.vetoes {
                    remote.delete(name)?;
                }
            }
            report.marks_swept += 1;
        }
        if !out_of_time || opts.dry_run {
            return Ok(());
        }
        if round == 8 {
            // The store is too slow for the window: the rest waits for the next gc.
            report.marks_pending += due.len() as u64;
            return Ok(());
        }
    }
    Ok(())
}

fn mark(remote: &Remote, opts: &RemoteGcOptions, report: &mut RemoteGcReport) -> Result<()> {
    let created_ns = rewind_core::now_ns();
    let grace_ns = opts.grace.as_nanos() as i64;
    let old_enough = |modified_ns: i64| modified_ns < created_ns.saturating_sub(grace_ns);
    let refs = referenced(remote)?;
    report.histories = refs.histories;
    // What a pending mark names already waits for its sweep.
    let (marks, _) = pending(remote)?;
    let waiting: HashSet<String> = marks
        .iter()
        .flat_map(|m| m.mark.objects.iter().map(|o| o.name.clone()))
        .collect();
    let mut objects = Vec::new();
    let mut consider = |name: String, size: u64, modified_ns: i64| {
        if !refs.objects.contains(&name) && !waiting.contains(&name) && old_enough(modified_ns) {
            objects.push(MarkedObject { name, size });
        }
    };
    for dir in ["packs/", "index/", "oplog/"] {
        for o in remote.list_meta(dir)? {
            consider(o.name, o.size, o.modified_ns);
        }
    }
    for (name, size, modified_ns) in refs.manifests.iter().cloned() {
        consider(name, size, modified_ns);
    }
    report.marked = objects.len() as u64;
    report.marked_bytes = objects.iter().map(|o| o.size).sum();
    if objects.is_empty() || opts.dry_run {
        return Ok(());
    }
    let m = Mark {
        format: MARK_FORMAT.into(),
        version: GC_VERSION,
        created_ns,
        grace_ns,
        objects,
    };
    let name = format!("{MARKS_DIR}{}.json", layout::unique_stem(created_ns));
    let bytes = serde_json::to_vec(&m).map_err(|e| Error::State(e.to_string()))?;
    remote.create(&name, bytes)?;
    rewind_core::failpoint::hit("remote-gc-after-mark");
    report.mark = Some(name);
    report.marks_pending += 1;
    Ok(())
}

/// What [`protect`] found for the objects a manifest is about to name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Protection {
    /// No pending mark names any of them, or every one named is vetoed long enough ago and
    /// is there.
    Clear,
    /// Vetoes were written or are recent: it waited; list the marks again.
    Waited,
    /// One is gone (a sweep deleted it before the veto): the push must upload it again.
    Missing(String),
}

/// The push's side of the protocol: before a manifest naming `names` is written, each of
/// them that a pending mark names is vetoed, the push waits until `W` after the veto (every
/// sweep that listed before the veto is done deleting by then), and checks it is there.
///
/// `suspects` carries, across the push's listings, every object a mark named: each is checked
/// at the end even if its mark is gone by then (a sweep that deleted it also deletes the mark).
pub(crate) fn protect(
    remote: &Remote,
    names: &HashSet<String>,
    suspects: &mut HashSet<String>,
) -> Result<Protection> {
    let (marks, _) = pending(remote)?;
    let w = window();
    let mut wait_until: i64 = 0;
    for m in &marks {
        let hits: Vec<&str> = m
            .mark
            .objects
            .iter()
            .map(|o| o.name.as_str())
            .filter(|n| names.contains(*n))
            .collect();
        if hits.is_empty() {
            continue;
        }
        let mut newest: HashMap<&str, i64> = HashMap::new();
        for (_, v) in &m.vetoes {
            for o in &v.objects {
                let t = newest.entry(o.as_str()).or_insert(i64::MIN);
                *t = (*t).max(v.created_ns);
            }
        }
        let uncovered: Vec<String> = hits
            .iter()
            .filter(|n| !newest.contains_key(*n))
            .map(|n| n.to_string())
            .collect();
        if !uncovered.is_empty() {
            let created_ns = rewind_core::now_ns();
            let v = Veto {
                format: VETO_FORMAT.into(),
                version: GC_VERSION,
                created_ns,
                objects: uncovered,
            };
            let name = format!(
                "{VETOES_DIR}{}/{}.json",
                m.stem,
                layout::unique_stem(created_ns)
            );
            let bytes = serde_json::to_vec(&v).map_err(|e| Error::State(e.to_string()))?;
            remote.create(&name, bytes)?;
            wait_until = wait_until.max(created_ns + w.as_nanos() as i64);
        }
        for t in hits.iter().filter_map(|n| newest.get(n)) {
            wait_until = wait_until.max(t.saturating_add(w.as_nanos() as i64));
        }
        suspects.extend(hits.iter().map(|n| n.to_string()));
    }
    let now = rewind_core::now_ns();
    if wait_until > now {
        std::thread::sleep(Duration::from_nanos((wait_until - now) as u64));
        return Ok(Protection::Waited);
    }
    for n in suspects.iter() {
        if remote.head(n)?.is_none() {
            return Ok(Protection::Missing(n.clone()));
        }
    }
    Ok(Protection::Clear)
}
