//! The parallel per-directory walk (jj's design: one rayon job per directory), compared against
//! the stat cache so that unchanged files are never read.
//!
//! Never follows symlinks (they are recorded as links), never enters `.git`, skips ignored
//! paths unless the policy says to capture them, and records what it cannot read as uncovered.
//!
//! **Trusted listings** (git's untracked-cache rule). A directory's names change only with its
//! mtime: creating, deleting or renaming an entry in it sets the directory's mtime (and
//! ctime) to the time of that change. So a directory whose `lstat` now is exactly the one
//! taken before its cached listing was read has the same names, provided nothing changed it
//! *after* that `lstat` in the same clock tick: the walk records the coarse clock just before
//! each `read_dir` (`listed_ns`) and reuses a listing only if the directory's mtime and ctime
//! fall in an earlier granule (one second: file systems that keep whole seconds stay safe)
//! than that reading, and only under the same ignore rules ([`listing_rules`]). Any change
//! after the reading began carries a timestamp in `listed_ns`'s granule or later, so it differs
//! from the stamp. A reused listing is still `lstat`ed name by name (a file's content changes
//! do not touch its directory). The proof, and the file systems it is used on, are in
//! `docs/format.md` ("Trusted directory listings").

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rewind_store::{EntryKind, ObjectId};

use crate::capture::ignore_rules::Rules;
use crate::capture::state::{DirStamp, StatEntry, State};
use crate::config::IgnoredPolicy;
use crate::fs::relpath;

pub use crate::fs::NEVER_CAPTURED;

mod trusted;
pub(crate) use trusted::{can_vouch, keeps_directory_mtimes};
use trusted::{listing_rules, lstat_at, open_dir, unchanged_listing, vouches, DirStat};

/// Live counters a front end can poll for a progress bar.
#[derive(Debug, Default)]
pub struct Progress {
    /// Directory entries the walk has looked at so far.
    pub entries_seen: AtomicU64,
    /// Files and symlinks hashed so far.
    pub files_hashed: AtomicU64,
    /// Bytes hashed so far.
    pub bytes_hashed: AtomicU64,
}

pub(crate) struct WalkOptions<'a> {
    pub ignored: IgnoredPolicy,
    pub progress: Option<&'a Progress>,
    /// Look again only at what a watcher saw: directories it says to re-read, entries it
    /// named; everything else is as the cache says.
    pub dirty: Option<&'a crate::capture::watch::Dirty>,
    /// Watch every directory read, just before reading it.
    pub watch: Option<&'a crate::capture::watch::Watcher>,
    /// Reuse a directory's cached listing when its stamp vouches for it, with timestamps
    /// compared in granules of this many ns (see the module header); `None`: read every
    /// directory.
    pub trust_granule_ns: Option<i64>,
}

/// The granule of trusted listings: one second, so that file systems that keep whole-second
/// timestamps are safe too.
pub(crate) const TRUST_GRANULE_NS: i64 = 1_000_000_000;

/// One directory entry as found on disk. `id` is known when the stat cache vouches for it.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub stat: StatEntry,
    pub known: bool,
    /// Why this could not be captured, when `stat.kind` is `Uncovered`. (A `Box<str>`: one
    /// `Found` per entry of a first capture, 8 bytes less each than a `String`.)
    pub uncovered: Option<Box<str>>,
}

/// Result of a walk: every directory's entries, sorted by name. With
/// [`WalkOptions::dirty`], only the directories the walk entered (those re-read, those with
/// named entries, and their ancestors): every other directory is as the cache has it, unless
/// an entered directory no longer lists it (see `capture::merged_state`).
pub(crate) struct Walk {
    pub dirs: HashMap<Vec<u8>, Vec<Found>>,
    /// The stamp of every directory whose listing was read (or reused) with one.
    pub stamps: HashMap<Vec<u8>, DirStamp>,
    /// Directories found exactly as the cache has them (a trusted listing whose every entry
    /// still has its cached stat): their entry in `dirs` is left empty, to be filled from the
    /// cache with [`Walk::fill_same`] by a capture that needs it.
    pub same: Vec<Vec<u8>>,
    pub warnings: Vec<String>,
    /// Directories whose cached listing was reused without reading them.
    pub trusted: usize,
    /// Directories entered whose listing the watcher vouched for (only the entries it named,
    /// if any, were looked at again).
    pub watched: usize,
}

