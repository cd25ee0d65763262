//! Helpers shared by the core integration tests: build trees on disk and read them back
//! exactly (kind, mode, bytes, link text), never following symlinks.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use rewind_core::{OpenOptions, Workspace};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    File { mode: u32, data: Vec<u8> },
    Symlink(Vec<u8>),
    Dir { mode: u32 },
}

/// Everything under `root` except `.git`, keyed by relative path bytes.
pub fn read_tree(root: &Path) -> BTreeMap<Vec<u8>, Node> {
    let mut out = BTreeMap::new();
    fn go(abs: &Path, rel: &[u8], out: &mut BTreeMap<Vec<u8>, Node>) {
        for e in std::fs::read_dir(abs).unwrap() {
            let e = e.unwrap();
            let name = e.file_name();
            if name.as_bytes() == b".git" {
                continue;
            }
            let mut r = rel.to_vec();
            if !r.is_empty() {
                r.push(b'/');
            }
            r.extend_from_slice(name.as_bytes());
            let m = std::fs::symlink_metadata(e.path()).unwrap();
            let mode = m.mode() & 0o7777;
            if m.file_type().is_symlink() {
                out.insert(
                    r,
                    Node::Symlink(
                        std::fs::read_link(e.path())
                            .unwrap()
                            .as_os_str()
                            .as_bytes()
                            .to_vec(),
                    ),
                );
            } else if m.is_dir() {
                out.insert(r.clone(), Node::Dir { mode });
                go(&e.path(), &r, out);
            } else {
                out.insert(
                    r,
                    Node::File {
                        mode,
                        data: std::fs::read(e.path()).unwrap(),
                    },
                );
            }
        }
    }
    go(root, b"", &mut out);
    out
}

pub fn p(root: &Path, rel: &[u8]) -> PathBuf {
    root.join(OsStr::from_bytes(rel))
}

pub fn write_file(root: &Path, rel: &[u8], data: &[u8], mode: u32) {
    let path = p(root, rel);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, data).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub struct Env {
    pub home: tempfile::TempDir,
    pub root: tempfile::TempDir,
    pub outside: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
            root: tempfile::tempdir().unwrap(),
            outside: tempfile::tempdir().unwrap(),
        }
    }

    pub fn open(&self) -> Workspace {
        Workspace::open(
            self.root.path(),
            &OpenOptions {
                force: false,
                home: Some(self.home.path().to_path_buf()),
            },
        )
        .unwrap()
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }
}
