//! A moved or renamed workspace keeps its history: the next command in the new place re-links
//! it (once, saying so), `log`, `restore` and `undo` work there, a copy gets a history of its
//! own, and `rewind workspace list | move | forget` manage the registrations explicitly.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::common::rewind::{read_str, write};
use crate::common::{text, Env};

/// `rewind ARGS` with `dir` as the working directory (no `-C`): the workspace is found from
/// where the command runs, as a user in a shell finds it.
fn rw(env: &Env, dir: &Path, args: &[&str]) -> Output {
    env.cmd_here(args).current_dir(dir).output().unwrap()
}

fn ok(env: &Env, dir: &Path, args: &[&str]) -> Output {
    let o = rw(env, dir, args);
    assert_eq!(o.status.code(), Some(0), "rewind {args:?}: {}", text(&o));
    o
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(env: &Env, dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_slice(&ok(env, dir, &all).stdout).unwrap()
}

fn workspace_id(env: &Env, dir: &Path) -> String {
    json(env, dir, &["status"])["id"]
        .as_str()
        .unwrap()
        .to_string()
}

fn mv(from: &Path, to: &Path) {
    std::fs::rename(from, to).unwrap();
}

/// A project at `<env root>/a/proj` with a recorded history: checkpoint m1, then session S
/// writes `f.txt` (two) and adds `src/new.rs` through `exec`, then checkpoint m2.
fn project(env: &Env) -> PathBuf {
    let proj = env.root().join("a/proj");
    write(&proj, "f.txt", b"one\n");
    write(&proj, "src/lib.rs", b"fn main() {}\n");
    for i in 0..20 {
        write(&proj, &format!("d/f{i}.txt"), format!("{i}\n").as_bytes());
    }
    ok(env, &proj, &["init"]);
    ok(env, &proj, &["-s", "S", "checkpoint", "--message", "m1"]);
    ok(
        env,
        &proj,
        &[
            "-s",
            "S",
            "exec",
            "--",
            "sh",
            "-c",
            "echo two > f.txt && echo new > src/new.rs",
        ],
    );
    ok(env, &proj, &["-s", "S", "checkpoint", "--message", "m2"]);
    proj
}

/// The history of session S is there (both checkpoints and the exec) and works: restore to m1
/// puts the files back, undo brings S's changes back.
fn history_works(env: &Env, at: &Path) {
    let log = stdout(&ok(env, at, &["-s", "S", "log"]));
    assert!(
        log.contains("msg=m1") && log.contains("msg=m2"),
        "the history is there: {log}"
    );
    ok(env, at, &["-s", "S", "restore", "m1"]);
    assert_eq!(read_str(at, "f.txt"), "one\n");
    assert!(!at.join("src/new.rs").exists());
    ok(env, at, &["-s", "S", "undo"]);
    assert_eq!(read_str(at, "f.txt"), "two\n");
    assert_eq!(read_str(at, "src/new.rs"), "new\n");
}

/// Every file of the state directory: none may name the old root any more, except the record
/// of where the workspace was (`moved_from` in `workspace.json`); and the pointer of the old
/// root is gone (one workspace: one pointer).
fn no_stale_root(env: &Env, old: &Path, new: &Path) {
    let needle = old.as_os_str().as_bytes();
    let mut files = Vec::new();
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    walk(env.home.path(), &mut files);
    // The old root as a prefix of the new one (`…/proj` in `…/proj2`) is not a stale copy.
    let names_old = |bytes: &[u8]| {
        bytes
            .windows(needle.len())
            .enumerate()
            .any(|(i, w)| w == needle && !bytes[i..].starts_with(new.as_os_str().as_bytes()))
    };
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        if f.file_name().is_some_and(|n| n == "workspace.json") {
            let mut rec: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(rec["root"], new.display().to_string());
            let moved = rec["moved_from"].as_array().unwrap();
            assert!(moved.iter().any(|m| m["root"] == old.display().to_string()));
            rec.as_object_mut().unwrap().remove("moved_from");
            let rest = serde_json::to_vec(&rec).unwrap();
            assert!(
                !names_old(&rest),
                "workspace.json names the old root outside moved_from: {rec}"
            );
            continue;
        }
        assert!(
            !names_old(&bytes),
            "{} still names the old root {}",
            f.display(),
            old.display()
        );
    }
    let pointers: Vec<_> = std::fs::read_dir(env.home.path().join("roots"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(
        pointers.len(),
        1,
        "only the new root's pointer is left: {pointers:?}"
    );
}

#[test]
fn a_moved_workspace_keeps_its_history() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let moved = env.root().join("a/proj2");
    mv(&proj, &moved);
    // The first command in the new place re-links, and says so once on stderr.
    let o = ok(&env, &moved, &["-s", "S", "log"]);
    assert!(
        stderr(&o).contains("moved from") && stderr(&o).contains(&id),
        "the re-link is announced: {}",
        text(&o)
    );
    let again = ok(&env, &moved, &["-s", "S", "log"]);
    assert!(
        !stderr(&again).contains("moved"),
        "said once: {}",
        text(&again)
    );
    assert_eq!(workspace_id(&env, &moved), id, "the same workspace");
    history_works(&env, &moved);
    no_stale_root(&env, &proj, &std::fs::canonicalize(&moved).unwrap());
    let list = json(&env, &moved, &["workspace", "list"]);
    let all = list["workspaces"].as_array().unwrap();
    assert_eq!(all.len(), 1, "no second workspace was registered: {list}");
    assert_eq!(all[0]["root_state"], "present");
}

#[test]
fn a_renamed_parent_directory_keeps_the_history_from_a_subdirectory() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let parent = env.root().join("a");
    let renamed = env.root().join("b");
    mv(&parent, &renamed);
    let moved = renamed.join("proj");
    // From a subdirectory: the moved root is found above it, not the subdirectory registered.
    let o = ok(&env, &moved.join("src"), &["--json", "status"]);
    let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(status["id"], id.as_str());
    assert_eq!(
        status["root"],
        std::fs::canonicalize(&moved).unwrap().display().to_string()
    );
    assert!(stderr(&o).contains("moved from"), "{}", text(&o));
    history_works(&env, &moved);
    no_stale_root(&env, &proj, &std::fs::canonicalize(&moved).unwrap());
}