impl Walk {
    /// Gives the directories found as the cache has them their cached entries.
    pub fn fill_same(&mut self, old: &State) {
        for dir in self.same.drain(..) {
            if let (Some(entries), Some(cached)) = (self.dirs.get_mut(&dir), old.dirs.get(&dir)) {
                *entries = cached_found(cached);
            }
        }
    }
}

pub(crate) fn walk(root: &Path, old: &State, opts: &WalkOptions) -> Walk {
    let mut warnings = Vec::new();
    let rules = match opts.ignored {
        IgnoredPolicy::Skip => Some(Rules::for_root(root, &mut warnings)),
        IgnoredPolicy::Capture => None,
    };
    let granule = opts
        .trust_granule_ns
        .filter(|g| *g > 0 && keeps_directory_mtimes(root));
    let sh = Shared {
        root,
        old,
        opts,
        granule,
        out: Mutex::new(HashMap::new()),
        stamps: Mutex::new(Vec::new()),
        same: Mutex::new(Vec::new()),
        trusted: AtomicU64::new(0),
        watched: AtomicU64::new(0),
        warn: Mutex::new(warnings),
        unreadable: Mutex::new(Vec::new()),
    };
    let here = DirStat::of_path(root);
    rayon::scope(|s| walk_dir(s, &sh, Vec::new(), rules, false, here));
    let Shared {
        out,
        stamps,
        same,
        trusted,
        watched,
        warn,
        unreadable,
        ..
    } = sh;
    let mut dirs = out.into_inner().unwrap();
    for (rel, why) in unreadable.into_inner().unwrap() {
        dirs.remove(&rel);
        let (parent, name) = relpath::split(&rel);
        if let Some(f) = dirs
            .get_mut(parent)
            .and_then(|entries| entries.iter_mut().find(|f| f.stat.name == name))
        {
            *f = uncovered(name.to_vec(), 0, why);
        }
    }
    let mut stamps: HashMap<Vec<u8>, DirStamp> = stamps.into_inner().unwrap().into_iter().collect();
    stamps.retain(|dir, _| dirs.contains_key(dir));
    let same = same.into_inner().unwrap();
    Walk {
        dirs,
        stamps,
        same,
        warnings: warn.into_inner().unwrap(),
        trusted: trusted.into_inner() as usize,
        watched: watched.into_inner() as usize,
    }
}

/// What every directory's walk reads or adds to.
struct Shared<'s> {
    root: &'s Path,
    old: &'s State,
    opts: &'s WalkOptions<'s>,
    /// `opts.trust_granule_ns`, where the file system allows it.
    granule: Option<i64>,
    out: Mutex<HashMap<Vec<u8>, Vec<Found>>>,
    stamps: Mutex<Vec<(Vec<u8>, DirStamp)>>,
    same: Mutex<Vec<Vec<u8>>>,
    trusted: AtomicU64,
    watched: AtomicU64,
    warn: Mutex<Vec<String>>,
    /// Directories that could not be listed and that the cache never knew.
    unreadable: Mutex<Vec<(Vec<u8>, String)>>,
}

