//! A capture that re-reads only what a live watcher saw change (as `rewind serve`'s do) makes
//! its new state from the cache's, replacing the directories it re-read and dropping those no
//! longer listed (`capture::merged_state`), and a server writes `state.bin` only now and then
//! (`Workspace::save_and_keep_state`). This checks both against the disk: after random
//! directory edits (files written and deleted, directories created, deleted, moved, replaced
//! by files), sometimes by another process that walks and replaces `state.bin` meanwhile, each
//! epoch records exactly the paths that changed, and a whole walk right after it finds
//! nothing more (a change missed, or a stale directory left in the cache, would show then).

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use rewind_core::{GcOptions, LiveWatch};

/// Where edits happen: nested so that moves and deletions take subtrees with them.
const DIRS: [&str; 5] = ["a", "a/b", "a/b/c", "d", "d/e"];
const FILES: [&str; 3] = ["f", "g", "h"];

#[derive(Clone, Debug)]
enum Edit {
    Write { dir: usize, file: usize, n: u8 },
    Remove { dir: usize, file: usize },
    Mkdir { dir: usize },
    RemoveTree { dir: usize },
    Move { from: usize, to: usize },
    DirBecomesFile { dir: usize },
}

fn edit() -> impl Strategy<Value = Edit> {
    let d = 0..DIRS.len();
    let f = 0..FILES.len();
    prop_oneof![
        4 => (d.clone(), f.clone(), any::<u8>()).prop_map(|(dir, file, n)| Edit::Write { dir, file, n }),
        2 => (d.clone(), f).prop_map(|(dir, file)| Edit::Remove { dir, file }),
        2 => d.clone().prop_map(|dir| Edit::Mkdir { dir }),
        2 => d.clone().prop_map(|dir| Edit::RemoveTree { dir }),
        2 => (d.clone(), d.clone()).prop_map(|(from, to)| Edit::Move { from, to }),
        1 => d.prop_map(|dir| Edit::DirBecomesFile { dir }),
    ]
}

/// Applies `e`; edits whose precondition does not hold (a missing parent, a move into
/// itself) do nothing, as a shell command's failing step would.
fn apply(root: &Path, e: &Edit) {
    let p = |i: usize| root.join(DIRS[i]);
    match e {
        Edit::Write { dir, file, n } => {
            if p(*dir).is_dir() {
                // Sizes vary, so a same-tick rewrite is still a different stat.
                let body = vec![b'x'; 1 + *n as usize];
                std::fs::write(p(*dir).join(FILES[*file]), body).unwrap();
            }
        }
        Edit::Remove { dir, file } => {
            let _ = std::fs::remove_file(p(*dir).join(FILES[*file]));
        }
        Edit::Mkdir { dir } => {
            if !p(*dir).exists() {
                let _ = std::fs::create_dir_all(p(*dir));
            }
        }
        Edit::RemoveTree { dir } => {
            if p(*dir).is_dir() {
                std::fs::remove_dir_all(p(*dir)).unwrap();
            }
        }
        Edit::Move { from, to } => {
            let (src, dst) = (p(*from), p(*to));
            let into_itself = DIRS[*to].starts_with(DIRS[*from]);
            if src.is_dir() && !dst.exists() && !into_itself && dst.parent().unwrap().is_dir() {
                std::fs::rename(src, dst).unwrap();
            }
        }
        Edit::DirBecomesFile { dir } => {
            if p(*dir).is_dir() {
                std::fs::remove_dir_all(p(*dir)).unwrap();
                std::fs::write(p(*dir), b"was a directory\n").unwrap();
            }
        }
    }
}

/// Every path under the root and what it is: a directory (`None`) or a file's bytes.
fn listing(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if path.is_dir() {
                out.insert(rel, None);
                todo.push(path);
            } else {
                out.insert(rel, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

fn changed(
    a: &BTreeMap<String, Option<Vec<u8>>>,
    b: &BTreeMap<String, Option<Vec<u8>>>,
) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// One step: `edits` in an opaque epoch of the server's handle (its captures re-read what the
/// watcher saw, and leave `state.bin` to be written later), or, with `other`, of a handle
/// without the watcher (another process: it walks, and replaces `state.bin`).
/// What a step does besides its edits.
#[derive(Clone, Copy, Debug)]
struct Then {
    /// The edits are another process's (see `run`).
    other: bool,
    /// An aggressive gc runs after the epoch (another process's: it reads `state.bin`, which
    /// a server may have left older than its kept cache).
    gc: bool,
    /// A whole walk checks the tree after the epoch (it replaces `state.bin`, so the server's
    /// next capture walks everything: not every step, or the kept cache would never last).
    walk: bool,
}

fn run(steps: &[(Vec<Edit>, Then)]) -> Result<(), TestCaseError> {
    let env = common::Env::new();
    let root = env.root().to_path_buf();
    for d in DIRS {
        for f in FILES {
            common::write_file(&root, format!("{d}/{f}").as_bytes(), d.as_bytes(), 0o644);
        }
    }
    let live = LiveWatch::new(&root).expect("inotify works here");
    let watched = env.open();
    watched.use_live_watch(live.clone());
    watched.snapshot("base", None).unwrap();
    let last = steps.len() - 1;
    for (i, (edits, then)) in steps.iter().enumerate() {
        let other = then.other;
        let before = listing(&root);
        let other_ws = other.then(|| env.open());
        let ws = other_ws.as_ref().unwrap_or(&watched);
        let row = ws.begin_epoch("S", &common::shell_epoch(i)).unwrap();
        for e in edits {
            apply(&root, e);
        }
        let settled = ws.end_epoch("S", Some(&row.id), false).unwrap();
        let want = changed(&before, &listing(&root));
        let got: Vec<String> = settled
            .changes
            .iter()
            .map(|c| String::from_utf8_lossy(&c.path).into_owned())
            .collect();
        prop_assert_eq!(&got, &want, "step {} (other: {}): {:?}", i, other, edits);
        // A checkpoint per step (a capture of the server's too): gc then has history to drop.
        watched
            .checkpoint("S", Some(&format!("m{i}")), None, None, None)
            .unwrap();
        if then.gc {
            let aggressive = GcOptions {
                max_bytes: Some(0),
                keep: Some(1),
                ..GcOptions::default()
            };
            env.open().gc(&aggressive).unwrap();
        }
        if then.walk || i == last {
            // A whole walk finds nothing the epochs did not record: no external epoch.
            let epochs = |ws: &rewind_core::Workspace| ws.log(None, 10_000).unwrap().len();
            let n = epochs(&watched);
            env.open().snapshot("walked", None).unwrap();
            prop_assert_eq!(
                epochs(&watched),
                n,
                "step {}: the walk found more: {:?}",
                i,
                edits
            );
        }
    }
    // Every object a record names is stored: gc kept what the server's cache vouched for.
    let (report, lost) = watched.fsck().unwrap();
    prop_assert!(
        report.problems.is_empty() && lost.is_empty(),
        "fsck: {:?} {:?}",
        report.problems,
        lost
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(48),
        ..ProptestConfig::default()
    })]

    #[test]
    fn a_watched_capture_records_what_a_walk_finds(
        steps in prop::collection::vec(
            (
                prop::collection::vec(edit(), 1..4),
                (prop::bool::weighted(0.2), prop::bool::weighted(0.25), prop::bool::weighted(0.3))
                    .prop_map(|(other, gc, walk)| Then { other, gc, walk }),
            ),
            1..8,
        )
    ) {
        run(&steps)?;
    }
}
