//! Helpers that the integration tests of several crates share. A dev-dependency only: nothing
//! here is part of Rewind. What only one crate's tests use stays in that crate's
//! `tests/common/`.

pub mod reflink;
pub mod s3;
pub mod tree;

use std::path::Path;

/// Tests that need bubblewrap fail without it (never pass silently): call this first.
pub fn require_bwrap() {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("bwrap").is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "bwrap not found in PATH: install bubblewrap (apt-get install -y bubblewrap) to run the \
         sandbox tests"
    );
}

/// For a crate whose integration tests are one binary (`tests/main.rs`, with `autotests =
/// false`): every `.rs` file and every directory holding one (`common/`) of `tests/` is
/// declared as a module of `main.rs`, so none is silently left uncompiled and unrun.
/// Directories of data only (fixtures, scripts) are not modules.
pub fn assert_every_test_file_is_a_module(tests: &Path) {
    let main = std::fs::read_to_string(tests.join("main.rs")).unwrap();
    let declared: Vec<&str> = main
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(tests).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let holds_rust = |dir: &Path| {
            std::fs::read_dir(dir).is_ok_and(|mut d| {
                d.any(|e| e.is_ok_and(|e| e.path().extension().is_some_and(|x| x == "rs")))
            })
        };
        let module = if path.is_dir() {
            if !holds_rust(&path) {
                continue;
            }
            name
        } else if let Some(stem) = name.strip_suffix(".rs") {
            stem.to_string()
        } else {
            continue;
        };
        if module != "main" && !declared.contains(&module.as_str()) {
            missing.push(module);
        }
    }
    assert!(
        missing.is_empty(),
        "not declared in {}: {missing:?} (add `mod NAME;` there)",
        tests.join("main.rs").display()
    );
}
