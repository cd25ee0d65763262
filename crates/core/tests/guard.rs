//! The read-before-edit guard and the guarded tools through the library API: refusals (never
//! read, changed since read and by whom), what is not a change (touch), what is (a same-tick
//! rewrite), new files, write-after-write, epochs and undo, and edit/apply-patch against
//! references (`diff -u`, `git diff`) with random inputs.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

use common::{write_file, Env};
use proptest::prelude::*;
use rewind_core::{
    ChangedBy, EditSpec, EpochKind, EpochSpec, Error, LineRange, LogItem, PatchOptions,
    RefusalKind, RewindOptions, StagedWrite, ToolCall, Workspace,
};

const S: &str = "agent";

fn tool(name: &str) -> ToolCall {
    ToolCall::named(name)
}

/// Everything a refusal must leave as it was: bytes, inode, mtime.
fn stat_of(path: &Path) -> (Vec<u8>, u64, i64, i64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (
        std::fs::read(path).unwrap(),
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
    )
}

fn epoch_count(ws: &Workspace) -> usize {
    ws.log(None, 10_000)
        .unwrap()
        .iter()
        .filter(|i| matches!(i, LogItem::Epoch { .. }))
        .count()
}

fn refusal(e: Error) -> rewind_core::GuardRefusal {
    match e {
        Error::Guard(mut r) => {
            assert_eq!(r.len(), 1, "{r:?}");
            r.remove(0)
        }
        other => panic!("expected a guard refusal, got {other:?}"),
    }
}

fn setup(files: &[(&str, &str)]) -> (Env, Workspace) {
    let env = Env::new();
    for (p, c) in files {
        write_file(env.root(), p.as_bytes(), c.as_bytes(), 0o644);
    }
    let ws = env.open();
    ws.snapshot("base", None).unwrap();
    (env, ws)
}

/// A refused write: the error is a guard refusal, the file is untouched, no epoch was added
/// and none is left open.
fn assert_refused(
    ws: &Workspace,
    root: &Path,
    rel: &str,
    session: &str,
) -> rewind_core::GuardRefusal {
    let before = stat_of(&root.join(rel));
    let epochs = epoch_count(ws);
    let e = ws
        .write_file(session, rel.as_bytes(), b"clobbered\n", &tool("write"))
        .unwrap_err();
    let e2 = ws
        .edit_file(
            session,
            rel.as_bytes(),
            &EditSpec {
                old: b"a".to_vec(),
                new: b"b".to_vec(),
                all: true,
            },
            &tool("edit"),
        )
        .unwrap_err();
    assert!(matches!(e2, Error::Guard(_)), "{e2:?}");
    assert_eq!(stat_of(&root.join(rel)), before, "a refusal changed {rel}");
    assert_eq!(epoch_count(ws), epochs, "a refusal recorded an epoch");
    let r = refusal(e);
    // check-write gives the same verdict.
    assert_eq!(
        refusal(ws.check_write(session, rel.as_bytes()).unwrap_err()),
        r
    );
    r
}

#[test]
fn never_read_is_refused() {
    let (env, ws) = setup(&[("a.txt", "alpha\n")]);
    let r = assert_refused(&ws, env.root(), "a.txt", S);
    assert_eq!(r.kind, RefusalKind::NeverRead);
    assert!(r.to_string().contains("read it first"), "{r}");
    // Another session's read does not count.
    ws.read_file("other", b"a.txt", None).unwrap();
    assert_eq!(
        assert_refused(&ws, env.root(), "a.txt", S).kind,
        RefusalKind::NeverRead
    );
}

#[test]
fn stale_after_an_external_edit() {
    let (env, ws) = setup(&[("a.txt", "alpha\n")]);
    ws.read_file(S, b"a.txt", None).unwrap();
    std::fs::write(env.root().join("a.txt"), "alpha, edited by the user\n").unwrap();
    let r = assert_refused(&ws, env.root(), "a.txt", S);
    assert_eq!(r.kind, RefusalKind::Changed);
    assert_eq!(r.changed_by, Some(ChangedBy::Unrecorded));
    assert!(r.to_string().contains("not recorded yet"), "{r}");
    // Once a capture has recorded it, it is named as an external edit.
    ws.snapshot("later", None).unwrap();
    let r = assert_refused(&ws, env.root(), "a.txt", S);
    assert!(
        matches!(r.changed_by, Some(ChangedBy::External { .. })),
        "{r:?}"
    );
    assert!(r.to_string().contains("external edit"), "{r}");
    // Reading again clears it.
    ws.read_file(S, b"a.txt", None).unwrap();
    ws.write_file(S, b"a.txt", b"mine\n", &tool("write"))
        .unwrap();
    assert_eq!(std::fs::read(env.root().join("a.txt")).unwrap(), b"mine\n");
}

