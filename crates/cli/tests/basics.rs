//! The foundation commands through the real binary: init, status, fsck, exit codes, JSON.

use crate::common;

use common::{text, Env};

#[test]
fn init_status_fsck_round() {
    let env = Env::new();
    std::fs::create_dir(env.root().join("src")).unwrap();
    std::fs::write(env.root().join("src/main.rs"), b"fn main() {}\n").unwrap();
    let o = env.run(&["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let id = stdout.lines().last().unwrap().trim().to_string();
    assert_eq!(id.len(), 32, "the workspace id is the last line: {stdout}");

    let o = env.run(&["--json", "status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["id"], id);
    assert!(v["store"]["objects"].as_u64().unwrap() >= 3);

    let o = env.run(&["fsck"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = env.run(&["--json", "fsck"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true);
    // Nothing of Rewind's lands in the workspace.
    let names: Vec<_> = std::fs::read_dir(env.root())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("src")]);
}

#[test]
fn usage_errors_exit_2_and_bad_roots_exit_1() {
    let env = Env::new();
    assert_eq!(env.run(&["no-such-command"]).status.code(), Some(2));
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rewind"))
        .env("REWIND_HOME", env.home.path())
        .args(["-C", "/", "status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("rewind: ") && err.contains("--force"),
        "{err}"
    );
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rewind"))
        .env("REWIND_HOME", env.home.path())
        .args(["-C", "/nonexistent/dir", "status"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
}

#[test]
fn fsck_names_a_flipped_byte_and_a_missing_pack() {
    let env = Env::new();
    for i in 0..40u64 {
        std::fs::write(env.root().join(format!("f{i}")), common::noise(i, 3000)).unwrap();
    }
    assert_eq!(env.run(&["init"]).status.code(), Some(0));
    let packs = env.packs();
    assert!(!packs.is_empty());
    let pack = &packs[0];
    let mut bytes = std::fs::read(pack).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x40;
    std::fs::write(pack, &bytes).unwrap();
    let o = env.run(&["fsck"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("corrupt"), "{out}");

    std::fs::remove_file(pack).unwrap();
    let o = env.run(&["--json", "fsck"]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let problems = v["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("missing pack")),
        "{problems:?}"
    );
    // The references that pointed into the lost pack are named too.
    assert!(
        problems
            .iter()
            .any(|p| p.as_str().unwrap().contains("snapshot")),
        "{problems:?}"
    );
}