/// Walks directory `rel`, spawning its subdirectories' walks. `under_ignored`: inside an
/// ignored directory that is walked because it was captured before, so only what was captured
/// before is captured. `here`: the directory's own `lstat`, taken before this call.
fn walk_dir<'s>(
    scope: &rayon::Scope<'s>,
    sh: &'s Shared<'s>,
    rel: Vec<u8>,
    rules: Option<Arc<Rules>>,
    under_ignored: bool,
    here: Option<DirStat>,
) {
    let (root, old, opts) = (sh.root, sh.old, sh.opts);
    let (out, warn, unreadable) = (&sh.out, &sh.warn, &sh.unreadable);
    let abs = relpath::to_path(root, &rel);
    let mut local_warn = Vec::new();
    let rules = match (&rules, rel.is_empty()) {
        (Some(r), false) => Some(r.for_dir(&abs, &mut local_warn)),
        _ => rules,
    };
    let cached: &[StatEntry] = old.dirs.get(&rel).map(|v| v.as_slice()).unwrap_or(&[]);
    let classify = Classify {
        abs: &abs,
        rules: rules.as_deref(),
        needs_path: rules.as_ref().is_some_and(|r| r.has_matchers()),
        under_ignored,
        cached,
        progress: opts.progress,
    };
    if let Some(dirty) = opts.dirty {
        // Nothing happened here, or only to the entries the watcher named: the cache is the
        // rest of the listing. Enter only children below which something happened.
        let known = if dirty.reads(&rel) || !old.dirs.contains_key(&rel) {
            None
        } else {
            match dirty.named(&rel) {
                None => Some((cached_found(cached), old.stamps.get(&rel).copied())),
                // (A directory that cannot be opened now is read as usual, below.)
                Some(named) => restat_named(&abs, old, named, &classify).map(|found| {
                    let stamp = old.stamps.get(&rel).filter(|_| !named.listing_changed);
                    (found, stamp.copied())
                }),
            }
        };
        if let Some((found, stamp)) = known {
            sh.watched.fetch_add(1, Ordering::Relaxed);
            for f in &found {
                let child = relpath::join(&rel, &f.stat.name);
                if f.stat.kind == EntryKind::Dir && dirty.enters(&child) {
                    let child_rules = rules.clone();
                    // (Whether the child is ignored is known only from its parent's walk:
                    // conservatively, its own ignored entries stay out unless captured.)
                    let ignored =
                        subdir_ignored(rules.as_deref(), under_ignored, &abs, &f.stat.name);
                    scope.spawn(move |s| walk_dir(s, sh, child, child_rules, ignored, None));
                }
            }
            if !local_warn.is_empty() {
                warn.lock().unwrap().extend(local_warn);
            }
            // The names are the cached ones, so their stamp still tells how they were read.
            if let Some(st) = stamp {
                sh.stamps.lock().unwrap().push((rel.clone(), st));
            }
            out.lock().unwrap().insert(rel, found);
            return;
        }
    }
    // A directory entered without its parent's fresh `lstat` (below one a watcher's walk did
    // not read) takes its own, so that its listing is stamped too.
    let here = here.or_else(|| sh.granule.and_then(|_| DirStat::of_path(&abs)));
    // Captured directories walked although ignored now (see below).
    let mut ignored_dirs: Vec<Vec<u8>> = Vec::new();
    if let Some(w) = opts.watch {
        w.watch(&abs, &rel);
    }
    let rules_now = listing_rules(rules.as_deref(), under_ignored);
    let stamp_then = old.stamps.get(&rel).filter(|_| old.dirs.contains_key(&rel));
    let reuse = match (sh.granule, here, stamp_then) {
        (Some(g), Some(now), Some(then)) if vouches(then, &now, &rules_now, g) => {
            open_dir(&abs).map(|fd| (fd, *then))
        }
        _ => None,
    };
    let (stamp, rd) = match reuse {
        Some((fd, then)) => {
            sh.trusted.fetch_add(1, Ordering::Relaxed);
            if let Some(subdirs) = unchanged_listing(&fd, cached, old) {
                // The usual case: nothing here changed. No entry is built (at 100k files, a
                // copy of every name is a third of a no-op walk); the capture takes the
                // cached listing as it is (see `Walk::same`).
                if let Some(p) = opts.progress {
                    p.entries_seen
                        .fetch_add(cached.len() as u64, Ordering::Relaxed);
                }
                for (name, here) in subdirs {
                    let child = relpath::join(&rel, name);
                    let ignored = subdir_ignored(rules.as_deref(), under_ignored, &abs, name);
                    let child_rules = rules.clone();
                    scope.spawn(move |s| walk_dir(s, sh, child, child_rules, ignored, Some(here)));
                }
                if !local_warn.is_empty() {
                    warn.lock().unwrap().extend(local_warn);
                }
                sh.stamps.lock().unwrap().push((rel.clone(), then));
                sh.same.lock().unwrap().push(rel.clone());
                out.lock().unwrap().insert(rel, Vec::new());
                return;
            }
            let fd = Arc::new(fd);
            let names = cached
                .iter()
                .map(move |c| Ok((c.name.clone(), Listed::At(fd.clone()))));
            let names: Names<'_> = Box::new(names);
            (Some(then), Ok(names))
        }
        None => {
            // Read before the listing, after `here` was taken (see the module header).
            let listed_ns = super::coarse_now_ns();
            let stamp = here.map(|h| DirStamp {
                mtime_ns: h.mtime_ns,
                ctime_ns: h.ctime_ns,
                ino: h.ino,
                listed_ns,
                rules: rules_now,
            });
            (stamp, list(root, &abs, &rel).map(|n| n as Names<'_>))
        }
    };
    let rd = match rd {
        Ok(rd) => rd,
        Err(e) => {
            if let Some(w) = opts.watch {
                // Its subtree is not walked, so not watched either.
                w.give_up();
            }
            // Protect rather than guess: keep what the cache knew of this subtree, so an
            // unreadable directory never looks like a deletion.
            local_warn.push(format!(
                "cannot read directory {}: {e}; its last captured state is kept",
                abs.display()
            ));
            warn.lock().unwrap().extend(local_warn);
            if !old.dirs.contains_key(&rel) && !rel.is_empty() {
                // Never listed before: nothing of it was captured. Its parent's entry becomes
                // uncovered (see `walk`), so status, show and restores say so.
                unreadable
                    .lock()
                    .unwrap()
                    .push((rel.clone(), format!("cannot read directory: {e}")));
            }
            let mut out = out.lock().unwrap();
            for (path, entries) in &old.dirs {
                let inside = path == &rel
                    || (path.starts_with(&rel)
                        && (rel.is_empty() || path.get(rel.len()) == Some(&b'/')));
                if inside {
                    let kept = entries.iter().map(|e| Found {
                        stat: e.clone(),
                        known: true,
                        uncovered: None,
                    });
                    out.insert(path.clone(), kept.collect());
                }
            }
            out.entry(rel).or_default();
            return;
        }
    };
    let listed: Vec<(Vec<u8>, Listed)> = rd.filter_map(Result::ok).collect();
    // A large directory's entries are stat'ed on every core, in chunks (one job per directory
    // would leave 100k files in one directory to one thread); a small one's on this one.
    let classified: Vec<(Found, bool)> = if listed.len() >= PARALLEL_STAT_AT {
        use rayon::prelude::*;
        listed
            .into_par_iter()
            .with_min_len(PARALLEL_STAT_CHUNK)
            .filter_map(|(name, dent)| classify.entry(name, dent))
            .collect()
    } else {
        listed
            .into_iter()
            .filter_map(|(name, dent)| classify.entry(name, dent))
            .collect()
    };
    // Exactly sized: these listings are most of a first capture's memory (a vector grown by
    // pushes holds a quarter more, 14 MB at 300k files).
    let mut found = Vec::with_capacity(classified.len());
    for (f, ignored_dir) in classified {
        if ignored_dir {
            ignored_dirs.push(f.stat.name.clone());
        }
        found.push(f);
    }
    found.sort_by(|a, b| a.stat.name.cmp(&b.stat.name));
    // Merge-join with the cache: a file whose stat matches and is not racy keeps its id.
    let mut ci = 0;
    for f in found.iter_mut() {
        while ci < cached.len() && cached[ci].name < f.stat.name {
            ci += 1;
        }
        if let Some(c) = cached.get(ci).filter(|c| c.name == f.stat.name) {
            keep_cached_id(f, c, old);
        }
    }
    for f in &found {
        if f.stat.kind == EntryKind::Dir {
            let child = relpath::join(&rel, &f.stat.name);
            if let Some(dirty) = opts.dirty {
                // A directory already known and untouched below keeps its cached subtree.
                if old.dirs.contains_key(&child) && !dirty.enters(&child) {
                    continue;
                }
            }
            let child_rules = rules.clone();
            let ignored = ignored_dirs.contains(&f.stat.name);
            let here = DirStat::of(&f.stat);
            scope.spawn(move |s| walk_dir(s, sh, child, child_rules, ignored, Some(here)));
        }
    }
    if !local_warn.is_empty() {
        warn.lock().unwrap().extend(local_warn);
    }
    if let Some(stamp) = stamp {
        sh.stamps.lock().unwrap().push((rel.clone(), stamp));
    }
    out.lock().unwrap().insert(rel, found);
}

/// What decides how one entry of a directory is found: the ignore rules that apply there.
struct Classify<'a> {
    abs: &'a Path,
    rules: Option<&'a Rules>,
    /// An ignore file has patterns, so each entry's absolute path is needed to match them.
    needs_path: bool,
    under_ignored: bool,
    /// The directory's cached listing.
    cached: &'a [StatEntry],
    progress: Option<&'a Progress>,
}

impl Classify<'_> {
    /// One entry: its `lstat`, the ignore rules, its kind, and whether it is a captured
    /// directory that is ignored now. `None`: not part of the walk (gone, never captured,
    /// ignored).
    fn entry(&self, name: Vec<u8>, dent: Listed) -> Option<(Found, bool)> {
        if NEVER_CAPTURED.contains(&name.as_slice())
            || name.starts_with(crate::fs::root::TEMP_PREFIX.as_bytes())
        {
            return None;
        }
        // Building the absolute path costs an allocation per entry: only when an ignore file
        // needs it.
        let path = self
            .needs_path
            .then(|| self.abs.join(OsStr::from_bytes(&name)));
        let meta = match dent.stat(&name) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => return Some((uncovered(name, 0, format!("cannot stat: {e}")), false)),
        };
        let ft = meta.mode & libc::S_IFMT;
        // As in git, ignore rules apply to what is not captured yet: a path captured before
        // (in the cache, with its content) stays captured whatever the ignore files say now,
        // so an agent cannot switch recording off by writing `*` into `.gitignore`.
        let ignored = self.under_ignored
            || matches!((self.rules, &path), (Some(r), Some(path)) if r.is_ignored(path, ft == libc::S_IFDIR));
        if ignored && !was_captured(self.cached, &name) {
            return None;
        }
        if let Some(p) = self.progress {
            p.entries_seen.fetch_add(1, Ordering::Relaxed);
        }
        let kind = if ft == libc::S_IFDIR {
            EntryKind::Dir
        } else if ft == libc::S_IFLNK {
            EntryKind::Symlink
        } else if ft == libc::S_IFREG {
            EntryKind::File
        } else {
            let what = if ft == libc::S_IFIFO {
                "a FIFO"
            } else if ft == libc::S_IFSOCK {
                "a socket"
            } else {
                "a device file"
            };
            return Some((uncovered(name, 0, format!("{what} is not captured")), false));
        };
        let stat = StatEntry {
            name,
            kind,
            mode: meta.mode & 0o7777,
            size: if kind == EntryKind::Dir { 0 } else { meta.size },
            mtime_ns: meta.mtime_ns,
            ctime_ns: meta.ctime_ns,
            ino: meta.ino,
            id: ObjectId::ZERO,
        };
        let found = Found {
            stat,
            known: false,
            uncovered: None,
        };
        Some((found, ignored && kind == EntryKind::Dir))
    }
}