#[test]
fn a_copy_gets_its_own_history_and_the_original_keeps_its_own() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    // `cp -a` copies the root's extended attributes too: the copy carries the original's mark.
    let copy = env.root().join("a/copy");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(&proj)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let o = ok(&env, &copy, &["-s", "S", "log"]);
    assert!(
        !stderr(&o).contains("moved"),
        "a copy is not a move: {}",
        text(&o)
    );
    assert!(
        !stdout(&o).contains("msg=m1"),
        "the copy starts empty: {}",
        stdout(&o)
    );
    let copy_id = workspace_id(&env, &copy);
    assert_ne!(copy_id, id);
    // The original keeps its history and its registration.
    assert_eq!(workspace_id(&env, &proj), id);
    history_works(&env, &proj);
    // Once the original is gone, the copy (which has its own identity now) does not take its
    // history: the original's history is an orphan, shown by status.
    std::fs::remove_dir_all(&proj).unwrap();
    assert_eq!(workspace_id(&env, &copy), copy_id);
    let status = json(&env, &copy, &["status"]);
    let orphans = status["orphans"].as_array().unwrap();
    assert_eq!(orphans.len(), 1, "{status}");
    assert_eq!(orphans[0]["id"], id.as_str());
    assert!(orphans[0]["bytes"].as_u64().unwrap() > 0);
    let human = stdout(&ok(&env, &copy, &["status"]));
    assert!(
        human.contains("orphan") && human.contains(&proj.display().to_string()),
        "{human}"
    );
}

