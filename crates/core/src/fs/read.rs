//! Opening a workspace file to read its content for a capture (by the capture itself, a
//! background baseline or a live watcher's thread): without following a final symlink,
//! blocking on a FIFO or touching the file's access time.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::fs::root::RootDir;

/// Opens a file to read its content: never through a final symlink, never blocking on a FIFO
/// swapped in since the walk, and without updating its access time where the kernel allows it
/// (`O_NOATIME` needs the file's owner or CAP_FOWNER). A capture is not a use of the file:
/// it should leave no trace on it, and at 100k files the atime updates are each an inode
/// written to the journal (5 % of a first capture's samples in one profile).
///
/// A path longer than the kernel takes (`ENAMETOOLONG`: deeper than `PATH_MAX`) is opened by
/// descriptors from the root instead, one component at a time.
pub(crate) fn open_for_capture(root: &Path, abs: &Path, rel: &[u8]) -> std::io::Result<File> {
    static NOATIME_REFUSED: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);
    let open = |extra: i32| {
        let r = File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | extra)
            .open(abs);
        match r {
            Err(e) if e.raw_os_error() == Some(libc::ENAMETOOLONG) => {
                RootDir::open(root)?.open_read_with(rel, extra)
            }
            r => r,
        }
    };
    if !NOATIME_REFUSED.load(Ordering::Relaxed) {
        match open(libc::O_NOATIME) {
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                NOATIME_REFUSED.store(true, Ordering::Relaxed);
            }
            r => return r,
        }
    }
    open(0)
}