/// A file or symlink whose `lstat` is its cached one, and not racy, keeps its cached id.
fn keep_cached_id(f: &mut Found, c: &StatEntry, old: &State) {
    let s = &f.stat;
    let clean = matches!(s.kind, EntryKind::File | EntryKind::Symlink)
        && c.kind == s.kind
        && c.mode == s.mode
        && c.size == s.size
        && c.mtime_ns == s.mtime_ns
        && c.ctime_ns == s.ctime_ns
        && c.ino == s.ino
        && !old.is_racy(c);
    if clean {
        f.stat.id = c.id;
        f.known = true;
    }
}

/// The cached listing of directory `abs`, with the entries a watcher named `lstat`ed again
/// (added where created, dropped where gone): every entry no event named is as the cache has
/// it, since any change to it would have raised an event naming it. `None` when the directory
/// cannot be opened (it is then read as usual).
fn restat_named(
    abs: &Path,
    old: &State,
    named: &crate::capture::watch::Named,
    classify: &Classify,
) -> Option<Vec<Found>> {
    let dir = Arc::new(open_dir(abs)?);
    let cached = classify.cached;
    let now = |name: &Vec<u8>| {
        classify
            .entry(name.clone(), Listed::At(dir.clone()))
            .map(|(f, _)| f)
    };
    // A merge of two sorted lists: the cached listing and the named entries.
    let mut found = Vec::with_capacity(cached.len() + named.names.len());
    let mut names = named.names.iter().peekable();
    for c in cached {
        while let Some(n) = names.next_if(|n| n.as_slice() < c.name.as_slice()) {
            found.extend(now(n));
        }
        if names
            .next_if(|n| n.as_slice() == c.name.as_slice())
            .is_some()
        {
            if let Some(mut f) = now(&c.name) {
                keep_cached_id(&mut f, c, old);
                found.push(f);
            }
        } else {
            found.push(cached_one(c));
        }
    }
    for n in names {
        found.extend(now(n));
    }
    Some(found)
}