#[test]
fn stale_after_another_sessions_write() {
    let (env, ws) = setup(&[("a.txt", "alpha\n")]);
    ws.read_file(S, b"a.txt", None).unwrap();
    ws.read_file("other", b"a.txt", None).unwrap();
    let theirs = ws
        .write_file("other", b"a.txt", b"theirs\n", &tool("write"))
        .unwrap();
    let r = assert_refused(&ws, env.root(), "a.txt", S);
    assert_eq!(r.kind, RefusalKind::Changed);
    match r.changed_by.clone() {
        Some(ChangedBy::Epoch {
            session,
            epoch,
            kind,
            this_session,
            ..
        }) => {
            assert_eq!(session, "other");
            assert_eq!(epoch, theirs.epoch.id);
            assert_eq!(kind, EpochKind::Exact);
            assert!(!this_session);
        }
        other => panic!("{other:?}"),
    }
    assert!(r.to_string().contains("session other's"), "{r}");
}

#[test]
fn stale_after_this_sessions_own_shell_command() {
    let (env, ws) = setup(&[("a.txt", "alpha\n")]);
    ws.read_file(S, b"a.txt", None).unwrap();
    let e = ws
        .begin_epoch(
            S,
            &EpochSpec {
                tool: Some("exec".into()),
                process_owned: true,
                owner_pid: None,
                ..Default::default()
            },
        )
        .unwrap();
    std::fs::write(env.root().join("a.txt"), "sed did this\n").unwrap();
    ws.end_epoch(S, Some(&e.id), false).unwrap();
    let r = assert_refused(&ws, env.root(), "a.txt", S);
    match &r.changed_by {
        Some(ChangedBy::Epoch {
            kind,
            this_session,
            epoch,
            ..
        }) => {
            assert_eq!(*kind, EpochKind::Opaque);
            assert!(*this_session);
            assert_eq!(*epoch, e.id);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        r.to_string().contains("this session's shell command"),
        "{r}"
    );
}

#[test]
fn touch_is_not_a_change_but_a_same_tick_rewrite_is() {
    let (env, ws) = setup(&[("a.txt", "alpha\n"), ("b.txt", "bravo\n")]);
    let a = env.root().join("a.txt");
    let b = env.root().join("b.txt");
    ws.read_file(S, b"a.txt", None).unwrap();
    ws.read_file(S, b"b.txt", None).unwrap();
    // touch: a new mtime, same bytes.
    let f = std::fs::File::options().write(true).open(&a).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    drop(f);
    ws.check_write(S, b"a.txt").unwrap();
    // Same size, different bytes, and the mtime put back exactly: a change within one tick.
    let old_mtime = std::fs::metadata(&b).unwrap().modified().unwrap();
    std::fs::write(&b, "BRAVO\n").unwrap();
    let f = std::fs::File::options().write(true).open(&b).unwrap();
    f.set_modified(old_mtime).unwrap();
    drop(f);
    assert_eq!(
        std::fs::metadata(&b).unwrap().modified().unwrap(),
        old_mtime
    );
    let r = assert_refused(&ws, env.root(), "b.txt", S);
    assert_eq!(r.kind, RefusalKind::Changed);
    assert!(
        r.to_string().contains("same size, different content"),
        "{r}"
    );
    ws.write_file(S, b"a.txt", b"ok\n", &tool("write")).unwrap();
}

#[test]
fn new_files_need_no_read_and_write_after_write_needs_no_reread() {
    let (env, ws) = setup(&[("keep.txt", "k\n")]);
    let s = ws
        .write_file(S, b"src/deep/new.rs", b"fn main() {}\n", &tool("write"))
        .unwrap();
    assert_eq!(
        std::fs::read(env.root().join("src/deep/new.rs")).unwrap(),
        b"fn main() {}\n"
    );
    // The new directories belong to the epoch too, so undo removes them.
    let paths: Vec<_> = s.changes.iter().map(|c| c.path.clone()).collect();
    assert_eq!(
        paths,
        vec![
            b"src".to_vec(),
            b"src/deep".to_vec(),
            b"src/deep/new.rs".to_vec()
        ]
    );
    ws.write_file(S, b"src/deep/new.rs", b"fn main() { 1; }\n", &tool("write"))
        .unwrap();
    ws.edit_file(
        S,
        b"src/deep/new.rs",
        &EditSpec {
            old: b"1;".to_vec(),
            new: b"2;".to_vec(),
            all: false,
        },
        &tool("edit"),
    )
    .unwrap();
    assert_eq!(
        std::fs::read(env.root().join("src/deep/new.rs")).unwrap(),
        b"fn main() { 2; }\n"
    );
    let fp = ws.fingerprint(S, b"src/deep/new.rs").unwrap().unwrap();
    assert!(!fp.partial);
    // Another session still has to read it.
    assert_eq!(
        refusal(ws.check_write("other", b"src/deep/new.rs").unwrap_err()).kind,
        RefusalKind::NeverRead
    );
    // A file deleted since it was read has nothing to overwrite.
    ws.read_file(S, b"keep.txt", None).unwrap();
    std::fs::remove_file(env.root().join("keep.txt")).unwrap();
    assert!(ws.check_write(S, b"keep.txt").unwrap().new_file);
}

/// Every name under `dir`, recursively.
fn all_names(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        out.push(e.file_name().to_string_lossy().into_owned());
        if e.file_type().unwrap().is_dir() {
            out.extend(all_names(&e.path()));
        }
    }
    out
}

