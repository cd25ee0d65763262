//! Trusted listings (git's untracked-cache rule, see `scan`): a walk that reuses the cached
//! listing of a directory whose stamp vouches for it must find exactly what a walk that reads
//! every directory finds. The property test edits a small tree at random between captures
//! (names created, deleted and renamed within and across directories, directories made,
//! removed and moved, ignore files edited, a directory's mtime set back to what it was, file
//! contents rewritten), many edits landing in the same clock tick as the listing before them,
//! and compares every capture's tree with the one of a walk that trusts nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use rewind_store::Store;

use super::scan::TRUST_GRANULE_NS;
use super::state::State;
use super::{capture, coarse_now_ns, Capture, CaptureOptions};
use crate::config::IgnoredPolicy;

fn options(trust_granule_ns: Option<i64>) -> CaptureOptions<'static> {
    CaptureOptions {
        ignored: IgnoredPolicy::Skip,
        max_file_size: u64::MAX,
        time_budget: None,
        progress: None,
        dirty: None,
        watch: None,
        prehashed: None,
        ahead: None,
        trust_granule_ns,
    }
}

/// A workspace, its store and the stat cache file, as a workspace keeps them.
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    state_file: PathBuf,
    store: Store,
    state: State,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(&root).unwrap();
        let store = Store::open(
            &dir.path().join("packs"),
            &dir.path().join("meta.sqlite"),
            Default::default(),
        )
        .unwrap();
        Fixture {
            state_file: dir.path().join("state.bin"),
            _dir: dir,
            root,
            store,
            state: State::default(),
        }
    }

    fn capture(&self, granule: Option<i64>) -> Capture {
        capture(&self.root, &self.store, &self.state, &options(granule)).unwrap()
    }

    /// Makes `c` (a capture from the current cache) the cache, saved and loaded back as a
    /// workspace does (the load gives the racy cutoff).
    fn keep(&mut self, mut c: Capture) {
        if c.same_as_cache {
            c.state = std::mem::take(&mut self.state);
            c.keep_fresh_stamps();
            if !c.state_changed {
                self.state = c.state;
                return;
            }
        }
        c.state.save(&self.state_file).unwrap();
        self.state = State::load(&self.state_file);
    }
}

/// Sleeps until the coarse clock enters a new granule of `g` ns.
fn next_granule(g: i64) {
    let now = coarse_now_ns().div_euclid(g);
    while coarse_now_ns().div_euclid(g) == now {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn dirs_of(root: &Path) -> usize {
    let mut n = 1;
    for e in std::fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            n += dirs_of(&e.path());
        }
    }
    n
}

/// A tree untouched since a second before its listing was read is walked without reading any
/// directory; a name created in one directory makes that one read again, and is found. On a
/// file system outside the list (`scan::keeps_directory_mtimes`), nothing is ever trusted.
#[test]
fn quiet_directories_are_not_read_again() {
    let mut fx = Fixture::new();
    for d in ["a/b", "c"] {
        std::fs::create_dir_all(fx.root.join(d)).unwrap();
        std::fs::write(fx.root.join(d).join("f"), d).unwrap();
    }
    next_granule(TRUST_GRANULE_NS);
    let first = fx.capture(Some(TRUST_GRANULE_NS));
    assert_eq!(first.dirs_trusted, 0, "nothing is cached yet");
    fx.keep(first);
    let supported = super::scan::keeps_directory_mtimes(&fx.root);
    let again = fx.capture(Some(TRUST_GRANULE_NS));
    assert!(again.same_as_cache);
    let all = dirs_of(&fx.root);
    assert_eq!(again.dirs_trusted, if supported { all } else { 0 });
    std::fs::write(fx.root.join("a/new"), "new").unwrap();
    let after = fx.capture(Some(TRUST_GRANULE_NS));
    assert_eq!(after.dirs_trusted, if supported { all - 1 } else { 0 });
    let paths: Vec<_> = after.changes.iter().map(|c| c.path.clone()).collect();
    assert_eq!(paths, [b"a/new".to_vec()]);
    // Nothing is trusted without a granule.
    assert_eq!(fx.capture(None).dirs_trusted, 0);
}

