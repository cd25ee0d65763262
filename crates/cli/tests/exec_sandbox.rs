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

/// With `capture.large_files = "protect"`, a file over the size cap (which Rewind records as
/// uncovered and cannot put back) is read-only inside the sandbox: appending to it, truncating
/// it, removing it and renaming it all fail, and its bytes are unchanged; a small file beside it
/// is written as usual. Without the setting the same command does change it (so the test can
/// tell).
#[test]
fn a_protected_oversize_file_cannot_be_changed_in_the_sandbox() {
    require_bwrap();
    for protect in [true, false] {
        let env = Env::new();
        let big: Vec<u8> = (0..(2u32 << 20)).map(|i| (i % 251) as u8).collect();
        std::fs::create_dir_all(env.root().join("data")).unwrap();
        std::fs::write(env.root().join("data/big.bin"), &big).unwrap();
        std::fs::write(env.root().join("small.txt"), b"small\n").unwrap();
        let setting = if protect {
            "large_files = \"protect\"\n"
        } else {
            ""
        };
        std::fs::write(
            env.root().join(".rewind.toml"),
            format!("[capture]\nmax_file_size = \"1M\"\n{setting}"),
        )
        .unwrap();
        assert_eq!(env.run(&["init"]).status.code(), Some(0));
        for script in [
            "echo more >> data/big.bin",
            ": > data/big.bin",
            "rm data/big.bin",
            "mv data/big.bin data/moved.bin",
        ] {
            let o = env
                .cmd(&[
                    "exec",
                    "--sandbox",
                    "workspace-write",
                    "--",
                    "sh",
                    "-c",
                    script,
                ])
                .current_dir(env.root())
                .output()
                .unwrap();
            if protect {
                assert_ne!(o.status.code(), Some(0), "{script}: {}", text(&o));
                assert_eq!(
                    std::fs::read(env.root().join("data/big.bin")).unwrap(),
                    big,
                    "{script} changed the protected file"
                );
            } else {
                assert_eq!(o.status.code(), Some(0), "{script}: {}", text(&o));
                let now = std::fs::read(env.root().join("data/big.bin")).ok();
                assert_ne!(now.as_ref(), Some(&big), "{script} did nothing unprotected");
                std::fs::write(env.root().join("data/big.bin"), &big).unwrap();
                let _ = std::fs::remove_file(env.root().join("data/moved.bin"));
            }
        }
        let o = env
            .cmd(&[
                "exec",
                "--sandbox",
                "workspace-write",
                "--",
                "sh",
                "-c",
                "echo x > small.txt",
            ])
            .current_dir(env.root())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(std::fs::read(env.root().join("small.txt")).unwrap(), b"x\n");
    }
}
