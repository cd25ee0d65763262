//! Helpers shared by the core integration tests: build trees on disk and read them back
//! exactly (kind, mode, bytes, link text), never following symlinks.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use rewind_core::{OpenOptions, Workspace};

pub use rewind_testutil::tree::{p, Node, Tree};

/// Everything under `root` except `.git`, keyed by relative path bytes.
pub fn read_tree(root: &Path) -> Tree {
    rewind_testutil::tree::read_tree_except_git(root)
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

/// The opaque epoch a shell command of step `step` opens (owned by this process).
pub fn shell_epoch(step: usize) -> rewind_core::EpochSpec {
    rewind_core::EpochSpec {
        tool: Some("bash".into()),
        tool_call: Some(format!("call-{step}")),
        paths: Vec::new(),
        process_owned: true,
        owner_pid: None,
        note: None,
    }
}