/// Whether subdirectory `name` of `abs` is walked as inside an ignored directory (only what
/// was captured before stays captured there).
fn subdir_ignored(rules: Option<&Rules>, under_ignored: bool, abs: &Path, name: &[u8]) -> bool {
    under_ignored
        || rules.is_some_and(|r| {
            r.has_matchers() && r.is_ignored(&abs.join(OsStr::from_bytes(name)), true)
        })
}

/// A directory with at least this many entries has them stat'ed in parallel.
const PARALLEL_STAT_AT: usize = 4096;
/// Entries per parallel job (a `lstat` is a few microseconds: smaller jobs cost more to hand
/// out than they save).
const PARALLEL_STAT_CHUNK: usize = 1024;

/// What the walk needs of one entry's `lstat`.
struct EntryStat {
    /// `st_mode`: the type bits (`S_IFMT`) and the permissions.
    mode: u32,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
    ino: u64,
}

impl From<std::fs::Metadata> for EntryStat {
    fn from(m: std::fs::Metadata) -> EntryStat {
        EntryStat {
            mode: m.mode(),
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            ino: m.ino(),
        }
    }
}

/// A directory's names, each with a way to `lstat` it.
type Names<'a> = Box<dyn Iterator<Item = std::io::Result<(Vec<u8>, Listed)>> + 'a>;