/// A write staged before the workspace is open (as `rewind write` stages it) ends up exactly as
/// an unstaged one: the content, the file's mode as it is when the write happens (not when it
/// was staged), no leftover names; a refused one leaves nothing; one staged for another
/// workspace root is refused.
#[test]
fn staged_writes_end_up_as_unstaged_ones() {
    let (env, ws) = setup(&[("a.sh", "echo a\n"), ("b.txt", "b\n")]);
    let root = ws.root().to_path_buf();
    let mode = |rel: &str| {
        std::fs::metadata(env.root().join(rel))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    let chmod = |rel: &str, m: u32| {
        std::fs::set_permissions(env.root().join(rel), std::fs::Permissions::from_mode(m)).unwrap()
    };
    let staged = |rel: &str, content: &str| {
        let mut s = StagedWrite::start(&root, rel.as_bytes().to_vec(), content.as_bytes().to_vec());
        assert_eq!(s.path(), rel.as_bytes());
        // What happens after this is after the staging. (Whether a file was staged depends on
        // the path: not in a new directory.)
        s.wait();
        s
    };
    chmod("a.sh", 0o750);
    ws.read_file(S, b"a.sh", None).unwrap();

    ws.write_staged(S, staged("new.txt", "new\n"), &tool("write"))
        .unwrap();
    assert_eq!(std::fs::read(env.root().join("new.txt")).unwrap(), b"new\n");
    ws.write_staged(S, staged("a.sh", "echo A\n"), &tool("write"))
        .unwrap();
    assert_eq!(std::fs::read(env.root().join("a.sh")).unwrap(), b"echo A\n");
    assert_eq!(mode("a.sh"), 0o750);
    // The mode changed after the staging: the write keeps the file's mode as it is now.
    let mut s = staged("a.sh", "echo 2\n");
    assert!(s.wait(), "a.sh staged with its old mode before the chmod");
    chmod("a.sh", 0o700);
    ws.write_staged(S, s, &tool("write")).unwrap();
    assert_eq!(std::fs::read(env.root().join("a.sh")).unwrap(), b"echo 2\n");
    assert_eq!(mode("a.sh"), 0o700);
    // A new directory: nothing to stage in, written in full.
    ws.write_staged(S, staged("d/e.txt", "e\n"), &tool("write"))
        .unwrap();
    assert_eq!(std::fs::read(env.root().join("d/e.txt")).unwrap(), b"e\n");
    let epochs = epoch_count(&ws);

    // Refused by the guard: nothing written, no epoch.
    let before = stat_of(&env.root().join("b.txt"));
    let e = ws
        .write_staged(S, staged("b.txt", "clobbered\n"), &tool("write"))
        .unwrap_err();
    assert_eq!(refusal(e).kind, RefusalKind::NeverRead);
    assert_eq!(stat_of(&env.root().join("b.txt")), before);
    // Staged for another root: refused, written nowhere.
    let elsewhere = tempfile::tempdir().unwrap();
    let s = StagedWrite::start(elsewhere.path(), b"b.txt".to_vec(), b"x\n".to_vec());
    let e = ws.write_staged(S, s, &tool("write")).unwrap_err();
    assert!(matches!(e, Error::Workspace(_)), "{e:?}");
    assert_eq!(stat_of(&env.root().join("b.txt")), before);
    assert!(all_names(elsewhere.path()).is_empty());
    assert_eq!(epoch_count(&ws), epochs);
    // No temporary names left anywhere.
    let names = all_names(env.root());
    assert!(names.iter().all(|n| !n.starts_with(".rewind")), "{names:?}");
}

/// An edit staged before the workspace is open (as `rewind edit` stages it: read and edited on
/// the staging thread) writes the edit's result; if the file changed after the staging read it
/// (and the session read it again), the stale staged result is not used: the edit applies to
/// the file as it is. A staged edit that does not apply changes nothing.
#[test]
fn staged_edits_write_the_edit_of_the_file_as_it_is() {
    let (env, ws) = setup(&[("m.rs", "let a = 1;\nlet b = 2;\n")]);
    let root = ws.root().to_path_buf();
    let spec = |old: &str, new: &str| EditSpec {
        old: old.as_bytes().to_vec(),
        new: new.as_bytes().to_vec(),
        all: false,
    };
    let staged = |s: &EditSpec| {
        let mut st = StagedWrite::start_edit(&root, b"m.rs".to_vec(), s.clone());
        // What happens after this is after the staging read the file.
        st.wait();
        st
    };
    let read = |p: &str| std::fs::read(env.root().join(p)).unwrap();
    ws.read_file(S, b"m.rs", None).unwrap();

    let e = spec("a = 1", "a = 10");
    let r = ws.edit_staged(S, staged(&e), &e, &tool("edit")).unwrap();
    assert_eq!(r.replacements, 1);
    assert_eq!(read("m.rs"), b"let a = 10;\nlet b = 2;\n");

    // Staged against one content; the file changes and is read again before the edit runs.
    let e = spec("b = 2", "b = 20");
    let mut s = staged(&e);
    assert!(
        s.wait(),
        "the edit staged from the old content before the file changes"
    );
    write_file(
        env.root(),
        b"m.rs",
        b"let a = 10;\nlet b = 2;\nlet c = 3;\n",
        0o644,
    );
    ws.read_file(S, b"m.rs", None).unwrap();
    ws.edit_staged(S, s, &e, &tool("edit")).unwrap();
    assert_eq!(read("m.rs"), b"let a = 10;\nlet b = 20;\nlet c = 3;\n");

    // An edit that does not apply: an error, nothing written, nothing left behind.
    let before = stat_of(&env.root().join("m.rs"));
    let e = spec("nowhere", "x");
    let err = ws
        .edit_staged(S, staged(&e), &e, &tool("edit"))
        .unwrap_err();
    assert!(matches!(err, Error::Tool { .. }), "{err:?}");
    assert_eq!(stat_of(&env.root().join("m.rs")), before);
    // A staged edit is not a whole-file write.
    let err = ws
        .write_staged(S, staged(&spec("a", "b")), &tool("write"))
        .unwrap_err();
    assert!(matches!(err, Error::Usage(_)), "{err:?}");
    assert_eq!(stat_of(&env.root().join("m.rs")), before);
    let names = all_names(env.root());
    assert!(names.iter().all(|n| !n.starts_with(".rewind")), "{names:?}");
}

#[test]
fn guarded_writes_are_exact_epochs_that_undo() {
    let (env, ws) = setup(&[("bin/run.sh", "#!/bin/sh\necho one\n")]);
    let path = env.root().join("bin/run.sh");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
    ws.read_file(S, b"bin/run.sh", None).unwrap();
    let mut call = tool("write");
    call.id = Some("call_7".into());
    let s = ws
        .write_file(S, b"bin/run.sh", b"#!/bin/sh\necho two\n", &call)
        .unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().mode() & 0o7777,
        0o750,
        "mode kept"
    );
    let log = ws.log(Some(S), 10).unwrap();
    match &log[0] {
        LogItem::Epoch { epoch, changes, .. } => {
            assert_eq!(epoch.id, s.epoch.id);
            assert_eq!(epoch.kind, EpochKind::Exact);
            assert_eq!(epoch.tool.as_deref(), Some("write"));
            assert_eq!(epoch.tool_call.as_deref(), Some("call_7"));
            assert_eq!(*changes, 1);
        }
        other => panic!("{other:?}"),
    }
    let out = ws.undo(S, None, &RewindOptions::default()).unwrap();
    assert!(out.applied && out.conflicts.is_empty(), "{out:?}");
    assert_eq!(std::fs::read(&path).unwrap(), b"#!/bin/sh\necho one\n");
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o750);
    // After an undo the session's view is stale (its own restore changed the file).
    let r = refusal(ws.check_write(S, b"bin/run.sh").unwrap_err());
    assert!(
        matches!(
            r.changed_by,
            Some(ChangedBy::Epoch {
                kind: EpochKind::Restore,
                this_session: true,
                ..
            })
        ),
        "{r:?}"
    );
}

