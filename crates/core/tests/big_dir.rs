//! A directory of thousands of entries is captured exactly as a small one would be: every
//! change found and nothing else, ignored files left out, what cannot be captured recorded as
//! uncovered. A directory of 4,096 entries or more has them stat'ed on every core
//! (`PARALLEL_STAT_AT` in `capture/scan.rs`), and a directory of more than 4,096 entries is
//! stored as a fan-out of trees (`FANOUT_AT`, `tree/fanout.rs` in the store): this one is above
//! both, so it checks those paths.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{read_tree, write_file, Env};

/// Thousands: above the size from which a directory's entries are stat'ed in parallel.
const FILES: usize = 6000;

fn paths(c: &rewind_core::Capture) -> Vec<String> {
    let mut v: Vec<String> = c
        .changes
        .iter()
        .map(|ch| String::from_utf8_lossy(&ch.path).into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_directory_of_thousands_finds_exactly_what_changed() {
    let env = Env::new();
    let root = env.root();
    write_file(root, b".gitignore", b"big/*.log\n", 0o644);
    for i in 0..FILES {
        let mode = if i % 7 == 0 { 0o755 } else { 0o644 };
        write_file(
            root,
            format!("big/f{i:05}").as_bytes(),
            format!("{i}\n").as_bytes(),
            mode,
        );
    }
    for i in 0..50 {
        write_file(
            root,
            format!("big/x{i}.log").as_bytes(),
            b"ignored\n",
            0o644,
        );
    }
    write_file(root, b"big/sub/inner", b"inner\n", 0o644);
    std::os::unix::fs::symlink("f00001", root.join("big/link")).unwrap();
    let fifo =
        std::ffi::CString::new(root.join("big/fifo").as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);

    let ws = env.open();
    let (first, _) = ws.snapshot("first", None).unwrap();
    // Every entry of big (files, link, fifo, sub) and sub's file, .gitignore and big at the
    // root; no ignored .log file.
    assert_eq!(
        first.stats.entries as usize,
        FILES + 3 + 1 + 2,
        "entries counted: {:?}",
        first.stats
    );
    let fifo_uncovered: Vec<String> = first
        .uncovered
        .iter()
        .map(|u| String::from_utf8_lossy(&u.path).into_owned())
        .collect();
    assert_eq!(fifo_uncovered, ["big/fifo"]);
    // (Gone before the tree is read below: reading a FIFO waits for a writer.)
    std::fs::remove_file(root.join("big/fifo")).unwrap();

    // Settle racy entries, then change a few files among the thousands.
    for _ in 0..3 {
        let (c, _) = ws.snapshot("settle", None).unwrap();
        if c.stats.files_hashed == 0 {
            break;
        }
    }
    let before = read_tree(root);
    let (settled, _) = ws.snapshot("settled", None).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_file(root, b"big/f00010", b"changed\n", 0o644);
    write_file(root, b"big/f05999", b"changed too\n", 0o644);
    std::fs::remove_file(root.join("big/f03000")).unwrap();
    write_file(root, b"big/new", b"new\n", 0o644);
    std::fs::set_permissions(
        root.join("big/f00020"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    write_file(root, b"big/y.log", b"ignored too\n", 0o644);
    let (c, _) = ws.snapshot("changed", None).unwrap();
    assert_eq!(
        paths(&c),
        [
            "big/f00010",
            "big/f00020",
            "big/f03000",
            "big/f05999",
            "big/new"
        ]
    );
    // The big directory is a fan-out, and the change stored a few of its parts, not all.
    let store = ws.store();
    let big = |root| {
        let t = store.read_tree(&root).unwrap();
        t.get(b"big").expect("big").id
    };
    let parts = store.tree_parts(&big(c.root)).unwrap();
    assert!(parts.len() > 2, "{} parts", parts.len());
    let before_parts = store.tree_parts(&big(settled.root)).unwrap();
    let new_parts = parts.iter().filter(|p| !before_parts.contains(p)).count();
    assert!(
        new_parts <= 4,
        "{new_parts} of {} parts new for 4 changed names",
        parts.len()
    );
    assert!(
        c.stats.new_objects <= 4 + 4 + 2,
        "4 files' contents, their parts, the fan-out and the root: {:?}",
        c.stats
    );

    // And nothing more the next time.
    let (c, _) = ws.snapshot("again", None).unwrap();
    assert!(c.changes.is_empty(), "{:?}", paths(&c));

    // Restored through the fan-out exactly, and the store is whole.
    ws.restore_tree(settled.root, &[], false).unwrap();
    // (An ignored file is not the restore's: it stays.)
    std::fs::remove_file(root.join("big/y.log")).unwrap();
    assert!(read_tree(root) == before, "restored as it was");
    let (report, lost) = ws.fsck().unwrap();
    assert!(
        report.problems.is_empty() && lost.is_empty(),
        "{report:?} {lost:?}"
    );
}

/// The tree of directory `d` in capture root `root`.
fn tree_of_d(ws: &rewind_core::Workspace, root: rewind_store::ObjectId) -> rewind_store::ObjectId {
    ws.store()
        .read_tree(&root)
        .unwrap()
        .get(b"d")
        .expect("d")
        .id
}

proptest::proptest! {
    // (Real files, two workspaces a round: few cases. `capture/parts.rs` has the fast
    // property test of the same thing in memory.)
    #![proptest_config(proptest::test_runner::Config::with_cases(2))]

    /// Captures that change a few entries of a huge directory take its unchanged parts from
    /// the previous tree (`capture/parts.rs`) instead of building them: the tree they make is
    /// the very tree a first capture of the same files in another workspace makes (same id),
    /// edit after edit: files rewritten, removed, added, made executable.
    #[test]
    fn reused_parts_make_the_tree_a_first_capture_makes(
        rounds in proptest::collection::vec(
            proptest::collection::vec((0usize..4500, 0u8..4), 1..8), 1..3),
    ) {
        let env = Env::new();
        let root = env.root();
        for i in 0..4500 {
            write_file(root, format!("d/f{i:04}").as_bytes(), format!("{i}\n").as_bytes(), 0o644);
        }
        let ws = env.open();
        ws.snapshot("first", None).unwrap();
        for (r, edits) in rounds.iter().enumerate() {
            for &(i, op) in edits {
                let f = root.join(format!("d/f{i:04}"));
                match op {
                    0 => write_file(root, format!("d/f{i:04}").as_bytes(), format!("{r} {i}\n").as_bytes(), 0o644),
                    1 => { let _ = std::fs::remove_file(&f); }
                    2 => write_file(root, format!("d/f{i:04}-new").as_bytes(), b"new\n", 0o644),
                    _ => { let _ = std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)); }
                }
            }
            let (c, _) = ws.snapshot("edited", None).unwrap();
            // The same files captured from nothing, in a workspace of their own.
            let fresh = Env::new();
            let copied = std::process::Command::new("cp")
                .arg("-a")
                .arg(root.join("d"))
                .arg(fresh.root())
                .status()
                .unwrap();
            proptest::prop_assert!(copied.success());
            let fresh_ws = fresh.open();
            let (f, _) = fresh_ws.snapshot("fresh", None).unwrap();
            proptest::prop_assert_eq!(tree_of_d(&ws, c.root), tree_of_d(&fresh_ws, f.root), "round {}", r);
        }
    }
}
