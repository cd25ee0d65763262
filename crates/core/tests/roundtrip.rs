//! Property test: random trees (files, executables, symlinks pointing anywhere, empty
//! directories, odd names and modes) → capture → random mutations → restore → the tree is
//! byte-, mode- and kind-identical to the original, and nothing outside the root changed.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{p, read_tree, write_file, Env, Node};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Spec {
    File(Vec<u8>, u32),
    Link(Vec<u8>),
    Dir(u32, Vec<(Vec<u8>, Spec)>),
}

fn name() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        "[a-z]{1,6}".prop_map(|s| s.into_bytes()),
        Just(b"with space".to_vec()),
        Just(b"caf\xc3\xa9".to_vec()),
        Just(b"bad\xff\xfename".to_vec()),
        Just(b".hidden".to_vec()),
        Just(b"-dash".to_vec()),
        Just(b"crlf\r".to_vec()),
    ]
}

fn content() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..300),
        Just(b"line one\r\nline two\r\n".to_vec()),
        Just(b"no trailing newline".to_vec()),
    ]
}

fn file_mode() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0o644),
        Just(0o755),
        Just(0o600),
        Just(0o700),
        Just(0o444),
        Just(0o4755),
        Just(0o640)
    ]
}

fn link_target() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"../outside-target".to_vec()),
        Just(b"/etc/passwd".to_vec()),
        Just(b"dangling/nowhere".to_vec()),
        "[a-z]{1,4}".prop_map(|s| s.into_bytes()),
        Just(b"/".to_vec()),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    let leaf = prop_oneof![
        4 => (content(), file_mode()).prop_map(|(c, m)| Spec::File(c, m)),
        1 => link_target().prop_map(Spec::Link),
        1 => prop_oneof![Just(0o755u32), Just(0o700), Just(0o555)].prop_map(|m| Spec::Dir(m, vec![])),
    ];
    leaf.prop_recursive(3, 40, 6, |inner| {
        (
            prop_oneof![Just(0o755u32), Just(0o750)],
            proptest::collection::vec((name(), inner), 0..6),
        )
            .prop_map(|(m, kids)| Spec::Dir(m, kids))
    })
}

fn build(root: &std::path::Path, rel: &[u8], spec: &Spec) {
    match spec {
        Spec::File(data, mode) => write_file(root, rel, data, *mode),
        Spec::Link(target) => {
            std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(target), p(root, rel)).unwrap();
        }
        Spec::Dir(mode, kids) => {
            if !rel.is_empty() {
                std::fs::create_dir(p(root, rel)).unwrap();
            }
            let mut seen = std::collections::HashSet::new();
            for (n, k) in kids {
                if seen.insert(n.clone()) {
                    let mut child = rel.to_vec();
                    if !child.is_empty() {
                        child.push(b'/');
                    }
                    child.extend_from_slice(n);
                    build(root, &child, k);
                }
            }
            if !rel.is_empty() {
                std::fs::set_permissions(p(root, rel), std::fs::Permissions::from_mode(*mode))
                    .unwrap();
            }
        }
    }
}

use std::os::unix::ffi::OsStrExt;

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize),
    Overwrite(usize, Vec<u8>),
    Chmod(usize, u32),
    /// Replace the path with a symlink to the directory outside the root.
    ToOutsideLink(usize),
    /// Replace the path with a directory holding a file.
    ToDir(usize),
    Create(Vec<u8>, Vec<u8>),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), content()).prop_map(|(i, c)| Mutation::Overwrite(i, c)),
        (any::<usize>(), file_mode()).prop_map(|(i, m)| Mutation::Chmod(i, m)),
        any::<usize>().prop_map(Mutation::ToOutsideLink),
        any::<usize>().prop_map(Mutation::ToDir),
        (name(), content()).prop_map(|(n, c)| Mutation::Create(n, c)),
    ]
}

fn remove_any(path: &std::path::Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            make_writable(path);
            std::fs::remove_dir_all(path).unwrap()
        }
        Ok(_) => std::fs::remove_file(path).unwrap(),
        Err(_) => {}
    }
}

fn make_writable(path: &std::path::Path) {
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
}

fn mutate(env: &Env, muts: &[Mutation]) {
    let root = env.root();
    for m in muts {
        let paths: Vec<Vec<u8>> = read_tree(root).keys().cloned().collect();
        let pick = |i: &usize| paths.get(i % paths.len().max(1)).cloned();
        match m {
            Mutation::Delete(i) => {
                if let Some(r) = pick(i) {
                    remove_any(&p(root, &r));
                }
            }
            Mutation::Overwrite(i, data) => {
                if let Some(r) = pick(i) {
                    remove_any(&p(root, &r));
                    std::fs::write(p(root, &r), data).unwrap();
                }
            }
            Mutation::Chmod(i, mode) => {
                if let Some(r) = pick(i) {
                    let path = p(root, &r);
                    if !std::fs::symlink_metadata(&path)
                        .unwrap()
                        .file_type()
                        .is_symlink()
                    {
                        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(*mode))
                            .unwrap();
                    }
                }
            }
            Mutation::ToOutsideLink(i) => {
                if let Some(r) = pick(i) {
                    remove_any(&p(root, &r));
                    std::os::unix::fs::symlink(env.outside.path(), p(root, &r)).unwrap();
                }
            }
            Mutation::ToDir(i) => {
                if let Some(r) = pick(i) {
                    remove_any(&p(root, &r));
                    std::fs::create_dir(p(root, &r)).unwrap();
                    std::fs::write(p(root, &r).join("inner"), b"new").unwrap();
                }
            }
            Mutation::Create(n, data) => {
                let path = root.join(std::ffi::OsStr::from_bytes(n));
                if std::fs::symlink_metadata(&path).is_err() {
                    std::fs::write(path, data).unwrap();
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn capture_mutate_restore_is_exact(spec in spec(), muts in proptest::collection::vec(mutation(), 1..8)) {
        let env = Env::new();
        std::fs::write(env.outside.path().join("sentinel"), b"outside").unwrap();
        let root_spec = match spec { Spec::Dir(_, kids) => Spec::Dir(0o755, kids), other => Spec::Dir(0o755, vec![(b"only".to_vec(), other)]) };
        build(env.root(), b"", &root_spec);
        let original = read_tree(env.root());
        let ws = env.open();
        let (cap, _) = ws.snapshot("test", None).unwrap();
        prop_assert!(cap.uncovered.is_empty(), "{:?}", cap.uncovered);

        mutate(&env, &muts);
        // Restore directly over the mutated tree, and again (idempotent: nothing left to do).
        let out = ws.restore_tree(cap.root, &[], false).unwrap();
        prop_assert!(out.skipped.is_empty(), "{:?}", out.skipped);
        prop_assert_eq!(read_tree(env.root()), original.clone());
        let again = ws.restore_tree(cap.root, &[], true).unwrap();
        prop_assert!(again.steps.is_empty(), "second restore planned {:?}", again.steps);

        // Nothing outside the root was touched.
        let outside = read_tree(env.outside.path());
        prop_assert_eq!(outside.len(), 1);
        prop_assert_eq!(outside.get(&b"sentinel"[..]), Some(&Node::File { mode: 0o644, data: b"outside".to_vec() }));
        // Leave the temp dirs deletable.
        for (rel, node) in read_tree(env.root()) {
            if let Node::Dir { .. } = node { make_writable(&p(env.root(), &rel)); }
        }
    }
}
