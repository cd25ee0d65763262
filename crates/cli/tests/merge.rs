//! `restore --merge` and `undo --merge` through the real binary: where the user edited a file
//! the agent's session changed, only the agent's lines are undone when the two edits touch
//! different lines; otherwise a conflict naming the lines, with nothing changed (file and
//! directory mtimes); line endings kept; a file the agent created is never merged away; undo
//! of a merged restore gives back the exact bytes; the preview shows the merge's diff; the
//! `[restore] merge` setting makes it the default.

use std::path::Path;

use serde_json::Value;

use crate::common::rewind::*;
use crate::common::{text, Env};

/// `n` numbered lines ending with `eol`.
fn numbered(n: usize, eol: &str) -> String {
    (1..=n).map(|i| format!("line {i}{eol}")).collect()
}

/// `text` with lines `from..=to` (1-based) prefixed by `who`.
fn edited(text: &str, from: usize, to: usize, who: &str) -> String {
    text.split_inclusive('\n')
        .enumerate()
        .map(|(i, l)| {
            if (from..=to).contains(&(i + 1)) {
                format!("{who} {l}")
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// Every path under `root` with its mtime, for "nothing changed".
fn mtimes(root: &Path) -> Vec<(String, i128)> {
    let mut out = Vec::new();
    for e in walk(root) {
        let m = std::fs::symlink_metadata(&e).unwrap();
        let t = m
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        out.push((e.display().to_string(), t.as_nanos() as i128));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A workspace with `f.txt` (`text`), a checkpoint m1, then the agent's session A prefixing
/// lines `from..=to` with AGENT through a shell command.
fn agent_edited(text: &str, from: usize, to: usize) -> Env {
    let env = Env::new();
    write(env.root(), "f.txt", text.as_bytes());
    init(&env);
    checkpoint(&env, "A", "m1");
    sh(&env, "A", &format!("sed -i '{from},{to}s/^/AGENT /' f.txt"));
    assert_eq!(
        read_str(env.root(), "f.txt"),
        edited(text, from, to, "AGENT")
    );
    env
}

fn merged_paths(v: &Value) -> Vec<String> {
    v["merged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_users_line_stays_and_the_agents_lines_go() {
    let original = numbered(60, "\n");
    let env = agent_edited(&original, 40, 45);
    let user = edited(&read_str(env.root(), "f.txt"), 2, 2, "USER");
    write(env.root(), "f.txt", user.as_bytes());
    // Without --merge: a conflict, as before.
    expect(&env, "A", &["restore", "m1"], 3);
    // The preview: merged, with its diff; nothing written.
    let before = mtimes(env.root());
    let plan = json(&env, "A", &["restore", "m1", "--merge", "--dry-run"], 0);
    assert_eq!(merged_paths(&plan), ["f.txt"], "{plan}");
    let patch = plan["merged"][0]["patch"].as_str().unwrap();
    assert!(
        patch.contains("-AGENT line 40\n") && patch.contains("+line 40\n"),
        "{patch}"
    );
    assert!(
        !patch.contains("USER"),
        "the user's line is not touched: {patch}"
    );
    assert_eq!(mtimes(env.root()), before, "a dry run writes nothing");
    let o = run_s(&env, "A", &["restore", "m1", "--merge", "--dry-run"]);
    assert!(text(&o).contains("would merge    f.txt"), "{}", text(&o));
    // The real run.
    let done = json(&env, "A", &["restore", "m1", "--merge"], 0);
    assert_eq!(done["applied"], true, "{done}");
    assert_eq!(
        read_str(env.root(), "f.txt"),
        edited(&original, 2, 2, "USER")
    );
    // Undo gives back exactly what was there before the restore.
    expect(&env, "A", &["undo"], 0);
    assert_eq!(read_str(env.root(), "f.txt"), user);
    fsck_clean(&env);
}

#[test]
fn overlapping_lines_are_a_conflict_naming_them_and_nothing_changes() {
    let original = numbered(60, "\n");
    let env = agent_edited(&original, 40, 45);
    let user = edited(&read_str(env.root(), "f.txt"), 43, 43, "USER");
    write(env.root(), "f.txt", user.as_bytes());
    let before = mtimes(env.root());
    let o = run_s(&env, "A", &["restore", "m1", "--merge"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(
        text(&o).contains("both changed lines 40-45"),
        "{}",
        text(&o)
    );
    let v = json(&env, "A", &["restore", "m1", "--merge"], 3);
    let c = &v["conflicts"][0];
    assert_eq!(
        c["overlaps"][0]["theirs"],
        serde_json::json!([40, 45]),
        "{v}"
    );
    assert!(c["unmerged"].as_str().unwrap().contains("40-45"), "{v}");
    assert_eq!(mtimes(env.root()), before, "nothing changed");
    assert_eq!(read_str(env.root(), "f.txt"), user);
}

#[test]
fn crlf_and_a_missing_final_newline_are_kept_byte_for_byte() {
    let mut original = numbered(30, "\r\n");
    original.push_str("last line without a newline");
    let env = agent_edited(&original, 20, 22);
    let user = edited(&read_str(env.root(), "f.txt"), 3, 3, "USER");
    write(env.root(), "f.txt", user.as_bytes());
    expect(&env, "A", &["restore", "m1", "--merge"], 0);
    assert_eq!(
        read_str(env.root(), "f.txt"),
        edited(&original, 3, 3, "USER")
    );
}

#[test]
fn a_file_the_agent_created_and_the_user_edited_is_a_conflict() {
    let env = Env::new();
    write(env.root(), "keep.txt", b"k\n");
    init(&env);
    checkpoint(&env, "A", "m1");
    sh(&env, "A", "printf 'a\\nb\\nc\\n' > new.txt");
    write(env.root(), "new.txt", b"a\nb\nc\nthe user's line\n");
    let v = json(&env, "A", &["restore", "m1", "--merge"], 3);
    assert!(
        v["conflicts"][0]["unmerged"]
            .as_str()
            .unwrap()
            .contains("created"),
        "{v}"
    );
    assert_eq!(
        read_str(env.root(), "new.txt"),
        "a\nb\nc\nthe user's line\n"
    );
}

#[test]
fn the_restore_merge_setting_makes_it_the_default() {
    let original = numbered(20, "\n");
    let env = agent_edited(&original, 15, 16);
    let user = edited(&read_str(env.root(), "f.txt"), 1, 1, "USER");
    write(env.root(), "f.txt", user.as_bytes());
    std::fs::write(
        env.home.path().join("config.toml"),
        "[restore]\nmerge = true\n",
    )
    .unwrap();
    expect(&env, "A", &["restore", "m1", "--dry-run", "--no-merge"], 3);
    expect(&env, "A", &["restore", "m1"], 0);
    assert_eq!(
        read_str(env.root(), "f.txt"),
        edited(&original, 1, 1, "USER")
    );
}