/// One entry of a listing, stat'ed when asked (a skipped name costs no syscall).
enum Listed {
    Std(std::fs::DirEntry),
    /// From a listing relative to descriptors: the `lstat` is already taken.
    Fd(std::io::Result<libc::stat>),
    /// A name of a trusted cached listing, in the directory open here.
    At(Arc<std::os::fd::OwnedFd>),
}

impl Listed {
    fn stat(self, name: &[u8]) -> std::io::Result<EntryStat> {
        let st = match self {
            Listed::Std(d) => return d.metadata().map(EntryStat::from),
            Listed::Fd(st) => st,
            Listed::At(dir) => lstat_at(&dir, name),
        };
        st.map(EntryStat::from)
    }
}

impl From<libc::stat> for EntryStat {
    fn from(st: libc::stat) -> EntryStat {
        EntryStat {
            mode: st.st_mode,
            size: st.st_size as u64,
            mtime_ns: st.st_mtime * 1_000_000_000 + st.st_mtime_nsec,
            ctime_ns: st.st_ctime * 1_000_000_000 + st.st_ctime_nsec,
            ino: st.st_ino,
        }
    }
}

/// Lists directory `rel` (at `abs`): by its absolute path, the fast way, or, when the path is
/// longer than the kernel takes (`ENAMETOOLONG`: deeper than `PATH_MAX`), by descriptors
/// from the root, one component at a time. Each name comes with a way to `lstat` it; the
/// name's own allocation becomes the entry's (no copy): at 100k files every allocation per
/// entry shows in the time of a capture that changes nothing.
#[allow(clippy::type_complexity)]
fn list(
    root: &Path,
    abs: &Path,
    rel: &[u8],
) -> std::io::Result<Box<dyn Iterator<Item = std::io::Result<(Vec<u8>, Listed)>>>> {
    match std::fs::read_dir(abs) {
        Ok(rd) => {
            Ok(Box::new(rd.map(|d| {
                d.map(|d| (d.file_name().into_vec(), Listed::Std(d)))
            })))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
            let names = crate::fs::root::RootDir::open(root)?.list_dir_stat(rel, true)?;
            Ok(Box::new(names.into_iter().map(|(n, st)| {
                Ok((n, Listed::Fd(st.expect("listed with stat"))))
            })))
        }
        Err(e) => Err(e),
    }
}

/// Whether the cache (the previous capture) holds `name` with its content: a path that
/// stays captured even if the ignore rules now match it.
fn was_captured(cached: &[StatEntry], name: &[u8]) -> bool {
    cached
        .binary_search_by(|c| c.name.as_slice().cmp(name))
        .is_ok_and(|i| cached[i].kind != EntryKind::Uncovered)
}

/// Cached entries, vouched for as they are.
fn cached_found(entries: &[StatEntry]) -> Vec<Found> {
    entries.iter().map(cached_one).collect()
}

/// A cached entry, vouched for as it is.
fn cached_one(e: &StatEntry) -> Found {
    Found {
        stat: e.clone(),
        known: true,
        uncovered: (e.kind == EntryKind::Uncovered)
            .then(|| "not captured (unchanged since)".into()),
    }
}

pub(crate) fn uncovered(name: Vec<u8>, size: u64, why: String) -> Found {
    Found {
        stat: StatEntry {
            name,
            kind: EntryKind::Uncovered,
            mode: 0,
            size,
            mtime_ns: 0,
            ctime_ns: 0,
            ino: 0,
            id: ObjectId::ZERO,
        },
        known: true,
        uncovered: Some(why.into_boxed_str()),
    }
}
