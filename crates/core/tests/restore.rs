//! Whole-tree restore: only differing paths are written, ignored and uncovered paths are never
//! touched, `.git` is never captured or written, and symlinks are never followed out.

use crate::common;

use std::os::unix::fs::MetadataExt;

use common::{read_tree, write_file, Env};
use rewind_core::{OpenOptions, Workspace};

fn mtime_ns(path: &std::path::Path) -> i64 {
    let m = std::fs::symlink_metadata(path).unwrap();
    m.mtime() * 1_000_000_000 + m.mtime_nsec()
}

#[test]
fn restore_of_20_paths_changes_the_mtime_of_exactly_those() {
    let env = Env::new();
    let root = env.root();
    for d in 0..20 {
        for f in 0..50 {
            write_file(
                root,
                format!("d{d:02}/f{f:02}.txt").as_bytes(),
                format!("{d} {f}\n").as_bytes(),
                0o644,
            );
        }
    }
    let ws = env.open();
    let (cap, _) = ws.snapshot("base", None).unwrap();
    let before = read_tree(root);
    // Age every mtime so a rewrite within the same clock tick would still show.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let edited: Vec<String> = (0..10).map(|i| format!("d{i:02}/f00.txt")).collect();
    let deleted: Vec<String> = (0..5).map(|i| format!("d1{i}/f01.txt")).collect();
    let created: Vec<String> = (0..5).map(|i| format!("d0{i}/new{i}.txt")).collect();
    for e in &edited {
        std::fs::write(root.join(e), b"edited\n").unwrap();
    }
    for d in &deleted {
        std::fs::remove_file(root.join(d)).unwrap();
    }
    for c in &created {
        std::fs::write(root.join(c), b"created\n").unwrap();
    }
    let mut mtimes = std::collections::HashMap::new();
    for (rel, node) in read_tree(root) {
        if matches!(node, common::Node::File { .. }) {
            mtimes.insert(rel.clone(), mtime_ns(&common::p(root, &rel)));
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(20));

    let dry = ws.restore_tree(cap.root, &[], true).unwrap();
    assert_eq!(
        dry.steps.len(),
        20,
        "{:?}",
        dry.steps
            .iter()
            .map(|s| String::from_utf8_lossy(&s.path))
            .collect::<Vec<_>>()
    );
    let out = ws.restore_tree(cap.root, &[], false).unwrap();
    assert_eq!(out.steps.len(), 20);
    assert!(out.applied);
    assert_eq!(read_tree(root), before);

    let touched: std::collections::HashSet<Vec<u8>> = edited
        .iter()
        .chain(&deleted)
        .chain(&created)
        .map(|s| s.as_bytes().to_vec())
        .collect();
    let mut changed = Vec::new();
    for (rel, node) in read_tree(root) {
        if !matches!(node, common::Node::File { .. }) {
            continue;
        }
        let now = mtime_ns(&common::p(root, &rel));
        if mtimes.get(&rel) != Some(&now) {
            changed.push(rel);
        }
    }
    changed.sort();
    let mut expect: Vec<Vec<u8>> = edited
        .iter()
        .chain(&deleted)
        .map(|s| s.as_bytes().to_vec())
        .collect();
    expect.sort();
    assert_eq!(
        changed, expect,
        "only edited and re-created files get a new mtime"
    );
    assert!(changed.iter().all(|c| touched.contains(c)));
}

#[test]
fn ignored_and_git_paths_are_neither_captured_nor_touched() {
    let env = Env::new();
    let root = env.root();
    write_file(root, b".gitignore", b"*.log\nbuild/\n", 0o644);
    write_file(root, b"src/a.rs", b"fn a() {}\n", 0o644);
    write_file(root, b"src/.rewindignore", b"secret.txt\n", 0o644);
    write_file(root, b"src/secret.txt", b"s1\n", 0o644);
    write_file(root, b"app.log", b"log1\n", 0o644);
    write_file(root, b"build/out.bin", b"bin1\n", 0o644);
    write_file(root, b".git/config", b"[core]\n", 0o644);
    write_file(root, b"nested/.git/HEAD", b"ref\n", 0o644);
    write_file(root, b"nested/code.c", b"int x;\n", 0o644);
    let ws = env.open();
    let (cap, _) = ws.snapshot("base", None).unwrap();
    let captured: Vec<String> = rewind_core::restore::flatten(ws.store(), cap.root)
        .unwrap()
        .into_iter()
        .map(|(path, _)| String::from_utf8_lossy(&path).into_owned())
        .collect();
    for absent in ["app.log", "build", "src/secret.txt", ".git", "nested/.git"] {
        assert!(
            !captured
                .iter()
                .any(|c| c == absent || c.starts_with(&format!("{absent}/"))),
            "{absent} captured: {captured:?}"
        );
    }
    assert!(captured.contains(&"nested/code.c".to_string()));

    // Change everything; restore must revert only captured paths.
    for (f, data) in [
        ("app.log", "log2\n"),
        ("build/out.bin", "bin2\n"),
        ("src/secret.txt", "s2\n"),
        (".git/config", "[x]\n"),
        ("nested/.git/HEAD", "ref2\n"),
        ("src/a.rs", "changed\n"),
    ] {
        std::fs::write(root.join(f), data).unwrap();
    }
    std::fs::remove_dir_all(root.join("nested")).ok();
    std::fs::create_dir_all(root.join("nested/.git")).unwrap();
    std::fs::write(root.join("nested/.git/HEAD"), "ref3\n").unwrap();
    ws.restore_tree(cap.root, &[], false).unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("src/a.rs")).unwrap(),
        "fn a() {}\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("nested/code.c")).unwrap(),
        "int x;\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("app.log")).unwrap(),
        "log2\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("build/out.bin")).unwrap(),
        "bin2\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("src/secret.txt")).unwrap(),
        "s2\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join(".git/config")).unwrap(),
        "[x]\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("nested/.git/HEAD")).unwrap(),
        "ref3\n"
    );
}

