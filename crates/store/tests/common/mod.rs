//! Helpers shared by the integration tests: real stores in temp dirs, deterministic data.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};

use rewind_store::{Store, StoreConfig};

pub struct TestStore {
    pub dir: tempfile::TempDir,
    pub store: Store,
}

impl TestStore {
    pub fn new() -> TestStore {
        TestStore::with_config(StoreConfig::default())
    }

    pub fn with_config(config: StoreConfig) -> TestStore {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = open_in(dir.path(), config);
        TestStore { dir, store }
    }

    /// Another `Store` on the same directory and database, as a second process would open it.
    pub fn reopen(&self) -> Store {
        open_in(self.dir.path(), StoreConfig::default())
    }

    pub fn packs_dir(&self) -> PathBuf {
        self.dir.path().join("packs")
    }

    pub fn tmp_files(&self) -> Vec<PathBuf> {
        files_in(&self.packs_dir().join("tmp"))
    }

    /// Every pack file in place.
    pub fn pack_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for d in std::fs::read_dir(self.packs_dir()).expect("list packs") {
            let d = d.expect("entry").path();
            if d.file_name().is_some_and(|n| n != "tmp") && d.is_dir() {
                out.extend(files_in(&d));
            }
        }
        out.sort();
        out
    }
}

pub fn open_in(dir: &Path, config: StoreConfig) -> Store {
    Store::open(&dir.join("packs"), &dir.join("meta.sqlite"), config).expect("open store")
}

pub fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list dir")
        .map(|e| e.expect("entry").path())
        .collect();
    v.sort();
    v
}

/// `len` pseudo-random (incompressible) bytes, determined by `seed`.
pub fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    random_stream(seed).fill(&mut v);
    v
}

/// An endless stream of pseudo-random bytes; `.take(n)` it. Generated lazily, so a test can
/// store gigabytes without holding them.
pub fn random_stream(seed: u64) -> blake3::OutputReader {
    blake3::Hasher::new()
        .update(b"rewind-store test data")
        .update(&seed.to_le_bytes())
        .finalize_xof()
}

/// `len` bytes of compressible text.
pub fn text(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut i = seed;
    while out.len() < len {
        out.extend_from_slice(format!("line {i}: let x = compute(x, {});\n", i % 17).as_bytes());
        i += 1;
    }
    out.truncate(len);
    out
}

/// Hands out `data` in reads of at most `step` bytes, like a pipe would.
pub struct Dribble<'a> {
    pub data: &'a [u8],
    pub step: usize,
}

impl Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.step).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Finds the object header of `id` in a pack file: the first occurrence of the id bytes
/// (the trailer repeats them later). Returns the offset of the object's stored bytes.
pub fn stored_bytes_offset(pack: &[u8], id: &rewind_store::ObjectId) -> Option<usize> {
    pack.windows(32).position(|w| w == id.0).map(|pos| pos + 32)
}