#[test]
fn files_over_the_capture_limit_can_be_written() {
    let env = Env::new();
    write_file(
        env.root(),
        b".rewind.toml",
        b"[capture]\nmax_file_size = 10\n",
        0o644,
    );
    write_file(env.root(), b"big.txt", &[b'x'; 100], 0o644);
    let ws = env.open();
    ws.snapshot("base", None).unwrap();
    ws.read_file(S, b"big.txt", None).unwrap();
    ws.write_file(S, b"big.txt", &[b'y'; 200], &tool("write"))
        .unwrap();
    ws.write_file(S, b"big.txt", &[b'z'; 200], &tool("write"))
        .unwrap();
    assert_eq!(
        std::fs::read(env.root().join("big.txt")).unwrap(),
        vec![b'z'; 200]
    );
}

#[test]
fn partial_reads_record_the_whole_file() {
    let (_env, ws) = setup(&[("a.txt", "1\n2\n3\n4\n5")]);
    let r = ws
        .read_file(S, b"a.txt", Some("2:3".parse::<LineRange>().unwrap()))
        .unwrap();
    assert_eq!(r.content, b"2\n3\n");
    assert!(r.partial);
    assert_eq!(r.range, Some((2, 3)));
    assert_eq!(r.lines, 5);
    assert_eq!(r.fingerprint.size, 9);
    let c = ws.check_write(S, b"a.txt").unwrap();
    assert!(c.fingerprint.unwrap().partial);
    let r = ws
        .read_file(S, b"a.txt", Some("4:".parse().unwrap()))
        .unwrap();
    assert_eq!(r.content, b"4\n5");
    let r = ws
        .read_file(S, b"a.txt", Some("9:".parse().unwrap()))
        .unwrap();
    assert!(r.content.is_empty() && r.partial);
    let r = ws
        .read_file(S, b"a.txt", Some("1:99".parse().unwrap()))
        .unwrap();
    assert!(!r.partial);
}