#[test]
fn a_directory_that_no_longer_looks_like_the_workspace_is_not_re_linked() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    // The copy carries the mark (cp -a), then the original goes: identity alone would match.
    let other = env.root().join("other");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(&proj)
        .arg(&other)
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::remove_dir_all(&proj).unwrap();
    // But its content is replaced by something else entirely.
    for e in std::fs::read_dir(&other).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).unwrap();
        } else {
            std::fs::remove_file(&p).unwrap();
        }
    }
    write(&other, "unrelated.txt", b"x\n");
    let o = ok(&env, &other, &["-s", "S", "log"]);
    assert!(!stderr(&o).contains("moved"), "{}", text(&o));
    assert_ne!(workspace_id(&env, &other), id);
}

#[test]
fn workspace_move_renames_and_re_links() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let new = env.root().join("a/renamed");
    let moved = json(
        &env,
        env.root(),
        &["workspace", "move", "a/proj", "a/renamed"],
    );
    assert_eq!(moved["id"], id.as_str());
    assert!(new.join("f.txt").exists() && !proj.exists());
    let o = ok(&env, &new, &["-s", "S", "log"]);
    assert!(
        !stderr(&o).contains("moved"),
        "already re-linked: {}",
        text(&o)
    );
    history_works(&env, &new);
    // NEW is the (gone) root of another workspace: refused before anything is renamed.
    let gone = env.root().join("a/gone");
    std::fs::create_dir(&gone).unwrap();
    ok(&env, &gone, &["init"]);
    std::fs::remove_dir(&gone).unwrap();
    let o = rw(
        &env,
        env.root(),
        &["workspace", "move", "a/renamed", "a/gone"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("forget that one first"), "{}", text(&o));
    assert!(
        new.join("f.txt").exists() && !gone.exists(),
        "nothing renamed"
    );
    // Both exist: refused, nothing changes.
    std::fs::create_dir(&proj).unwrap();
    let o = rw(
        &env,
        env.root(),
        &["workspace", "move", "a/renamed", "a/proj"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(workspace_id(&env, &new), id);
}

#[test]
fn workspace_move_follows_a_move_the_identity_cannot_see() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    // `cp -r` and delete: a new inode and no mark, as after a move across file systems
    // by a tool that drops attributes.
    let new = env.root().join("elsewhere");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(&proj)
        .arg(&new)
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::remove_dir_all(&proj).unwrap();
    let list = json(&env, env.root(), &["workspace", "list"]);
    assert_eq!(list["workspaces"][0]["root_state"], "missing");
    let human = stdout(&ok(&env, env.root(), &["workspace", "list"]));
    assert!(human.contains("root gone"), "{human}");
    ok(
        &env,
        env.root(),
        &["workspace", "move", proj.to_str().unwrap(), "elsewhere"],
    );
    assert_eq!(workspace_id(&env, &new), id);
    history_works(&env, &new);
}

#[test]
fn workspace_forget_asks_and_deletes_the_state() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let state = env.home.path().join("workspaces").join(&id);
    // No terminal and no --yes: refused, with what to do.
    let o = env
        .cmd_here(&["workspace", "forget", "."])
        .current_dir(&proj)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("--yes"), "{}", text(&o));
    assert!(state.exists(), "nothing deleted");
    let o = ok(&env, &proj, &["workspace", "forget", "--yes", "."]);
    assert!(stdout(&o).contains(&id), "{}", text(&o));
    assert!(!state.exists(), "the state is deleted");
    assert_eq!(
        read_str(&proj, "f.txt"),
        "two\n",
        "the files are not touched"
    );
    let list = json(&env, env.root(), &["workspace", "list"]);
    assert_eq!(list["workspaces"].as_array().unwrap().len(), 0);
    // The next command starts a new, empty history.
    let log = stdout(&ok(&env, &proj, &["-s", "S", "log"]));
    assert!(!log.contains("msg=m1"), "{log}");
    assert_ne!(workspace_id(&env, &proj), id);
    // An orphan can be forgotten by its old root too.
    let other_id = workspace_id(&env, &proj);
    std::fs::remove_dir_all(&proj).unwrap();
    ok(
        &env,
        env.root(),
        &["workspace", "forget", "-y", proj.to_str().unwrap()],
    );
    assert!(!env.home.path().join("workspaces").join(other_id).exists());
}

