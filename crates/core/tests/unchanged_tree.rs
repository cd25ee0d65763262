//! A capture that finds the tree exactly as its stat cache has it takes a short cut (no
//! hashing, no trees, no new cache, no diff). These check that the short cut never hides a
//! change the full path would record.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{write_file, Env};
use rewind_core::Workspace;

/// Sets every file's and directory's times an hour back, so nothing is racy against the state
/// file the next capture writes (racy entries are re-hashed and would take the full path).
fn age(root: &std::path::Path) {
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for e in walkdir(root) {
        let f = std::fs::File::open(&e).unwrap();
        f.set_times(
            std::fs::FileTimes::new()
                .set_accessed(old)
                .set_modified(old),
        )
        .unwrap();
    }
}

fn walkdir(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![root.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        if out[i].is_dir() && !out[i].is_symlink() {
            for e in std::fs::read_dir(&out[i]).unwrap() {
                let p = e.unwrap().path();
                if !p.is_symlink() {
                    out.push(p);
                }
            }
        }
        i += 1;
    }
    out
}

/// Captures until a capture hashes nothing (the racy entries of the one before settled).
fn settled_root(ws: &Workspace) -> rewind_store::ObjectId {
    for _ in 0..3 {
        let (c, _) = ws.snapshot("s", None).unwrap();
        if c.stats.files_hashed == 0 {
            assert!(c.changes.is_empty());
            return c.root;
        }
    }
    panic!("captures kept hashing files");
}

#[test]
fn the_short_cut_keeps_the_tree_and_misses_nothing() {
    let env = Env::new();
    let root = env.root();
    write_file(root, b"a/x", b"x", 0o644);
    write_file(root, b"a/b/y", b"y", 0o755);
    write_file(root, b"z", b"z", 0o600);
    std::os::unix::fs::symlink("a/x", root.join("l")).unwrap();
    age(root);
    let ws = env.open();
    let (first, _) = ws.snapshot("first", None).unwrap();
    let r0 = settled_root(&ws);
    assert_eq!(r0, first.root);
    // Nothing changed: the same tree, every entry counted.
    let (c, _) = ws.snapshot("again", None).unwrap();
    assert_eq!(c.root, r0);
    assert!(c.changes.is_empty());
    assert_eq!(c.stats.entries, 6, "'' has a, l, z; a has b, x; a/b has y");
    assert_eq!(c.stats.files_hashed, 0);

    // A directory's mode alone changed: no file's stat moved, the tree did.
    std::fs::set_permissions(root.join("a/b"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let (c, _) = ws.snapshot("chmod", None).unwrap();
    assert_ne!(c.root, r0, "a directory's new mode is a new tree");
    let r1 = settled_root(&ws);
    assert_eq!(r1, c.root);

    // A directory renamed: its files keep their stat, the paths changed.
    std::fs::rename(root.join("a/b"), root.join("a/c")).unwrap();
    let (c, _) = ws.snapshot("rename", None).unwrap();
    assert_ne!(c.root, r1);
    let paths: Vec<&[u8]> = c.changes.iter().map(|ch| ch.path.as_slice()).collect();
    assert!(
        paths.contains(&&b"a/b/y"[..]) && paths.contains(&&b"a/c/y"[..]),
        "{paths:?}"
    );
    let r2 = settled_root(&ws);

    // An empty directory appeared (no file changed anywhere).
    std::fs::create_dir(root.join("empty")).unwrap();
    let (c, _) = ws.snapshot("mkdir", None).unwrap();
    assert_ne!(c.root, r2);
}