/// A name created right after the listing, in the clock tick of the change before it, is
/// found. On a kernel that stamps with the coarse clock the directory's mtime and ctime do not
/// move, and only the granule rule catches it; a kernel with multigrain timestamps (6.13 and
/// later, as here) gives the second change a finer timestamp once the walk has stat'ed the
/// directory, so here this fails only if a changed stat is trusted. The granule rule itself is
/// checked against a model of coarse timestamps in `scan/trusted.rs`.
#[test]
fn a_change_in_the_tick_of_the_listing_is_found() {
    let mut fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("d")).unwrap();
    for round in 0..20 {
        // The finest granule (1 ns: what matters is the clock's tick), from the start of a tick.
        next_granule(1);
        std::fs::write(fx.root.join(format!("d/a{round}")), "a").unwrap();
        let c = fx.capture(Some(1));
        fx.keep(c);
        std::fs::write(fx.root.join(format!("d/b{round}")), "b").unwrap();
        let c = fx.capture(Some(1));
        let found = c
            .changes
            .iter()
            .any(|c| c.path == format!("d/b{round}").as_bytes());
        assert!(found, "round {round}: d/b{round} was missed");
        fx.keep(c);
    }
}

/// A large directory changed in the granule before its listing was read is read again by the
/// next walk; that walk, finding nothing new, still has the cache saved with the directory's
/// new stamp, so the walks after it reuse the listing (an agent that made one file in a huge
/// directory does not make every later no-op epoch read it).
#[test]
fn a_large_directory_read_again_gets_its_stamp_saved() {
    let mut fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("big")).unwrap();
    for i in 0..super::FRESH_STAMPS_WORTH_SAVING {
        std::fs::write(fx.root.join(format!("big/{i}")), "x").unwrap();
    }
    let first = fx.capture(Some(TEST_GRANULE_NS));
    fx.keep(first);
    std::fs::write(fx.root.join("big/new"), "new").unwrap();
    let changed = fx.capture(Some(TEST_GRANULE_NS));
    assert!(!changed.same_as_cache);
    fx.keep(changed);
    next_granule(TEST_GRANULE_NS);
    next_granule(TEST_GRANULE_NS);
    let noop = fx.capture(Some(TEST_GRANULE_NS));
    let supported = super::scan::keeps_directory_mtimes(&fx.root);
    assert!(noop.same_as_cache);
    assert_eq!(noop.fresh_stamps.contains_key(b"big".as_slice()), supported);
    fx.keep(noop);
    let later = fx.capture(Some(TEST_GRANULE_NS));
    assert!(later.same_as_cache && later.fresh_stamps.is_empty());
    assert_eq!(later.dirs_trusted, if supported { 2 } else { 0 });
}

