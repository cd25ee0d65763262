//! A directory of thousands of entries is captured exactly as a small one would be: every
//! change found and nothing else, ignored files left out, what cannot be captured recorded as
//! uncovered. A directory of 4,096 entries or more has them stat'ed on every core
//! (`PARALLEL_STAT_AT` in `capture/scan.rs`): this one is above that, so it checks that path.

use crate::common;

use std::os::unix::fs::PermissionsExt;

use common::{write_file, Env};

/// Thousands: above the size from which a directory's entries are stat'ed in parallel.
const FILES: usize = 6000;

fn paths(c: &rewind_core::Capture) -> Vec<String> {
    let mut v: Vec<String> = c
        .changes
        .iter()
        .map(|ch| String::from_utf8_lossy(&ch.path).into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_directory_of_thousands_finds_exactly_what_changed() {
    let env = Env::new();
    let root = env.root();
    write_file(root, b".gitignore", b"big/*.log\n", 0o644);
    for i in 0..FILES {
        let mode = if i % 7 == 0 { 0o755 } else { 0o644 };
        write_file(
            root,
            format!("big/f{i:05}").as_bytes(),
            format!("{i}\n").as_bytes(),
            mode,
        );
    }
    for i in 0..50 {
        write_file(
            root,
            format!("big/x{i}.log").as_bytes(),
            b"ignored\n",
            0o644,
        );
    }
    write_file(root, b"big/sub/inner", b"inner\n", 0o644);
    std::os::unix::fs::symlink("f00001", root.join("big/link")).unwrap();
    let fifo =
        std::ffi::CString::new(root.join("big/fifo").as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);

    let ws = env.open();
    let (first, _) = ws.snapshot("first", None).unwrap();
    // Every entry of big (files, link, fifo, sub) and sub's file, .gitignore and big at the
    // root; no ignored .log file.
    assert_eq!(
        first.stats.entries as usize,
        FILES + 3 + 1 + 2,
        "entries counted: {:?}",
        first.stats
    );
    let fifo_uncovered: Vec<String> = first
        .uncovered
        .iter()
        .map(|u| String::from_utf8_lossy(&u.path).into_owned())
        .collect();
    assert_eq!(fifo_uncovered, ["big/fifo"]);

    // Settle racy entries, then change a few files among the thousands.
    for _ in 0..3 {
        let (c, _) = ws.snapshot("settle", None).unwrap();
        if c.stats.files_hashed == 0 {
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_file(root, b"big/f00010", b"changed\n", 0o644);
    write_file(root, b"big/f05999", b"changed too\n", 0o644);
    std::fs::remove_file(root.join("big/f03000")).unwrap();
    write_file(root, b"big/new", b"new\n", 0o644);
    std::fs::set_permissions(
        root.join("big/f00020"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    write_file(root, b"big/y.log", b"ignored too\n", 0o644);
    let (c, _) = ws.snapshot("changed", None).unwrap();
    assert_eq!(
        paths(&c),
        [
            "big/f00010",
            "big/f00020",
            "big/f03000",
            "big/f05999",
            "big/new"
        ]
    );
    // And nothing more the next time.
    let (c, _) = ws.snapshot("again", None).unwrap();
    assert!(c.changes.is_empty(), "{:?}", paths(&c));
}
