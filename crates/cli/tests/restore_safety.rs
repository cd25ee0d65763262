//! A restore never deletes or overwrites what Rewind never captured (its bytes are not in the
//! store), through the real binary on real files: a file that was ignored until a turn
//! un-ignored it, a file over the size cap until the cap was raised, a directory that holds
//! such a file. Plain restores, `--force`, `--all` and `undo` alike; dry runs say so.

use crate::common;

use crate::common::rewind::*;
use common::{text, Env};

/// The paths a report lists as not restorable (skipped) or kept.
fn not_restored(v: &serde_json::Value) -> Vec<String> {
    let mut out: Vec<String> = ["skipped", "kept"]
        .iter()
        .flat_map(|k| v[k].as_array().cloned().unwrap_or_default())
        .map(|s| s["path"].as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

fn step_paths(v: &serde_json::Value) -> Vec<String> {
    let mut p: Vec<String> = steps(v).into_iter().map(|s| s.1).collect();
    p.sort();
    p
}

/// `.env` is ignored and holds a secret Rewind never stored; a turn un-ignores it and appends
/// to it. Rewinding the turn restores `.gitignore` but leaves `.env` as it is, with every byte.
#[test]
fn a_file_a_turn_un_ignored_keeps_its_bytes_after_a_rewind() {
    for how in [
        &["restore", "m0"][..],
        &["restore", "m0", "--force"],
        &["undo"],
    ] {
        let env = Env::new();
        let root = env.root();
        write(root, ".gitignore", b".env\n");
        write(root, ".env", b"SECRET=1\n");
        write(root, "src.txt", b"code\n");
        init(&env);
        checkpoint(&env, "A", "m0");
        sh(
            &env,
            "A",
            "printf '' > .gitignore; echo SECRET=2 >> .env; echo x > src.txt",
        );

        let mut dry = how.to_vec();
        dry.push("--dry-run");
        let v = json(&env, "A", &dry, 0);
        assert_eq!(step_paths(&v), [".gitignore", "src.txt"], "{how:?}: {v}");
        assert_eq!(not_restored(&v), [".env"], "{how:?}: {v}");

        let v = json(&env, "A", how, 0);
        assert_eq!(step_paths(&v), [".gitignore", "src.txt"], "{how:?}: {v}");
        assert_eq!(not_restored(&v), [".env"], "{how:?}: {v}");
        assert_eq!(read_str(root, ".env"), "SECRET=1\nSECRET=2\n", "{how:?}");
        assert_eq!(read_str(root, ".gitignore"), ".env\n");
        assert_eq!(read_str(root, "src.txt"), "code\n");
    }
}

/// `--all` to a checkpoint taken while `.env` was ignored: the whole tree goes back, except
/// what that checkpoint never held the bytes of.
#[test]
fn restore_all_leaves_a_file_it_never_captured() {
    let env = Env::new();
    let root = env.root();
    write(root, ".gitignore", b".env\n");
    write(root, ".env", b"SECRET=1\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "printf '' > .gitignore; echo made > new.txt");
    let v = json(&env, "A", &["restore", "m0", "--all"], 0);
    assert_eq!(step_paths(&v), [".gitignore", "new.txt"], "{v}");
    assert_eq!(read_str(root, ".env"), "SECRET=1\n");
    assert!(!root.join("new.txt").exists());
}

/// A file over `capture.max_file_size` is uncovered; a turn raises the cap and edits it.
/// Rewinding the turn cannot put back bytes it never had: the file stays as it is.
#[test]
fn a_file_over_the_cap_until_a_turn_raised_it_is_left_alone() {
    let env = Env::new();
    let root = env.root();
    write(root, ".rewind.toml", b"[capture]\nmax_file_size = \"1K\"\n");
    write(root, "big.bin", &vec![b'a'; 4096]);
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(
        &env,
        "A",
        "printf '[capture]\\nmax_file_size = \"1M\"\\n' > .rewind.toml; echo tail >> big.bin",
    );
    let v = json(&env, "A", &["restore", "m0", "--dry-run"], 0);
    assert_eq!(step_paths(&v), [".rewind.toml"], "{v}");
    assert_eq!(not_restored(&v), ["big.bin"], "{v}");
    let o = run_s(&env, "A", &["restore", "m0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(read(root, "big.bin").len(), 4096 + 5);
}

/// `build/` is ignored and holds `keep.o`; a turn un-ignores it and adds `build/new.txt`.
/// Rewinding removes what the turn created and keeps the directory with `keep.o`.
#[test]
fn a_directory_holding_an_uncaptured_file_is_not_removed() {
    let env = Env::new();
    let root = env.root();
    write(root, ".gitignore", b"build/\n");
    write(root, "build/keep.o", b"object\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(
        &env,
        "A",
        "printf '' > .gitignore; echo new > build/new.txt",
    );
    let v = json(&env, "A", &["restore", "m0"], 0);
    assert_eq!(step_paths(&v), [".gitignore", "build/new.txt"], "{v}");
    assert_eq!(read_str(root, "build/keep.o"), "object\n");
    assert!(!root.join("build/new.txt").exists());
    assert_eq!(not_restored(&v), ["build", "build/keep.o"], "{v}");
}