#[test]
fn an_interrupted_restore_is_finished_in_the_new_place() {
    let env = Env::new();
    let proj = project(&env);
    let o = env
        .cmd_here(&["-s", "S", "restore", "m1"])
        .current_dir(&proj)
        .env("REWIND_FAILPOINT", "restore-after-step")
        .output()
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&o.status),
        Some(libc::SIGKILL),
        "{}",
        text(&o)
    );
    let moved = env.root().join("a/proj2");
    mv(&proj, &moved);
    // The next command re-links, then rolls the restore forward in the new place.
    let status = json(&env, &moved, &["-s", "S", "status"]);
    assert_eq!(status["unfinished_restores"].as_array().unwrap().len(), 1);
    ok(&env, &moved, &["-s", "S", "recover"]);
    assert_eq!(read_str(&moved, "f.txt"), "one\n");
    assert!(!moved.join("src/new.rs").exists());
    let status = json(&env, &moved, &["-s", "S", "status"]);
    assert!(status["unfinished_restores"].as_array().unwrap().is_empty());
    assert!(
        !env.root().join("a/proj").exists(),
        "nothing written at the old root"
    );
    ok(&env, &moved, &["-s", "S", "undo"]);
    assert_eq!(read_str(&moved, "f.txt"), "two\n");
    ok(&env, &moved, &["fsck"]);
}

/// Makes workspace `id`'s registration look like one written before roots were marked: no
/// `mark` in its record, no attribute on the root.
fn unmark(env: &Env, id: &str, root: &Path) {
    let path = env
        .home
        .path()
        .join("workspaces")
        .join(id)
        .join("workspace.json");
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    rec.as_object_mut().unwrap().remove("mark");
    std::fs::write(&path, serde_json::to_vec(&rec).unwrap()).unwrap();
    let c = std::ffi::CString::new(root.as_os_str().as_bytes()).unwrap();
    // SAFETY: NUL-terminated path and attribute name.
    unsafe { libc::removexattr(c.as_ptr(), c"user.rewind.id".as_ptr()) };
}

fn record(env: &Env, id: &str) -> serde_json::Value {
    let path = env
        .home
        .path()
        .join("workspaces")
        .join(id)
        .join("workspace.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_workspace_registered_before_marks_is_marked_on_open_and_followed_by_its_inode() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    unmark(&env, &id, &proj);
    assert!(record(&env, &id).get("mark").is_none());
    // The next open records the identity.
    ok(&env, &proj, &["status"]);
    assert_eq!(record(&env, &id)["mark"], true);
    // Without the mark, device and inode (and birth time) still recognise the moved root.
    unmark(&env, &id, &proj);
    let moved = env.root().join("moved");
    mv(&proj, &moved);
    let o = ok(&env, &moved, &["-s", "S", "log"]);
    assert!(stderr(&o).contains("moved from"), "{}", text(&o));
    assert_eq!(workspace_id(&env, &moved), id);
    assert_eq!(record(&env, &id)["mark"], true, "marked in its new place");
    history_works(&env, &moved);
}

#[test]
fn a_re_link_killed_half_way_is_finished_by_the_next_command() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let moved = env.root().join("a/proj2");
    mv(&proj, &moved);
    let o = env
        .cmd_here(&["-s", "S", "log"])
        .current_dir(&moved)
        .env("REWIND_FAILPOINT", "relink-after-record")
        .output()
        .unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&o.status),
        Some(libc::SIGKILL),
        "{}",
        text(&o)
    );
    // The record points at the new root already; its pointer is not published yet.
    assert_eq!(
        record(&env, &id)["root"],
        std::fs::canonicalize(&moved).unwrap().display().to_string()
    );
    assert_eq!(workspace_id(&env, &moved), id);
    history_works(&env, &moved);
    no_stale_root(&env, &proj, &std::fs::canonicalize(&moved).unwrap());
}

