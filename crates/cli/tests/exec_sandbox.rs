//! `rewind exec --sandbox`: the op log and the sandbox together. The command's changes inside
//! the workspace are recorded and can be rewound; what the sandbox refuses never happens.

use crate::common;

use common::{require_bwrap, text, Env};

#[test]
fn sandboxed_exec_is_recorded_confined_and_rewindable() {
    require_bwrap();
    let env = Env::new();
    // Not under /tmp: the sandbox's /tmp is private, so a write there would fail for a reason
    // that has nothing to do with confinement.
    let outside = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(env.root().join("keep.txt"), b"original\n").unwrap();
    assert_eq!(env.run(&["init"]).status.code(), Some(0));
    let c0 = env.run(&["checkpoint", "--message", "m0"]);
    assert_eq!(c0.status.code(), Some(0), "{}", text(&c0));

    let script = format!(
        "echo changed > keep.txt; mkdir -p out && echo new > out/made.txt; \
         echo escape > {}/x.txt; true",
        outside.path().display()
    );
    let o = env
        .cmd(&[
            "exec",
            "--sandbox",
            "workspace-write",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .current_dir(env.root())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Read-only file system"),
        "{}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(env.root().join("keep.txt")).unwrap(),
        "changed\n"
    );
    assert!(env.root().join("out/made.txt").is_file());
    assert!(
        !outside.path().join("x.txt").exists(),
        "the sandbox let a write out of the workspace"
    );

    let o = env.run(&["restore", "m0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        std::fs::read_to_string(env.root().join("keep.txt")).unwrap(),
        "original\n"
    );
    assert!(!env.root().join("out").exists());

    // The child's exit code comes through, and a refused network stays refused.
    let o = env
        .cmd(&[
            "exec",
            "--sandbox",
            "read-only",
            "--",
            "sh",
            "-c",
            "echo x > f",
        ])
        .current_dir(env.root())
        .output()
        .unwrap();
    assert_ne!(
        o.status.code(),
        Some(0),
        "read-only mode let a write through: {}",
        text(&o)
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Read-only file system"),
        "{}",
        text(&o)
    );
    assert!(!env.root().join("f").exists());
}