/// A listing is reused only under the ignore rules it was filtered with: a file the rules kept
/// out is captured once an ignore file higher up, rewritten in place (no directory's mtime
/// moves), no longer ignores it.
#[test]
fn a_listing_is_reused_only_under_its_ignore_rules() {
    let mut fx = Fixture::new();
    std::fs::create_dir_all(fx.root.join("a")).unwrap();
    std::fs::write(fx.root.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(fx.root.join("a/kept"), "k").unwrap();
    std::fs::write(fx.root.join("a/x.log"), "ignored").unwrap();
    next_granule(TEST_GRANULE_NS);
    next_granule(TEST_GRANULE_NS);
    let first = fx.capture(Some(TEST_GRANULE_NS));
    fx.keep(first);
    let quiet = fx.capture(Some(TEST_GRANULE_NS));
    if super::scan::keeps_directory_mtimes(&fx.root) {
        assert_eq!(quiet.dirs_trusted, 2, "root and a are reused");
    }
    std::fs::write(fx.root.join(".gitignore"), "*.tmp\n").unwrap();
    let after = fx.capture(Some(TEST_GRANULE_NS));
    let paths: Vec<_> = after.changes.iter().map(|c| c.path.clone()).collect();
    assert_eq!(paths, [b".gitignore".to_vec(), b"a/x.log".to_vec()]);
}

/// Where edits happen: nested, so that moves and removals take subtrees with them.
const DIRS: [&str; 5] = ["a", "a/b", "a/b/c", "d", "d/e"];
const NAMES: [&str; 4] = ["f", "g", "h.log", "i.tmp"];

#[derive(Clone, Debug)]
enum Edit {
    Create {
        dir: usize,
        name: usize,
    },
    Remove {
        dir: usize,
        name: usize,
    },
    Rename {
        from: (usize, usize),
        to: (usize, usize),
    },
    Rewrite {
        dir: usize,
        name: usize,
        n: u8,
    },
    Mkdir {
        dir: usize,
    },
    RemoveTree {
        dir: usize,
    },
    MoveDir {
        from: usize,
        to: usize,
    },
    /// Writes `pattern` as the ignore file of `dir` (or of the root), or removes it.
    Ignore {
        dir: Option<usize>,
        pattern: Option<usize>,
    },
    /// Sets the directory's mtime back to what it was before this step's edits (`touch -d`
    /// of the old time: the ctime still moves).
    ResetMtime {
        dir: usize,
    },
    /// Waits for the coarse clock's next tick, so the edits after it share one.
    AlignTick,
    /// Waits up to two granules (the listing may become trusted).
    Sleep {
        ms: u8,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    let d = 0..DIRS.len();
    let n = 0..NAMES.len();
    prop_oneof![
        4 => (d.clone(), n.clone()).prop_map(|(dir, name)| Edit::Create { dir, name }),
        3 => (d.clone(), n.clone()).prop_map(|(dir, name)| Edit::Remove { dir, name }),
        3 => ((d.clone(), n.clone()), (d.clone(), n.clone()))
            .prop_map(|(from, to)| Edit::Rename { from, to }),
        2 => (d.clone(), n.clone(), any::<u8>()).prop_map(|(dir, name, n)| Edit::Rewrite { dir, name, n }),
        2 => d.clone().prop_map(|dir| Edit::Mkdir { dir }),
        1 => d.clone().prop_map(|dir| Edit::RemoveTree { dir }),
        1 => (d.clone(), d.clone()).prop_map(|(from, to)| Edit::MoveDir { from, to }),
        2 => (prop::option::of(d.clone()), prop::option::of(0..PATTERNS.len()))
            .prop_map(|(dir, pattern)| Edit::Ignore { dir, pattern }),
        2 => d.prop_map(|dir| Edit::ResetMtime { dir }),
        2 => Just(Edit::AlignTick),
        2 => (0u8..24).prop_map(|ms| Edit::Sleep { ms }),
    ]
}

const PATTERNS: [&str; 4] = ["*.log\n", "*.tmp\n!i.tmp\n", "b/\n", "g\n"];

/// Applies `e`; an edit whose precondition does not hold (a missing parent, a move into
/// itself) does nothing, as a shell command's failing step would.
fn apply(root: &Path, e: &Edit, mtimes: &std::collections::HashMap<usize, std::fs::FileTimes>) {
    let p = |i: usize| root.join(DIRS[i]);
    let file = |(d, n): (usize, usize)| p(d).join(NAMES[n]);
    match *e {
        Edit::Create { dir, name } => {
            if p(dir).is_dir() && !file((dir, name)).exists() {
                std::fs::write(file((dir, name)), DIRS[dir]).unwrap();
            }
        }
        Edit::Remove { dir, name } => {
            let _ = std::fs::remove_file(file((dir, name)));
        }
        Edit::Rename { from, to } => {
            if file(from).is_file() && p(to.0).is_dir() && !file(to).is_dir() {
                std::fs::rename(file(from), file(to)).unwrap();
            }
        }
        Edit::Rewrite { dir, name, n } => {
            if file((dir, name)).is_file() {
                std::fs::write(file((dir, name)), vec![b'x'; 1 + n as usize]).unwrap();
            }
        }
        Edit::Mkdir { dir } => {
            if !p(dir).exists() {
                let _ = std::fs::create_dir_all(p(dir));
            }
        }
        Edit::RemoveTree { dir } => {
            if p(dir).is_dir() {
                std::fs::remove_dir_all(p(dir)).unwrap();
            }
        }
        Edit::MoveDir { from, to } => {
            let (src, dst) = (p(from), p(to));
            let into_itself = DIRS[to].starts_with(DIRS[from]);
            if src.is_dir() && !dst.exists() && !into_itself && dst.parent().unwrap().is_dir() {
                std::fs::rename(src, dst).unwrap();
            }
        }
        Edit::Ignore { dir, pattern } => {
            let d = dir.map_or(root.to_path_buf(), p);
            if d.is_dir() {
                match pattern {
                    Some(i) => std::fs::write(d.join(".gitignore"), PATTERNS[i]).unwrap(),
                    None => {
                        let _ = std::fs::remove_file(d.join(".gitignore"));
                    }
                }
            }
        }
        Edit::ResetMtime { dir } => {
            if let (Some(t), Ok(f)) = (mtimes.get(&dir), std::fs::File::open(p(dir))) {
                let _ = f.set_times(*t);
            }
        }
        Edit::AlignTick => next_granule(1),
        Edit::Sleep { ms } => std::thread::sleep(Duration::from_millis(ms as u64)),
    }
}

/// The granule the property test trusts with: shorter than a second so that listings become
/// trusted within a test case (sound here: these file systems keep nanoseconds, stamped from
/// the coarse clock).
const TEST_GRANULE_NS: i64 = 10_000_000;

fn run(steps: &[Vec<Edit>]) -> Result<usize, TestCaseError> {
    let mut fx = Fixture::new();
    for d in DIRS {
        std::fs::create_dir_all(fx.root.join(d)).unwrap();
        for n in &NAMES[..2] {
            std::fs::write(fx.root.join(d).join(n), d).unwrap();
        }
    }
    let first = fx.capture(Some(TEST_GRANULE_NS));
    fx.keep(first);
    let mut trusted = 0;
    for (i, edits) in steps.iter().enumerate() {
        let mtimes = (0..DIRS.len())
            .filter_map(|d| {
                let m = std::fs::metadata(fx.root.join(DIRS[d])).ok()?;
                Some((
                    d,
                    std::fs::FileTimes::new().set_modified(m.modified().ok()?),
                ))
            })
            .collect();
        for e in edits {
            apply(&fx.root, e, &mtimes);
        }
        let read_all = fx.capture(None);
        let got = fx.capture(Some(TEST_GRANULE_NS));
        trusted += got.dirs_trusted;
        prop_assert_eq!(
            got.root,
            read_all.root,
            "step {}: a trusted listing missed a change: {:?}",
            i,
            edits
        );
        fx.keep(got);
    }
    Ok(trusted)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_trusted_walk_finds_what_reading_every_directory_finds(
        steps in prop::collection::vec(prop::collection::vec(edit(), 0..5), 1..12)
    ) {
        run(&steps)?;
    }
}

/// The property test above exercises the trusted path: once a capture that changed something
/// has saved the cache (a capture that finds nothing keeps the old one, stamps and all), the
/// directories that were quiet for a granule before it are not read again.
#[test]
fn the_property_test_reuses_listings() {
    if !super::scan::keeps_directory_mtimes(&std::env::temp_dir()) {
        return; // nothing is ever trusted there (see `quiet_directories_are_not_read_again`)
    }
    let create = Edit::Create { dir: 3, name: 2 };
    let quiet = vec![vec![Edit::Sleep { ms: 25 }, create], vec![], vec![]];
    let trusted = run(&quiet).unwrap();
    assert!(trusted >= 2 * DIRS.len(), "trusted only {trusted} listings");
}