#[test]
fn commands_racing_in_a_moved_workspace_re_link_it_once() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let moved = env.root().join("a/proj2");
    mv(&proj, &moved);
    let children: Vec<_> = (0..4)
        .map(|_| {
            env.cmd_here(&["-s", "S", "--json", "status"])
                .current_dir(&moved)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut told = 0;
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(s["id"], id.as_str());
        told += usize::from(stderr(&o).contains("moved from"));
    }
    assert_eq!(told, 1, "exactly one command re-linked and said so");
    let list = json(&env, &moved, &["workspace", "list"]);
    assert_eq!(list["workspaces"].as_array().unwrap().len(), 1);
}

#[test]
fn workspace_adopt_starts_a_copy_from_the_original_history() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let copy = env.root().join("a/try");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(&proj)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(cp.success());
    let a = json(&env, &copy, &["workspace", "adopt", proj.to_str().unwrap()]);
    let new_id = a["id"].as_str().unwrap().to_string();
    assert_ne!(new_id, id);
    assert_eq!(a["from_id"], id.as_str());
    assert_eq!(workspace_id(&env, &copy), new_id);
    // The copy's history is the original's, and works on the copy's files only.
    history_works(&env, &copy);
    assert_eq!(read_str(&proj, "f.txt"), "two\n");
    ok(&env, &copy, &["-s", "S", "restore", "m1"]);
    assert_eq!(read_str(&copy, "f.txt"), "one\n");
    assert_eq!(
        read_str(&proj, "f.txt"),
        "two\n",
        "the original is not touched"
    );
    history_works(&env, &proj);
    ok(&env, &copy, &["fsck"]);
    ok(&env, &proj, &["fsck"]);
    // A directory registered already is refused: its own history would be dropped.
    let o = rw(&env, &copy, &["workspace", "adopt", proj.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("forget"), "{}", text(&o));
}

#[test]
fn a_workspace_moved_into_another_workspace_is_found_by_its_mark() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let outer = env.root().join("outer");
    std::fs::create_dir_all(outer.join("sub")).unwrap();
    ok(&env, &outer, &["init"]);
    let outer_id = workspace_id(&env, &outer);
    let moved = outer.join("sub/proj");
    mv(&proj, &moved);
    let o = ok(&env, &moved.join("src"), &["-s", "S", "log"]);
    assert!(stderr(&o).contains("moved from"), "{}", text(&o));
    assert_eq!(workspace_id(&env, &moved), id);
    assert_eq!(workspace_id(&env, &outer.join("sub")), outer_id);
    history_works(&env, &moved);
}

/// `rewind ARGS` on a terminal (util-linux `script` gives it one), `answer` typed on it.
fn on_a_terminal(env: &Env, dir: &Path, args: &str, answer: &str) -> Output {
    let bin = env!("CARGO_BIN_EXE_rewind");
    let mut c = Command::new("script");
    c.args(["-qec", &format!("{bin} {args}"), "/dev/null"])
        .current_dir(dir)
        .env("REWIND_HOME", env.home.path())
        .env_remove("REWIND_SESSION")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .expect("util-linux `script` runs a command on a terminal");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), answer.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn workspace_forget_on_a_terminal_deletes_only_when_the_answer_is_yes() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let state = env.home.path().join("workspaces").join(&id);
    let o = on_a_terminal(&env, &proj, "workspace forget .", "n\n");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stdout(&o).contains("[y/N]"), "it asks: {}", text(&o));
    assert!(stdout(&o).contains("Nothing was deleted"), "{}", text(&o));
    assert!(state.exists());
    let o = on_a_terminal(&env, &proj, "workspace forget .", "y\n");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!state.exists());
}