#[test]
fn edit_errors_name_counts_and_nearest_lines_and_change_nothing() {
    let (env, ws) = setup(&[("a.rs", "fn a() {\n    let x = 1;\n    let x = 1;\n}\n")]);
    ws.read_file(S, b"a.rs", None).unwrap();
    let before = stat_of(&env.root().join("a.rs"));
    let epochs = epoch_count(&ws);
    let edit = |old: &str, new: &str| {
        ws.edit_file(
            S,
            b"a.rs",
            &EditSpec {
                old: old.into(),
                new: new.into(),
                all: false,
            },
            &tool("edit"),
        )
    };
    let e = edit("let x = 1;", "let x = 2;").unwrap_err().to_string();
    assert!(e.contains("matches 2 times (at lines 2, 3)"), "{e}");
    let e = edit("let y = 1;", "z").unwrap_err().to_string();
    assert!(
        e.contains("0 matches") && e.contains("2:     let x = 1;"),
        "{e}"
    );
    assert_eq!(stat_of(&env.root().join("a.rs")), before);
    assert_eq!(epoch_count(&ws), epochs);
    let e = ws
        .edit_file(S, b"nope.rs", &EditSpec::default(), &tool("edit"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no such file"), "{e}");
}

#[test]
fn paths_outside_the_root_symlinks_and_git_are_refused() {
    let (env, ws) = setup(&[("a.txt", "a\n")]);
    std::os::unix::fs::symlink(env.outside.path(), env.root().join("out")).unwrap();
    std::os::unix::fs::symlink("a.txt", env.root().join("link")).unwrap();
    for bad in [&b"../x"[..], b"/etc/passwd", b"a/../../x"] {
        assert!(ws.write_file(S, bad, b"x", &tool("write")).is_err());
    }
    let e = ws
        .write_file(S, b"out/x", b"x", &tool("write"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("symlink"), "{e}");
    assert!(ws.check_write(S, b"out/x").is_err());
    assert!(std::fs::read_dir(env.outside.path())
        .unwrap()
        .next()
        .is_none());
    assert!(ws.read_file(S, b"link", None).is_err());
    assert!(ws.write_file(S, b"link", b"x", &tool("write")).is_err());
    assert!(ws
        .write_file(S, b".git/config", b"x", &tool("write"))
        .is_err());
    for patch in [
        "--- a/../x\n+++ b/../x\n@@ -0,0 +1 @@\n+x\n",
        "diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/out/x\n@@ -0,0 +1 @@\n+x\n",
        "--- /dev/null\n+++ /etc/x\n@@ -0,0 +1 @@\n+x\n",
    ] {
        assert!(
            ws.apply_patch(S, patch.as_bytes(), &PatchOptions::default(), &tool("p"))
                .is_err(),
            "{patch}"
        );
    }
    assert!(std::fs::read_dir(env.outside.path())
        .unwrap()
        .next()
        .is_none());
    assert_eq!(std::fs::read(env.root().join("a.txt")).unwrap(), b"a\n");
}

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "core.autocrlf=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn git_diff_with_adds_deletes_renames_and_modes() {
    if Command::new("git").arg("--version").output().is_err() {
        eprintln!("git not installed; skipped");
        return;
    }
    let long: String = (0..40).map(|i| format!("line {i}\n")).collect();
    let files: &[(&str, &str)] = &[
        ("keep.txt", "one\ntwo\nthree\n"),
        ("old/name.txt", &long),
        ("gone.txt", "bye\nbye\n"),
        ("gone-dir/only.txt", "x\n"),
        ("script.sh", "#!/bin/sh\necho hi\n"),
        ("space name.txt", "s\n"),
        ("nonl.txt", "no newline"),
        ("crlf.txt", "a\r\nb\r\nc\r\n"),
    ];
    let (env, ws) = setup(files);
    // The same tree in a git repository, then the changes, then `git diff`.
    let repo = tempfile::tempdir().unwrap();
    for (p, c) in files {
        write_file(repo.path(), p.as_bytes(), c.as_bytes(), 0o644);
    }
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", "-A"]);
    git(repo.path(), &["commit", "-qm", "base"]);
    let r = repo.path();
    std::fs::write(r.join("keep.txt"), "one\n2\nthree\nfour\n").unwrap();
    std::fs::create_dir_all(r.join("new/name")).unwrap();
    let renamed = long.replace("line 20\n", "line twenty\n");
    std::fs::write(r.join("new/name/file.txt"), &renamed).unwrap();
    std::fs::remove_file(r.join("old/name.txt")).unwrap();
    std::fs::remove_file(r.join("gone.txt")).unwrap();
    std::fs::remove_file(r.join("gone-dir/only.txt")).unwrap();
    // Emptied directories go too, as with `git apply`.
    std::fs::remove_dir(r.join("gone-dir")).unwrap();
    std::fs::remove_dir(r.join("old")).unwrap();
    std::fs::set_permissions(r.join("script.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(r.join("added.txt"), "fresh\n").unwrap();
    std::fs::write(r.join("empty-new"), "").unwrap();
    std::fs::write(r.join("space name.txt"), "s\nt\n").unwrap();
    std::fs::write(r.join("nonl.txt"), "no newline, still").unwrap();
    std::fs::write(r.join("crlf.txt"), "a\r\nB\r\nc\r\n").unwrap();
    git(r, &["add", "-A"]);
    let patch = git(r, &["diff", "--cached", "-M"]);
    let text = String::from_utf8_lossy(&patch);
    assert!(text.contains("rename from old/name.txt"), "{text}");
    assert!(text.contains("new mode 100755"), "{text}");

    // Guard: every existing file the patch writes must have been read.
    let e = ws
        .apply_patch(S, &patch, &PatchOptions::default(), &tool("apply-patch"))
        .unwrap_err();
    match e {
        Error::Guard(r) => assert_eq!(r.len(), 8, "{r:?}"),
        other => panic!("{other:?}"),
    }
    for p in [
        "keep.txt",
        "old/name.txt",
        "gone.txt",
        "gone-dir/only.txt",
        "script.sh",
        "space name.txt",
        "nonl.txt",
        "crlf.txt",
    ] {
        ws.read_file(S, p.as_bytes(), None).unwrap();
    }
    let before = common::read_tree(env.root());
    let dry = ws
        .apply_patch(
            S,
            &patch,
            &PatchOptions {
                dry_run: true,
                ..Default::default()
            },
            &tool("apply-patch"),
        )
        .unwrap();
    assert!(dry.settled.is_none());
    assert_eq!(dry.files.len(), 10, "{:?}", dry.files);
    assert_eq!(common::read_tree(env.root()), before, "a dry run wrote");
    let done = ws
        .apply_patch(S, &patch, &PatchOptions::default(), &tool("apply-patch"))
        .unwrap();
    let settled = done.settled.unwrap();
    assert_eq!(settled.epoch.kind, EpochKind::Exact);
    let got = common::read_tree(env.root());
    let want = common::read_tree(r);
    assert_eq!(
        got, want,
        "workspace differs from the git tree after apply-patch"
    );
    // Undo puts everything back, directories included.
    let out = ws.undo(S, None, &RewindOptions::default()).unwrap();
    assert!(out.conflicts.is_empty(), "{out:?}");
    assert_eq!(common::read_tree(env.root()), before);
}

#[test]
fn a_failing_hunk_changes_nothing() {
    let (env, ws) = setup(&[("a.txt", "1\n2\n3\n"), ("b.txt", "x\ny\nz\n")]);
    ws.read_file(S, b"a.txt", None).unwrap();
    ws.read_file(S, b"b.txt", None).unwrap();
    let patch = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n\
                 --- a/b.txt\n+++ b/b.txt\n@@ -1,3 +1,3 @@\n x\n-Y\n+why\n z\n\
                 --- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\n";
    let before = common::read_tree(env.root());
    let epochs = epoch_count(&ws);
    let e = ws
        .apply_patch(S, patch.as_bytes(), &PatchOptions::default(), &tool("p"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b.txt") && e.contains("hunk #1") && e.contains("line 2 is `y`"),
        "{e}"
    );
    assert!(e.contains("nothing was written"), "{e}");
    assert_eq!(common::read_tree(env.root()), before);
    assert_eq!(epoch_count(&ws), epochs);
}

// ---------------------------------------------------------------------------------------------
// Property tests against references.

fn lines_strategy() -> impl Strategy<Value = Vec<String>> {
    // A small alphabet so lines repeat (ambiguous context, repeated matches).
    prop::collection::vec(
        prop::sample::select(vec![
            "a",
            "b",
            "c",
            "fn x() {",
            "}",
            "",
            "  let y = 1;",
            "ä",
        ]),
        0..30,
    )
    .prop_map(|v| v.into_iter().map(String::from).collect())
}

fn join(lines: &[String], crlf: bool, final_nl: bool) -> Vec<u8> {
    let eol = if crlf { "\r\n" } else { "\n" };
    let mut s = lines.join(eol);
    if final_nl && !lines.is_empty() {
        s.push_str(eol);
    }
    s.into_bytes()
}

/// Random line edits turning `a` into a new list.
fn mutate(a: &[String], ops: &[(u8, usize, String)]) -> Vec<String> {
    let mut b = a.to_vec();
    for (kind, at, text) in ops {
        let i = if b.is_empty() { 0 } else { at % (b.len() + 1) };
        match kind % 3 {
            0 => b.insert(i, text.clone()),
            1 if i < b.len() => {
                b.remove(i);
            }
            _ if i < b.len() => b[i] = text.clone(),
            _ => b.push(text.clone()),
        }
    }
    b
}

/// `diff -U ctx` between two byte strings, named a/f and b/f.
fn diff_u(a: &[u8], b: &[u8], ctx: usize) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("old"), a).unwrap();
    std::fs::write(dir.path().join("new"), b).unwrap();
    let out = Command::new("diff")
        .current_dir(dir.path())
        .args([
            &format!("-U{ctx}"),
            "--label",
            "a/f",
            "--label",
            "b/f",
            "old",
            "new",
        ])
        .output()
        .unwrap();
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1));
    out.stdout
}

fn edit_ops() -> impl Strategy<Value = Vec<(u8, usize, String)>> {
    prop::collection::vec(
        (
            any::<u8>(),
            any::<usize>(),
            prop::sample::select(vec!["a", "B", "new line", "", "}", "  let y = 2;"])
                .prop_map(String::from),
        ),
        1..8,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// `diff -u` output applies to the old bytes and gives exactly the new bytes.
    #[test]
    fn patch_matches_diff_u(
        a in lines_strategy(),
        ops in edit_ops(),
        crlf in any::<bool>(),
        nl_a in any::<bool>(),
        nl_b in any::<bool>(),
        ctx in 0usize..5,
    ) {
        let b = mutate(&a, &ops);
        let (old, new) = (join(&a, crlf, nl_a), join(&b, crlf, nl_b));
        let text = diff_u(&old, &new, ctx);
        if old == new {
            prop_assert!(text.is_empty());
            return Ok(());
        }
        let files = rewind_core::patch::parse(&text, None).unwrap();
        prop_assert_eq!(files.len(), 1);
        prop_assert_eq!(files[0].new_path.as_deref(), Some(&b"f"[..]));
        let got = rewind_core::patch::apply(&old, &files[0].hunks).unwrap();
        prop_assert_eq!(got, new);
    }

    /// Exact replacement against a reference built from the chosen position.
    #[test]
    fn edit_matches_reference(
        a in lines_strategy(),
        start in any::<usize>(),
        len in 1usize..20,
        new in "[a-z{}\n ]{0,12}",
        crlf in any::<bool>(),
        nl in any::<bool>(),
    ) {
        let lf = join(&a, false, nl);
        prop_assume!(!lf.is_empty());
        let s = start % lf.len();
        let e = (s + len).min(lf.len());
        let old = lf[s..e].to_vec();
        prop_assume!(old != new.as_bytes());
        // Line endings are translated only for a file that has line breaks, all CRLF.
        let crlf = crlf && lf.contains(&b'\n');
        let file = if crlf { rewind_core::edit::to_crlf(&lf) } else { lf.clone() };
        let spec = EditSpec { old: old.clone(), new: new.clone().into_bytes(), all: false };
        let hits = rewind_core::edit::find_all(&lf, &old).len();
        // A slice starting or ending between \r and \n has no LF-only equivalent: skip.
        prop_assume!(!crlf || rewind_core::edit::find_all(&file, &rewind_core::edit::to_crlf(&old)).len() == hits);
        match rewind_core::edit::apply(&file, &spec) {
            Ok((got, n)) => {
                prop_assert_eq!(hits, 1);
                prop_assert_eq!(n, 1);
                let pos = rewind_core::edit::find_all(&lf, &old)[0];
                let mut want = lf[..pos].to_vec();
                want.extend_from_slice(new.as_bytes());
                want.extend_from_slice(&lf[pos + old.len()..]);
                let want = if crlf { rewind_core::edit::to_crlf(&want) } else { want };
                prop_assert_eq!(got, want);
            }
            Err(err) => {
                prop_assert!(hits > 1, "{}", err.message);
                prop_assert_eq!(err.matches, hits);
                // --all against a naive left-to-right scan.
                let all = EditSpec { all: true, ..spec };
                let (got, n) = rewind_core::edit::apply(&file, &all).unwrap();
                prop_assert_eq!(n, hits);
                let mut want = Vec::new();
                let mut i = 0;
                while i < lf.len() {
                    if lf[i..].starts_with(&old) {
                        want.extend_from_slice(new.as_bytes());
                        i += old.len();
                    } else {
                        want.push(lf[i]);
                        i += 1;
                    }
                }
                let want = if crlf { rewind_core::edit::to_crlf(&want) } else { want };
                prop_assert_eq!(got, want);
            }
        }
    }
}

proptest! {
    // Whole workspace round trips cost a few SQLite transactions each: fewer cases.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Through the workspace: two files patched by one `diff -u` patch give the new bytes; the
    /// same patch with one hunk broken changes nothing at all.
    #[test]
    fn workspace_patch_is_all_or_nothing(
        a1 in lines_strategy(),
        a2 in lines_strategy(),
        ops1 in edit_ops(),
        ops2 in edit_ops(),
        ctx in 1usize..4,
        break_first in any::<bool>(),
    ) {
        let (b1, b2) = (mutate(&a1, &ops1), mutate(&a2, &ops2));
        let (o1, n1, o2, n2) = (join(&a1, false, true), join(&b1, false, true), join(&a2, true, true), join(&b2, true, true));
        prop_assume!(o1 != n1 && o2 != n2);
        let env = Env::new();
        write_file(env.root(), b"one.txt", &o1, 0o644);
        write_file(env.root(), b"dir/two.txt", &o2, 0o600);
        let ws = env.open();
        ws.snapshot("base", None).unwrap();
        ws.read_file(S, b"one.txt", None).unwrap();
        ws.read_file(S, b"dir/two.txt", None).unwrap();
        let p1 = String::from_utf8(diff_u(&o1, &n1, ctx)).unwrap().replace("a/f", "a/one.txt").replace("b/f", "b/one.txt");
        let p2 = String::from_utf8(diff_u(&o2, &n2, ctx)).unwrap().replace("a/f", "a/dir/two.txt").replace("b/f", "b/dir/two.txt");
        let whole = format!("{p1}{p2}");

        // Break one hunk: change its first old line to text no file has.
        let target = if break_first { &p1 } else { &p2 };
        let mut broken_part = String::new();
        let mut done = false;
        for line in target.split_inclusive('\n') {
            if !done && (line.starts_with('-') || line.starts_with(' ')) && !line.starts_with("---") {
                broken_part.push_str(&line[..1]);
                broken_part.push_str("NOT IN THE FILE\n");
                done = true;
            } else {
                broken_part.push_str(line);
            }
        }
        if done {
            let broken = if break_first { format!("{broken_part}{p2}") } else { format!("{p1}{broken_part}") };
            let before = common::read_tree(env.root());
            let epochs = epoch_count(&ws);
            let e = ws.apply_patch(S, broken.as_bytes(), &PatchOptions::default(), &tool("p"));
            prop_assert!(matches!(e, Err(Error::Tool { .. })), "{:?}", e.map(|p| p.files));
            prop_assert_eq!(common::read_tree(env.root()), before);
            prop_assert_eq!(epoch_count(&ws), epochs);
        }

        let done = ws.apply_patch(S, whole.as_bytes(), &PatchOptions::default(), &tool("p")).unwrap();
        prop_assert!(done.settled.is_some());
        prop_assert_eq!(std::fs::read(env.root().join("one.txt")).unwrap(), n1);
        prop_assert_eq!(std::fs::read(env.root().join("dir/two.txt")).unwrap(), n2);
        prop_assert_eq!(std::fs::metadata(env.root().join("dir/two.txt")).unwrap().mode() & 0o7777, 0o600);
        // Baselines refreshed: a second guarded write needs no read.
        ws.check_write(S, b"one.txt").unwrap();
        ws.check_write(S, b"dir/two.txt").unwrap();
    }
}
