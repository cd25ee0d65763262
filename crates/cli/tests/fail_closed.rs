//! What Rewind cannot see or cannot save is an error or is left alone, never a silent loss,
//! through the real binary.

mod common;
mod rewind_util;

use common::{text, Env};
use rewind_util::*;

/// An agent that writes `*` into `.gitignore` does not switch recording off: as in git, ignore
/// rules apply to what is not captured yet. Its later edit of a captured file is recorded and
/// rewound; a new file it makes under the new rule is not captured (and not deleted).
#[test]
fn ignore_rules_cannot_switch_recording_off() {
    let env = Env::new();
    let root = env.root();
    write(root, "src/lib.rs", b"fn a() {}\n");
    write(root, ".gitignore", b"target/\n");
    init(&env);
    checkpoint(&env, "A", "m0");
    sh(&env, "A", "echo '*' > .gitignore");
    sh(&env, "A", "echo 'fn evil() {}' > src/lib.rs; echo new > src/new.rs");
    let log = json(&env, "A", &["log", "--limit", "1"], 0);
    assert_eq!(log["items"][0]["changes"], 1, "the edit is recorded: {log}");
    let v = json(&env, "A", &["restore", "m0"], 0);
    let paths: Vec<String> = steps(&v).into_iter().map(|s| s.1).collect();
    assert!(paths.contains(&"src/lib.rs".to_string()), "{v}");
    assert_eq!(read_str(root, "src/lib.rs"), "fn a() {}\n");
    assert_eq!(read_str(root, ".gitignore"), "target/\n");
    assert_eq!(read_str(root, "src/new.rs"), "new\n", "never captured, never deleted");
}

/// An epoch made a file bigger than the size cap (its new content is not stored); the user
/// then rewrote it, at the same size. Rewinding the epoch cannot tell the user's bytes from the
/// epoch's and cannot bring them back: it leaves the file as it is, forced or not.
#[test]
fn a_file_whose_current_content_is_uncaptured_is_not_overwritten() {
    for force in [false, true] {
        let env = Env::new();
        let root = env.root();
        write(root, ".rewind.toml", b"[capture]\nmax_file_size = \"1K\"\n");
        write(root, "log.txt", b"small\n");
        init(&env);
        checkpoint(&env, "A", "m0");
        sh(&env, "A", "head -c 4096 /dev/zero | tr '\\0' x > log.txt");
        write(root, "log.txt", &vec![b'y'; 4096]);
        let mut args = vec!["--json", "restore", "m0"];
        if force {
            args.push("--force");
        }
        let o = run_s(&env, "A", &args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["skipped"][0]["path"], "log.txt", "{v}");
        assert_eq!(read(root, "log.txt"), vec![b'y'; 4096], "force={force}");
    }
}
