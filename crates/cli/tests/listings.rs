//! A walk reuses the cached listing of a directory whose stamp vouches for it instead of
//! reading it (`docs/format.md`, "Trusted directory listings"), and an `exec`, whose settle
//! capture looks again only at what its watcher saw, leaves every directory with a stamp: the
//! ones it did not read keep theirs, the ones it read get fresh ones. Checked on the real binary
//! through `REWIND_TRACE`'s count of directories read and reused.

use crate::common;

use common::rewind::write;
use common::{text, Env};

/// The walk's line of a traced `rewind exec -- true`.
fn traced_walk(env: &Env) -> String {
    let o = env
        .cmd(&["-s", "S", "exec", "--", "true"])
        .env("REWIND_TRACE", "1")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    err.lines()
        .rfind(|l| l.contains("capture: walk"))
        .unwrap_or_else(|| panic!("no walk traced: {err}"))
        .to_string()
}

/// Whether the workspace's file system is one where listings are trusted (as
/// `scan::keeps_directory_mtimes` decides).
fn trusted_here(env: &Env) -> bool {
    let o = std::process::Command::new("stat")
        .args(["-f", "-c", "%t"])
        .arg(env.root())
        .output()
        .unwrap();
    let magic = String::from_utf8_lossy(&o.stdout).trim().to_string();
    ["ef53", "58465342", "9123683e", "1021994", "f2f52010"].contains(&magic.as_str())
}

#[test]
fn an_exec_leaves_every_listing_stamped() {
    let env = Env::new();
    for d in ["a", "a/b", "c"] {
        write(env.root(), &format!("{d}/f"), b"x\n");
    }
    // The listings `init` reads are a second younger than the directories: stamps that vouch.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let o = env.cmd(&["init"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    // A content change: no directory's mtime moves; the settle looks again at a/b/f, which
    // the watcher named, and nothing else (a/b keeps its stamp).
    let o = env
        .cmd(&["-s", "S", "exec", "--", "sh", "-c", "echo y >> a/b/f"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let walk = traced_walk(&env);
    let counts: Vec<usize> = walk
        .rsplit('(')
        .next()
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    let [read, reused, watched] = counts[..] else {
        panic!("{walk}")
    };
    assert_eq!(read + reused, 4, "{walk}");
    assert_eq!(watched, 0, "an opening capture has no watcher yet: {walk}");
    if trusted_here(&env) {
        // The root may be read: `init` marks it (its ctime moves) in the second of its
        // listing, and no capture since has saved a fresh stamp for a directory this small.
        // a/b, which the settle re-read, must not be.
        assert!(reused >= 3, "{walk}");
    } else {
        assert_eq!(reused, 0, "{walk}");
    }
}