#[test]
fn a_re_link_waits_for_the_workspace_lock_and_changes_nothing_when_busy() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let moved = env.root().join("a/proj2");
    mv(&proj, &moved);
    // Another process holds the workspace's lock (a kernel flock, as rewind takes it).
    let lock = env.home.path().join("workspaces").join(&id).join("lock");
    let gates = crate::common::Gates::new(&["go"]);
    let mut holder = Command::new("flock")
        .arg(&lock)
        .arg("sh")
        .arg("-c")
        .arg(format!(
            ": > {}; read x < {}",
            gates.path("held").display(),
            gates.path("go").display()
        ))
        .spawn()
        .unwrap();
    gates.wait_for("held");
    let o = env
        .cmd_here(&["-s", "S", "log"])
        .current_dir(&moved)
        .env("REWIND_LOCK_TIMEOUT", "0.2")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "busy: {}", text(&o));
    assert_eq!(
        record(&env, &id)["root"],
        proj.display().to_string(),
        "nothing re-linked"
    );
    gates.open("go");
    holder.wait().unwrap();
    let o = ok(&env, &moved, &["-s", "S", "log"]);
    assert!(stderr(&o).contains("moved from"), "{}", text(&o));
    history_works(&env, &moved);
}

#[test]
fn an_epoch_opened_before_a_move_is_ended_after_it() {
    let env = Env::new();
    let proj = project(&env);
    ok(
        &env,
        &proj,
        &["-s", "S", "epoch", "begin", "--path", "f.txt"],
    );
    let moved = env.root().join("a/proj2");
    mv(&proj, &moved);
    write(&moved, "f.txt", b"three\n");
    ok(&env, &moved, &["-s", "S", "epoch", "end"]);
    ok(&env, &moved, &["-s", "S", "undo"]);
    assert_eq!(read_str(&moved, "f.txt"), "two\n");
    ok(&env, &moved, &["-s", "S", "restore", "m1"]);
    assert_eq!(read_str(&moved, "f.txt"), "one\n");
}

#[test]
fn a_new_directory_at_the_old_path_is_not_the_moved_workspace() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let moved = env.root().join("a/proj2");
    mv(&proj, &moved);
    std::fs::create_dir(&proj).unwrap();
    // Before the move is noticed, the new directory at the old path is refused as a
    // replacement (the history is not given to it).
    let o = rw(&env, &proj, &["-s", "S", "log"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("replaced or moved"), "{}", text(&o));
    assert!(
        stderr(&o).contains(&format!("seems to be {} now", moved.display())),
        "it says where the directory went: {}",
        text(&o)
    );
    // The moved directory takes its history; then the old path is free for a new one.
    let o = ok(&env, &moved, &["-s", "S", "log"]);
    assert!(stderr(&o).contains("moved from"), "{}", text(&o));
    assert_eq!(workspace_id(&env, &moved), id);
    let log = stdout(&ok(&env, &proj, &["-s", "S", "log"]));
    assert!(!log.contains("msg=m1"), "{log}");
    assert_ne!(workspace_id(&env, &proj), id);
    history_works(&env, &moved);
}

#[test]
fn a_registration_killed_at_any_step_is_usable_by_the_next_command() {
    for point in [
        "register-before-record",
        "register-before-pointer",
        "register-before-mark",
    ] {
        let env = Env::new();
        let proj = env.root().join("proj");
        write(&proj, "f.txt", b"one\n");
        let o = env
            .cmd_here(&["init"])
            .current_dir(&proj)
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&o.status),
            Some(libc::SIGKILL),
            "{point}: {}",
            text(&o)
        );
        let o = rw(&env, &proj, &["init"]);
        assert_eq!(o.status.code(), Some(0), "{point}: {}", text(&o));
        assert!(!stderr(&o).contains("moved"), "{point}: {}", text(&o));
        ok(&env, &proj, &["-s", "S", "checkpoint", "--message", "m1"]);
        ok(&env, &proj, &["fsck"]);
        let list = json(&env, &proj, &["workspace", "list"]);
        let all = list["workspaces"].as_array().unwrap();
        assert_eq!(all.len(), 1, "{point}: {list}");
        let id = all[0]["id"].as_str().unwrap();
        assert_eq!(record(&env, id)["mark"], true, "{point}");
        // A move is still followed.
        let moved = env.root().join("moved");
        mv(&proj, &moved);
        assert_eq!(workspace_id(&env, &moved), id, "{point}");
    }
}

