//! Large files cloned into the state (`capture.reflink`), through the real binary on a real
//! btrfs volume: a file over the size cap is covered without being copied, put back exactly
//! by a restore and an undo, and an unchanged one is never taken for a change by an exact
//! epoch or the guard.

use rewind_testutil::reflink::ReflinkVolume;

use crate::common::rewind::*;
use crate::common::{noise, text, Env};

const MIB: usize = 1 << 20;

/// A workspace and a state directory on the volume (clones need both on one file system).
fn env_on(vol: &ReflinkVolume) -> Env {
    Env {
        home: tempfile::tempdir_in(vol.path()).unwrap(),
        root: tempfile::tempdir_in(vol.path()).unwrap(),
    }
}

fn clone_files(env: &Env) -> usize {
    walk(env.home.path())
        .iter()
        .filter(|p| p.extension().is_some_and(|x| x == "clone"))
        .count()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn uncovered(env: &Env) -> serde_json::Value {
    json(env, "A", &["status"], 0)["uncovered"].clone()
}

#[test]
fn a_file_over_the_cap_is_cloned_and_put_back_exactly() {
    let vol = ReflinkVolume::new(1024);
    let env = env_on(&vol);
    let root = env.root();
    write(root, ".rewind.toml", b"[capture]\nmax_file_size = \"1M\"\n");
    let v1 = noise(1, 24 * MIB);
    write(root, "data.bin", &v1);
    let before = vol.used_bytes();
    let report = json(&env, "A", &["init"], 0);
    let grew = vol.used_bytes() - before;
    assert_eq!(report["files_cloned"], 1, "{report}");
    assert_eq!(report["bytes_cloned"], 24 * MIB, "{report}");
    assert_eq!(
        report["files_hashed"], 1,
        "only .rewind.toml is read: {report}"
    );
    // Packing it would store 24 MiB (random bytes do not compress).
    assert!(grew < 4 * MIB as u64, "init used {grew} bytes");
    assert_eq!(clone_files(&env), 1);
    assert_eq!(
        uncovered(&env),
        serde_json::json!([]),
        "covered, over the cap"
    );
    checkpoint(&env, "A", "m0");

    sh(
        &env,
        "A",
        "dd if=/dev/zero of=data.bin bs=4096 seek=100 count=3 conv=notrunc status=none; \
         echo tail >> data.bin",
    );
    let v2 = read(root, "data.bin");
    assert_ne!(v2, v1);
    let o = run_s(&env, "A", &["restore", "m0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(read(root, "data.bin") == v1, "restored exactly");
    let o = run_s(&env, "A", &["undo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(read(root, "data.bin") == v2, "undone exactly");
    fsck_clean(&env);
}

#[test]
fn with_reflink_never_the_file_over_the_cap_stays_uncovered() {
    let vol = ReflinkVolume::new(512);
    let env = env_on(&vol);
    let root = env.root();
    write(
        root,
        ".rewind.toml",
        b"[capture]\nmax_file_size = \"1M\"\nreflink = \"never\"\n",
    );
    write(root, "data.bin", &noise(2, 12 * MIB));
    init(&env);
    assert_eq!(clone_files(&env), 0);
    let u = uncovered(&env);
    assert!(u.to_string().contains("data.bin"), "{u}");
}

#[test]
fn an_unchanged_cloned_file_is_not_a_change_to_an_exact_epoch_or_the_guard() {
    let vol = ReflinkVolume::new(512);
    let env = env_on(&vol);
    let root = env.root();
    let v1 = noise(3, 16 * MIB);
    write(root, "data.bin", &v1);
    init(&env);
    assert_eq!(clone_files(&env), 1);

    // An exact epoch that leaves the file alone records nothing, and no external change.
    exact(&env, "A", &["data.bin"], || {});
    let log = json(&env, "A", &["log"], 0).to_string();
    assert!(!log.contains("external"), "{log}");

    // The guarded tools: read, then write. The epoch's preimage is the clone; the guard
    // hashed the disk; the two must be found equal.
    let path = root.join("data.bin").display().to_string();
    let o = env.run(&["-s", "A", "read", &path]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(o.stdout == v1);
    let o = crate::common::output_with_stdin(
        &mut env.cmd(&["-s", "A", "write", &path]),
        b"small now\n",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(read(root, "data.bin"), b"small now\n");
    let o = run_s(&env, "A", &["undo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(read(root, "data.bin") == v1);
    fsck_clean(&env);
}

/// Clone files stay on the machine that made them: a push packs their content first, and a
/// clone of the remote elsewhere (here: off the volume, where nothing can be cloned) gets
/// every version of the file back, with fsck clean on both sides.
#[test]
fn a_cloned_file_travels_through_a_remote_as_packed_content() {
    use crate::remote::{clone_dir, in_clone, Target};
    let vol = ReflinkVolume::new(1024);
    let env = env_on(&vol);
    let root = env.root();
    let v1 = noise(4, 12 * MIB);
    write(root, "data.bin", &v1);
    write(root, "small.txt", b"small\n");
    init(&env);
    let m0 = checkpoint(&env, "A", "m0");
    sh(
        &env,
        "A",
        "dd if=/dev/zero of=data.bin bs=4096 seek=7 count=2 conv=notrunc status=none",
    );
    let v2 = read(root, "data.bin");
    checkpoint(&env, "A", "m1");
    assert!(clone_files(&env) >= 2);

    // Before a push, fsck can only say the clone files are there at their length, and says so.
    let o = run_s(&env, "A", &["fsck"]);
    let said = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        said.contains("present at their length; their bytes have no hash to check until"),
        "{said}"
    );
    let f = json(&env, "A", &["fsck"], 0);
    assert!(f["clones_checked"].as_u64().unwrap() >= 2, "{f}");
    assert_eq!(f["clones_unhashed"], f["clones_checked"], "{f}");

    let target = Target::file();
    target.add(&env);
    let pushed = target.push(&env);
    assert!(pushed["clones_packed"].as_u64().unwrap() >= 2, "{pushed}");
    // Now each clone file is hashed against its packed twin.
    let f = json(&env, "A", &["fsck"], 0);
    assert_eq!(f["clones_unhashed"], 0, "{f}");

    let home = tempfile::tempdir().unwrap();
    let (_t, dir) = clone_dir();
    let o = target.clone_cmd(home.path(), &dir, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "clone: {}", text(&o));
    assert!(std::fs::read(dir.join("data.bin")).unwrap() == v2);
    let o = in_clone(home.path(), &dir, &target, &["-s", "A", "restore", &m0]);
    assert_eq!(o.status.code(), Some(0), "restore: {}", text(&o));
    assert!(std::fs::read(dir.join("data.bin")).unwrap() == v1);
    let o = in_clone(home.path(), &dir, &target, &["fsck"]);
    assert_eq!(o.status.code(), Some(0), "fsck: {}", text(&o));
    // And a second push packs nothing again.
    let again = target.push(&env);
    assert_eq!(again["clones_packed"], 0, "{again}");
}

/// The changes the newest epoch recorded.
fn last_epoch_changes(env: &Env) -> u64 {
    let log = json(env, "A", &["log"], 0);
    let items = log["items"].as_array().unwrap();
    let epoch = items
        .iter()
        .find(|i| i["type"] == "epoch")
        .expect("an epoch");
    epoch["changes"].as_u64().unwrap()
}

/// A large file touched, or rewritten in place with the same bytes, is not a change: its
/// capture compares it with the clone its previous capture made and keeps that clone's id
/// (a clone's id names a capture, so cloning it again would record a change that is none, and
/// a new clone file). A real edit still is one.
#[test]
fn a_touched_or_same_bytes_cloned_file_is_not_a_change() {
    let vol = ReflinkVolume::new(512);
    let env = env_on(&vol);
    let root = env.root();
    let v1 = noise(4, 16 * MIB);
    write(root, "data.bin", &v1);
    init(&env);
    assert_eq!(clone_files(&env), 1);

    sh(&env, "A", "touch data.bin");
    assert_eq!(last_epoch_changes(&env), 0, "touched only");
    sh(
        &env,
        "A",
        "cat data.bin > t.tmp && cat t.tmp > data.bin && rm t.tmp",
    );
    assert_eq!(last_epoch_changes(&env), 0, "the same bytes, new blocks");
    assert_eq!(clone_files(&env), 1, "no second clone");

    sh(
        &env,
        "A",
        "printf x | dd of=data.bin bs=1 seek=5 conv=notrunc status=none",
    );
    assert_eq!(last_epoch_changes(&env), 1, "one byte changed");
    assert_eq!(clone_files(&env), 2);
    let o = run_s(&env, "A", &["undo"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(read(root, "data.bin") == v1);
    fsck_clean(&env);
}
