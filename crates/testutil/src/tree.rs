//! A directory tree read back exactly (kind, mode, bytes, link text, and optionally every
//! mtime), never following symlinks, to compare what is on disk before and after.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { mode: u32, data: Vec<u8> },
    Symlink(Vec<u8>),
    Dir { mode: u32 },
}

/// Relative path bytes → what is there.
pub type Tree = BTreeMap<Vec<u8>, Node>;
/// Relative path bytes → mtime in nanoseconds.
pub type Mtimes = BTreeMap<Vec<u8>, i64>;

/// Everything under `root`, keyed by relative path bytes.
pub fn read_tree(root: &Path) -> Tree {
    walk(root, false).0
}

/// Everything under `root` except `.git` directories (at any depth) and what they hold.
pub fn read_tree_except_git(root: &Path) -> Tree {
    walk(root, true).0
}

/// The tree and the mtime (ns) of every entry in it, directories and symlinks included.
pub fn read_tree_mtimes(root: &Path) -> (Tree, Mtimes) {
    walk(root, false)
}

fn walk(root: &Path, skip_git: bool) -> (Tree, Mtimes) {
    let mut tree = BTreeMap::new();
    let mut mtimes = BTreeMap::new();
    let mut stack = vec![(root.to_path_buf(), Vec::new())];
    while let Some((abs, rel)) = stack.pop() {
        for entry in std::fs::read_dir(&abs).unwrap() {
            let name = entry.unwrap().file_name();
            if skip_git && name.as_bytes() == b".git" {
                continue;
            }
            let mut r = rel.clone();
            if !r.is_empty() {
                r.push(b'/');
            }
            r.extend_from_slice(name.as_bytes());
            let path = abs.join(&name);
            let m = std::fs::symlink_metadata(&path).unwrap();
            mtimes.insert(r.clone(), m.mtime() * 1_000_000_000 + m.mtime_nsec());
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                tree.insert(r, Node::Symlink(target.as_os_str().as_bytes().to_vec()));
            } else if m.is_dir() {
                tree.insert(r.clone(), Node::Dir { mode });
                stack.push((path, r));
            } else {
                let data = std::fs::read(&path).unwrap();
                tree.insert(r, Node::File { mode, data });
            }
        }
    }
    (tree, mtimes)
}

/// A readable difference between two trees (for assertion messages).
pub fn tree_diff(a: &Tree, b: &Tree) -> String {
    let mut out = String::new();
    for (k, v) in a {
        match b.get(k) {
            None => out += &format!("  only left:  {} {}\n", show(k), brief(v)),
            Some(w) if w != v => {
                out += &format!("  differs:    {} {} -> {}\n", show(k), brief(v), brief(w))
            }
            _ => {}
        }
    }
    for (k, v) in b {
        if !a.contains_key(k) {
            out += &format!("  only right: {} {}\n", show(k), brief(v));
        }
    }
    out
}

fn brief(n: &Node) -> String {
    match n {
        Node::File { mode, data } => format!(
            "file {mode:o} {:?}",
            String::from_utf8_lossy(&data[..data.len().min(40)])
        ),
        Node::Symlink(t) => format!("symlink -> {}", String::from_utf8_lossy(t)),
        Node::Dir { mode } => format!("dir {mode:o}"),
    }
}

/// A path's bytes as text, for messages.
pub fn show(p: &[u8]) -> String {
    String::from_utf8_lossy(p).into_owned()
}

/// Asserts that two trees are equal, listing the differences if not.
pub fn assert_tree_eq(actual: &Tree, expected: &Tree, what: &str) {
    assert!(
        actual == expected,
        "{what}: tree differs (left = actual, right = expected):\n{}",
        tree_diff(actual, expected)
    );
}

/// `root` joined with a relative path given as bytes.
pub fn p(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}