#[test]
fn the_first_capture_after_a_move_reads_no_file_again() {
    let env = Env::new();
    let proj = project(&env);
    // A capture well after the last writes: no entry of the stat cache is too recent to trust.
    std::thread::sleep(std::time::Duration::from_millis(50));
    ok(&env, &proj, &["init"]);
    mv(&env.root().join("a"), &env.root().join("b"));
    let o = ok(&env, &env.root().join("b/proj"), &["--json", "init"]);
    assert!(stderr(&o).contains("moved from"), "{}", text(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["registered"], false);
    // Same file system: inodes and times are kept, so the stat cache vouches for every file.
    assert_eq!(r["files_hashed"], 0, "{r}");
}

/// gc with an aggressive age beside a moved workspace: a moved root not yet re-linked (its
/// directory, carrying its identity, is near where it was) is kept, and so is it once a command
/// there re-linked it; a workspace whose root was deleted is reclaimed, and gc says so.
#[test]
fn gc_reclaims_only_orphans_nothing_claims() {
    let env = Env::new();
    let proj = project(&env);
    let moved_id = workspace_id(&env, &proj);
    let moved_to = env.root().join("a/proj-renamed");
    mv(&proj, &moved_to);
    let gone = env.root().join("gone");
    write(&gone, "x.txt", b"x\n");
    ok(&env, &gone, &["init"]);
    let gone_id = workspace_id(&env, &gone);
    std::fs::remove_dir_all(&gone).unwrap();
    let live = env.root().join("live");
    write(&live, "y.txt", b"y\n");
    ok(&env, &live, &["init"]);
    // Idle past a zero age: both orphans qualify by age; only the unclaimed one goes.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let report = json(&env, &live, &["gc", "--max-age", "0s"]);
    let removed: Vec<&str> = report["orphans_removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(removed, [gone_id.as_str()], "{report}");
    let home = env.home.path().join("workspaces");
    assert!(home.join(&moved_id).exists(), "the moved workspace is kept");
    assert!(!home.join(&gone_id).exists());
    // The first command there re-links it; gc keeps it, and its history works there.
    ok(&env, &moved_to, &["status"]);
    let again = json(&env, &live, &["gc", "--max-age", "0s"]);
    assert!(
        again["orphans_removed"].as_array().unwrap().is_empty(),
        "{again}"
    );
    history_works(&env, &moved_to);
}

/// A copy of the workspace put in its place (`cp -a` keeps the mark) is refused, with a message
/// that says so and names the command that gives it the history (not "it seems to be here").
#[test]
fn a_marked_copy_in_place_is_refused_and_the_hint_relinks_it() {
    let env = Env::new();
    let proj = project(&env);
    let id = workspace_id(&env, &proj);
    let saved = env.root().join("a/saved");
    let cp = Command::new("cp")
        .arg("-a")
        .arg(&proj)
        .arg(&saved)
        .status()
        .unwrap();
    assert!(cp.success());
    std::fs::remove_dir_all(&proj).unwrap();
    mv(&saved, &proj);
    let o = rw(&env, &proj, &["-s", "S", "log"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let hint = format!("rewind workspace move {id} {}", proj.display());
    assert!(
        stderr(&o).contains("a copy of the registered"),
        "{}",
        text(&o)
    );
    assert!(stderr(&o).contains(&hint), "{}", text(&o));
    assert!(!stderr(&o).contains("seems to be"), "{}", text(&o));
    let o = ok(
        &env,
        &proj,
        &["workspace", "move", &id, &proj.display().to_string()],
    );
    let said = stdout(&o);
    assert!(said.contains("now goes with the directory at"), "{said}");
    history_works(&env, &proj);
}