#[test]
fn a_directory_holding_ignored_files_is_kept_not_deleted() {
    let env = Env::new();
    let root = env.root();
    write_file(root, b".gitignore", b"*.tmp\n", 0o644);
    let ws = env.open();
    let (empty, _) = ws.snapshot("base", None).unwrap();
    write_file(root, b"work/a.txt", b"a", 0o644);
    write_file(root, b"work/cache.tmp", b"keep me", 0o644);
    let out = ws.restore_tree(empty.root, &[], false).unwrap();
    assert!(!root.join("work/a.txt").exists());
    assert_eq!(
        std::fs::read(root.join("work/cache.tmp")).unwrap(),
        b"keep me"
    );
    assert_eq!(out.kept.len(), 1);
}

#[test]
fn uncovered_files_are_reported_and_never_deleted() {
    let env = Env::new();
    let root = env.root();
    write_file(
        root,
        b".rewind.toml",
        b"[capture]\nmax_file_size = 100\n",
        0o644,
    );
    write_file(root, b"small.txt", b"small", 0o644);
    let ws = env.open();
    let (base, _) = ws.snapshot("base", None).unwrap();
    write_file(root, b"big.bin", &[7u8; 1000], 0o644);
    let (cap, _) = ws.snapshot("after", None).unwrap();
    assert_eq!(cap.uncovered.len(), 1);
    assert_eq!(cap.uncovered[0].path, b"big.bin");
    assert!(cap.uncovered[0].reason.contains("max_file_size"));
    assert_eq!(ws.status().unwrap().uncovered.len(), 1);
    let out = ws.restore_tree(base.root, &[], false).unwrap();
    assert_eq!(out.skipped.len(), 1);
    assert_eq!(
        std::fs::read(root.join("big.bin")).unwrap(),
        vec![7u8; 1000]
    );
}

#[test]
fn scoped_restore_touches_only_the_given_paths() {
    let env = Env::new();
    let root = env.root();
    write_file(root, b"a/x", b"x1", 0o644);
    write_file(root, b"b/y", b"y1", 0o644);
    let ws = env.open();
    let (base, _) = ws.snapshot("base", None).unwrap();
    std::fs::write(root.join("a/x"), b"x2").unwrap();
    std::fs::write(root.join("b/y"), b"y2").unwrap();
    std::fs::remove_dir_all(root.join("a")).unwrap();
    ws.restore_tree(base.root, &[b"a".to_vec()], false).unwrap();
    assert_eq!(std::fs::read(root.join("a/x")).unwrap(), b"x1");
    assert_eq!(std::fs::read(root.join("b/y")).unwrap(), b"y2");
}

#[test]
fn an_unchanged_tree_is_recaptured_without_hashing() {
    let env = Env::new();
    for i in 0..200 {
        write_file(env.root(), format!("f{i}").as_bytes(), b"same", 0o644);
    }
    let ws = env.open();
    ws.snapshot("one", None).unwrap();
    // Files written in the same tick as the state file are racy and re-hashed once.
    std::thread::sleep(std::time::Duration::from_millis(20));
    ws.snapshot("two", None).unwrap();
    let (cap, _) = ws.snapshot("three", None).unwrap();
    assert_eq!(cap.stats.files_hashed, 0);
    assert!(cap.changes.is_empty());
    // Same-size, same-second edit is still caught by the racy rule or by ctime/mtime ns.
    std::fs::write(env.root().join("f7"), b"diff").unwrap();
    let (cap, _) = ws.snapshot("four", None).unwrap();
    assert_eq!(cap.changes.len(), 1);
    assert_eq!(cap.stats.files_hashed, 1);
}

#[test]
fn workspace_identity_is_checked() {
    let env = Env::new();
    let home = env.home.path().to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    std::fs::create_dir(&root).unwrap();
    let opts = OpenOptions {
        force: false,
        home: Some(home.clone()),
    };
    let id = Workspace::open(&root, &opts).unwrap().id().to_string();
    assert_eq!(Workspace::open(&root, &opts).unwrap().id(), id);
    std::fs::remove_dir(&root).unwrap();
    std::fs::create_dir(&root).unwrap();
    // Refused, and the error says what resolves it: registering anew, forced (each front
    // words that its own way: `rewind init --force` on the command line).
    let err = Workspace::open(&root, &opts).err().unwrap();
    assert_eq!(
        err.remedy_of(),
        Some(&rewind_core::Remedy::Init { force: true }),
        "{err}"
    );
    assert!(err.to_string().contains("replaced"), "{err}");
    let forced = Workspace::open(
        &root,
        &OpenOptions {
            force: true,
            home: Some(home.clone()),
        },
    )
    .unwrap();
    assert_ne!(forced.id(), id);
    // State inside the workspace is refused.
    let inner = OpenOptions {
        force: false,
        home: Some(root.join("state")),
    };
    let err = Workspace::open(&root, &inner).err().unwrap().to_string();
    assert!(err.contains("inside the workspace"), "{err}");
    // `/` is refused without --force.
    let err = Workspace::open(std::path::Path::new("/"), &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("refusing"), "{err}");
}
