//! Placeholders for protected paths that do not exist yet, and their removal.
//!
//! bubblewrap can only mount over something that exists, and under a writable bind it would
//! create the mount point on the host itself and leave it behind (an empty `.rewind.toml` or
//! `.claude/` appearing in the user's workspace after every command). So Rewind creates the
//! placeholder itself, records it (device + inode) in `<state>/sandbox/placeholders`, and
//! removes it after the run if it is still the same, still empty object.
//!
//! Removal must wait until no sandbox is running: unlinking a mount point on the host detaches
//! that mount in every other mount namespace, which would silently unprotect a concurrent run.
//! Every run holds a shared `flock` on `<state>/sandbox/lock` from planning until its child is
//! reaped; whoever then gets the exclusive lock without waiting sweeps the whole registry. (The
//! sandbox itself cannot take that lock: the directory is hidden inside.)

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Directory under the state dir holding the lock and the registry.
pub const DIR: &str = "sandbox";
const LOCK: &str = "lock";
const REGISTRY: &str = "placeholders";
/// Sweeps are short; a shared lock waits at most this long for one.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// A held shared lock; dropping it releases the lock and sweeps if this was the last run.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    lock: File,
}

fn flock(f: &File, op: libc::c_int) -> bool {
    // SAFETY: flock on an owned, open descriptor.
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

impl Session {
    pub fn open(state_dir: &Path) -> Result<Session> {
        let dir = state_dir.join(DIR);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| Error::io("creating", &dir, e))?;
        let path = dir.join(LOCK);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| Error::io("opening", &path, e))?;
        let start = Instant::now();
        while !flock(&lock, libc::LOCK_SH | libc::LOCK_NB) {
            if start.elapsed() > LOCK_WAIT {
                return Err(Error::Unavailable {
                    what: format!("the sandbox lock {} is held", path.display()),
                    hint: "another rewind process is cleaning up; retry".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(Session { dir, lock })
    }

    /// The directory to hide inside the sandbox.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates an empty placeholder (file or directory) and records it. `Ok(false)` when
    /// something appeared there meanwhile (then it is protected as an existing path).
    pub fn create(&self, path: &Path, dir: bool) -> Result<bool> {
        let made = if dir {
            std::fs::DirBuilder::new().mode(0o755).create(path)
        } else {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(path)
                .map(drop)
        };
        match made {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(Error::io("creating placeholder", path, e)),
        }
        let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io("inspecting", path, e))?;
        let line = format!(
            "{} {} {} {}\n",
            if dir { 'd' } else { 'f' },
            meta.dev(),
            meta.ino(),
            hex(path.as_os_str().as_bytes())
        );
        let reg = self.dir.join(REGISTRY);
        OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&reg)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| Error::io("recording placeholder in", &reg, e))?;
        Ok(true)
    }

    fn sweep(&self) {
        let reg = self.dir.join(REGISTRY);
        let mut text = String::new();
        if File::open(&reg)
            .and_then(|mut f| f.read_to_string(&mut text))
            .is_err()
        {
            return;
        }
        for line in text.lines() {
            let mut parts = line.split(' ');
            let (Some(kind), Some(dev), Some(ino), Some(p)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Some(bytes) = unhex(p) else { continue };
            let path = Path::new(std::ffi::OsStr::from_bytes(&bytes));
            let Ok(meta) = std::fs::symlink_metadata(path) else {
                continue;
            };
            if meta.dev().to_string() != dev || meta.ino().to_string() != ino {
                continue; // not ours any more
            }
            // Only if still empty: never delete what a host program put there meanwhile.
            let _ = match kind {
                "d" if meta.is_dir() => std::fs::remove_dir(path),
                "f" if meta.is_file() && meta.len() == 0 => std::fs::remove_file(path),
                _ => Ok(()),
            };
        }
        let _ = std::fs::write(&reg, b"");
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        flock(&self.lock, libc::LOCK_UN);
        if flock(&self.lock, libc::LOCK_EX | libc::LOCK_NB) {
            self.sweep();
            flock(&self.lock, libc::LOCK_UN);
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_swept_by_the_last_session_only() {
        let state = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let a = Session::open(state.path()).unwrap();
        let b = Session::open(state.path()).unwrap();
        assert!(a.create(&ws.path().join(".claude"), true).unwrap());
        assert!(a.create(&ws.path().join(".rewind.toml"), false).unwrap());
        assert!(!b.create(&ws.path().join(".claude"), true).unwrap());
        drop(a); // b still running: nothing removed
        assert!(ws.path().join(".claude").is_dir());
        drop(b);
        assert!(!ws.path().join(".claude").exists());
        assert!(!ws.path().join(".rewind.toml").exists());
    }

    #[test]
    fn non_empty_or_replaced_placeholders_are_kept() {
        let state = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let s = Session::open(state.path()).unwrap();
        s.create(&ws.path().join(".codex"), true).unwrap();
        s.create(&ws.path().join("AGENTS.md"), false).unwrap();
        std::fs::write(ws.path().join(".codex/config.toml"), "x").unwrap();
        std::fs::remove_file(ws.path().join("AGENTS.md")).unwrap();
        std::fs::write(ws.path().join("AGENTS.md"), "mine").unwrap();
        drop(s);
        assert!(ws.path().join(".codex/config.toml").exists());
        assert!(ws.path().join("AGENTS.md").exists());
        assert_eq!(hex(b"/a b"), "2f612062");
        assert_eq!(unhex("2f612062").unwrap(), b"/a b");
    }
}
