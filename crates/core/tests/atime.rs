//! A capture reads files without touching their access time.

use crate::common;

use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;

use common::Env;

#[test]
fn a_capture_leaves_access_times_alone() {
    let env = Env::new();
    let file = env.root().join("a.txt");
    std::fs::write(&file, b"content").unwrap();
    // An access time older than the modification time: under `relatime` (the usual mount
    // option) the next read would update it.
    let m = std::fs::metadata(&file).unwrap();
    let old = libc::timespec {
        tv_sec: m.mtime() - 3600,
        tv_nsec: 0,
    };
    let keep = libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_OMIT,
    };
    let path = std::ffi::CString::new(file.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string and two timespecs, as utimensat expects.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), [old, keep].as_ptr(), 0) };
    assert_eq!(rc, 0);
    let (capture, _) = env.open().snapshot("first", None).unwrap();
    assert_eq!(capture.stats.files_hashed, 1, "the file was read");
    assert_eq!(std::fs::metadata(&file).unwrap().atime(), old.tv_sec);
}
