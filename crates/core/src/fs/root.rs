//! File-system writes confined to the workspace root (Linux/Unix `*at` calls).
//!
//! Every operation resolves the parent directory by walking from an open descriptor of the root
//! with `O_NOFOLLOW | O_DIRECTORY`, one component at a time, so a symlink planted anywhere on
//! the way (even between planning and writing) makes the operation fail instead of writing
//! outside the root. Files are written to a temporary name in the same directory with mode
//! 0600, given their exact mode, then renamed over the target: a reader sees the old or the new
//! file, and the file is never more permissive than its target mode while being written.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::fs::relpath;

/// The workspace root, opened once.
pub struct RootDir {
    fd: OwnedFd,
}

/// What is at a path right now (`lstat`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Present {
    Absent,
    Dir { mode: u32 },
    File { mode: u32 },
    Symlink,
    Other,
}

fn cstr(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

const DIR_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;

impl RootDir {
    pub fn open(root: &Path) -> io::Result<RootDir> {
        use std::os::unix::ffi::OsStrExt;
        let c = cstr(root.as_os_str().as_bytes())?;
        // SAFETY: plain syscall on a valid C string; the fd is owned below.
        let fd = check(unsafe { libc::open(c.as_ptr(), DIR_FLAGS) })?;
        Ok(RootDir {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Opens the directory holding `rel` without following any symlink; returns it and the
    /// final name.
    fn parent<'a>(&self, rel: &'a [u8]) -> io::Result<(OwnedFd, &'a [u8])> {
        relpath::check(rel)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let (dir, name) = relpath::split(rel);
        let mut cur = self.fd.try_clone()?;
        if !dir.is_empty() {
            for comp in dir.split(|b| *b == b'/') {
                cur = open_dir_at(&cur, comp, rel)?;
            }
        }
        Ok((cur, name))
    }

    /// The descriptor of the root itself.
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    pub fn lstat(&self, rel: &[u8]) -> io::Result<Present> {
        let (dir, name) = match self.parent(rel) {
            Ok(p) => p,
            // A missing parent, or one that is a symlink or a file: nothing is at this path
            // inside the workspace (a symlink's target is never looked at).
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(Present::Absent)
            }
            Err(e) => return Err(e),
        };
        lstat_at(&dir, name)
    }

    /// Opens a regular file for reading without following a symlink at any component.
    pub fn open_read(&self, rel: &[u8]) -> io::Result<File> {
        self.open_read_with(rel, 0)
    }

    /// [`RootDir::open_read`] with `extra` open flags (`O_NOATIME`).
    pub fn open_read_with(&self, rel: &[u8], extra: libc::c_int) -> io::Result<File> {
        let (dir, name) = self.parent(rel)?;
        let c = cstr(name)?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | extra;
        // SAFETY: valid fd and C string.
        let fd = check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), flags) })?;
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// The text of a symlink (never followed).
    pub fn read_link(&self, rel: &[u8]) -> io::Result<Vec<u8>> {
        let (dir, name) = self.parent(rel)?;
        let c = cstr(name)?;
        let mut buf = vec![0u8; 4096];
        // SAFETY: valid fd, C string and buffer of the given length.
        let n = unsafe {
            libc::readlinkat(
                dir.as_raw_fd(),
                c.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        buf.truncate(n as usize);
        Ok(buf)
    }

    /// Removes a file or symlink. Absent is success (idempotent).
    pub fn remove_file(&self, rel: &[u8]) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        remove_file_at(&dir, name)
    }

    /// Removes an empty directory. Returns `Ok(false)` if it still holds entries (files Rewind
    /// does not track, such as ignored ones), which are then left alone.
    pub fn remove_dir(&self, rel: &[u8]) -> io::Result<bool> {
        let (dir, name) = self.parent(rel)?;
        remove_dir_at(&dir, name)
    }

    /// Whether this process may list the directory at `rel` (opening it is enough to tell:
    /// `EACCES` for a directory without read permission).
    pub fn can_list(&self, rel: &[u8]) -> bool {
        let Ok((dir, name)) = self.parent(rel) else {
            return false;
        };
        let Ok(c) = cstr(name) else { return false };
        // SAFETY: valid fd and C string; the descriptor is closed at once.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), DIR_FLAGS) };
        if fd < 0 {
            return false;
        }
        // SAFETY: fd was just opened here.
        unsafe { libc::close(fd) };
        true
    }

    /// The names in a directory (without `.` and `..`), opened without following a symlink at
    /// any component.
    pub fn list_dir(&self, rel: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        Ok(self
            .list_dir_stat(rel, false)?
            .into_iter()
            .map(|(n, _)| n)
            .collect())
    }

    /// [`RootDir::list_dir`] with each name's `lstat` when `stat` is set (taken relative to the
    /// directory's descriptor: it works however long the path is). Every relative operation
    /// here works below `PATH_MAX` too, which a walk by absolute paths cannot reach.
    #[allow(clippy::type_complexity)]
    pub fn list_dir_stat(
        &self,
        rel: &[u8],
        stat: bool,
    ) -> io::Result<Vec<(Vec<u8>, Option<io::Result<libc::stat>>)>> {
        let fd = if rel.is_empty() {
            // SAFETY: a plain dup of a descriptor this value owns.
            check(unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) })?
        } else {
            let (dir, name) = self.parent(rel)?;
            let c = cstr(name)?;
            // SAFETY: valid fd and C string; the new fd is handed to fdopendir (or closed).
            check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), DIR_FLAGS) })?
        };
        // SAFETY: fd is a directory descriptor this function owns; fdopendir takes it over.
        let d = unsafe { libc::fdopendir(fd) };
        if d.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: still ours, since fdopendir failed.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let mut names = Vec::new();
        loop {
            // SAFETY: d is an open DIR*; the entry is read before the next readdir call.
            let ent = unsafe { libc::readdir(d) };
            if ent.is_null() {
                break;
            }
            // SAFETY: d_name is a NUL-terminated name within the entry.
            let name = unsafe { std::ffi::CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                let st = stat.then(|| {
                    let mut st: libc::stat = unsafe { std::mem::zeroed() };
                    // SAFETY: the DIR*'s own descriptor, a NUL-terminated name from the
                    // entry, and an out-pointer.
                    let rc = unsafe {
                        libc::fstatat(
                            libc::dirfd(d),
                            (*ent).d_name.as_ptr(),
                            &mut st,
                            libc::AT_SYMLINK_NOFOLLOW,
                        )
                    };
                    if rc < 0 {
                        Err(io::Error::last_os_error())
                    } else {
                        Ok(st)
                    }
                });
                names.push((name.to_vec(), st));
            }
        }
        // SAFETY: closes the DIR* and its descriptor, once.
        unsafe { libc::closedir(d) };
        Ok(names)
    }

    /// Creates a directory owner-only; its real mode is set by [`RootDir::chmod_dir`] once its
    /// children are written. Existing directory is success.
    pub fn make_dir(&self, rel: &[u8]) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        make_dir_at(&dir, name)
    }

    /// Sets a directory's permission bits (the directory is opened, never followed).
    pub fn chmod_dir(&self, rel: &[u8], mode: u32) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        chmod_dir_at(&dir, name, mode)
    }

    /// Writes a regular file atomically: temp name in the same directory (0600), content from
    /// `fill`, exact mode, optional fsync, rename over `rel`. Returns the written file's metadata.
    pub fn write_file(
        &self,
        rel: &[u8],
        mode: u32,
        durable: bool,
        fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
    ) -> io::Result<std::fs::Metadata> {
        let (dir, name) = self.parent(rel)?;
        let (tmp, mut file) = temp_file_at(&dir)?;
        let written = (|| {
            fill(&mut file)?;
            file.flush()?;
            // SAFETY: valid fd.
            check(unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) })?;
            if durable {
                file.sync_all()?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            let _ = unlink_at(&dir, &tmp);
            return Err(e);
        }
        rename_into_place(&dir, &tmp, name, &file)
    }

    /// Writes the content `rel` is about to get into a new file that has no name yet
    /// (`O_TMPFILE`), gives it `mode` and fsyncs it; [`RootDir::write_file_staged`] later puts
    /// it in place. This lets the slow part of a durable write (the fsync) run before it is
    /// decided that the write happens, at the same time as other work; a process killed before
    /// the file is linked leaves nothing behind. `None` where the file system cannot do it (the
    /// write is then made in full by `write_file_staged`).
    pub fn stage_file(
        &self,
        rel: &[u8],
        mode: u32,
        fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
    ) -> io::Result<Option<StagedFile>> {
        let (dir, _) = self.parent(rel)?;
        let c = cstr(b".")?;
        let flags = libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC;
        // SAFETY: valid fd and C string.
        let fd = match check(unsafe {
            libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint)
        }) {
            Ok(fd) => fd,
            // Not supported by this kernel or file system.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
                ) =>
            {
                return Ok(None)
            }
            Err(e) => return Err(e),
        };
        // SAFETY: a fresh fd we own.
        let mut file = unsafe { File::from_raw_fd(fd) };
        fill(&mut file)?;
        file.flush()?;
        // SAFETY: valid fd.
        check(unsafe { libc::fchmod(file.as_raw_fd(), mode as libc::mode_t) })?;
        file.sync_all()?;
        Ok(Some(StagedFile { file }))
    }

    /// Puts a staged file in place at `rel` (a temporary name, then a rename over `rel`), or,
    /// with no staged file or one that cannot be linked here, writes it as
    /// [`RootDir::write_file`] does. Returns the written file's metadata.
    pub fn write_file_staged(
        &self,
        rel: &[u8],
        staged: Option<StagedFile>,
        mode: u32,
        durable: bool,
        fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
    ) -> io::Result<std::fs::Metadata> {
        let Some(staged) = staged else {
            return self.write_file(rel, mode, durable, fill);
        };
        // The directory is looked up again: it may have been replaced since the staging.
        let (dir, name) = self.parent(rel)?;
        let Some(tmp) = link_temp(&dir, &staged.file)? else {
            return self.write_file(rel, mode, durable, fill);
        };
        rename_into_place(&dir, &tmp, name, &staged.file)
    }

    /// Creates (or replaces) a symlink atomically via a temporary name. The link is created, not
    /// followed: its text may point anywhere.
    pub fn write_symlink(&self, rel: &[u8], target: &[u8]) -> io::Result<()> {
        let (dir, name) = self.parent(rel)?;
        write_symlink_at(&dir, name, target)
    }
}

/// Opens the directory `comp` in `dir`, never following a symlink (`rel` names the path being
/// worked on, for the error).
pub(super) fn open_dir_at(dir: &OwnedFd, comp: &[u8], rel: &[u8]) -> io::Result<OwnedFd> {
    let c = cstr(comp)?;
    // SAFETY: valid fd and C string.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), DIR_FLAGS) };
    let fd = check(fd).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) || e.raw_os_error() == Some(libc::ENOTDIR) {
            io::Error::new(
                io::ErrorKind::NotADirectory,
                format!(
                    "refusing to write under {}: a component is a symlink or not a directory",
                    relpath::display(rel)
                ),
            )
        } else {
            e
        }
    })?;
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What `name` in `dir` is (`lstat`, never following it).
pub(super) fn lstat_at(dir: &OwnedFd, name: &[u8]) -> io::Result<Present> {
    let c = cstr(name)?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd, C string and out-pointer.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::NotFound {
            Ok(Present::Absent)
        } else {
            Err(e)
        };
    }
    let mode = st.st_mode & 0o7777;
    Ok(match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => Present::Dir { mode },
        libc::S_IFREG => Present::File { mode },
        libc::S_IFLNK => Present::Symlink,
        _ => Present::Other,
    })
}

/// Removes the file or symlink `name` in `dir`; absent is success.
pub(super) fn remove_file_at(dir: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid fd and C string.
    match check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) }) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map(drop),
    }
}

/// Removes the empty directory `name` in `dir`: `Ok(false)` when it still holds entries.
pub(super) fn remove_dir_at(dir: &OwnedFd, name: &[u8]) -> io::Result<bool> {
    let c = cstr(name)?;
    // SAFETY: valid fd and C string.
    match check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) }) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e)
            if e.raw_os_error() == Some(libc::ENOTEMPTY)
                || e.raw_os_error() == Some(libc::EEXIST) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Creates the directory `name` in `dir` owner-only; an existing directory is success.
pub(super) fn make_dir_at(dir: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid fd and C string.
    match check(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) }) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => match lstat_at(dir, name)? {
            Present::Dir { .. } => Ok(()),
            _ => Err(e),
        },
        r => r.map(drop),
    }
}

/// Sets the mode of the directory `name` in `dir`, opened without following a symlink.
pub(super) fn chmod_dir_at(dir: &OwnedFd, name: &[u8], mode: u32) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid fd and C string; O_NOFOLLOW keeps this off symlinks.
    let fd = check(unsafe { libc::openat(dir.as_raw_fd(), c.as_ptr(), DIR_FLAGS) })?;
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    check(unsafe { libc::fchmod(fd.as_raw_fd(), mode as libc::mode_t) }).map(drop)
}

/// Creates (or replaces) the symlink `name` in `dir` through a temporary name.
pub(super) fn write_symlink_at(dir: &OwnedFd, name: &[u8], target: &[u8]) -> io::Result<()> {
    let t = cstr(target)?;
    for attempt in 0..16u32 {
        let tmp = temp_name(attempt);
        let c = cstr(&tmp)?;
        // SAFETY: valid fd and C strings.
        match check(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), c.as_ptr()) }) {
            Ok(_) => {
                return rename_at(dir, &tmp, name).inspect_err(|_| {
                    let _ = unlink_at(dir, &tmp);
                })
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "could not find a free temporary name",
    ))
}

/// A new file under a free temporary name in `dir` (0600, never an existing file).
pub(super) fn temp_file_at(dir: &OwnedFd) -> io::Result<(Vec<u8>, File)> {
    for attempt in 0..16u32 {
        let tmp = temp_name(attempt);
        let c = cstr(&tmp)?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: valid fd and C string.
        match check(unsafe {
            libc::openat(dir.as_raw_fd(), c.as_ptr(), flags, 0o600 as libc::c_uint)
        }) {
            Ok(fd) => return Ok((tmp, unsafe { File::from_raw_fd(fd) })),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "could not find a free temporary name",
    ))
}

impl RootDir {
    /// Removes the dead writers' `TEMP_PREFIX` files from the directories of `paths` (each
    /// directory once): what a restore or a guarded write killed before its renames left.
    pub fn remove_dead_temp_files_beside<'a>(&self, paths: impl Iterator<Item = &'a [u8]>) {
        let mut dirs: Vec<&[u8]> = paths.map(|p| relpath::split(p).0).collect();
        dirs.sort_unstable();
        dirs.dedup();
        for d in dirs {
            self.remove_dead_temp_files(d);
        }
    }

    /// Removes `TEMP_PREFIX` files in `dir` whose writing process is gone. Best effort.
    fn remove_dead_temp_files(&self, dir: &[u8]) {
        use std::os::unix::ffi::OsStrExt;
        let path = if dir.is_empty() {
            Vec::new()
        } else {
            dir.to_vec()
        };
        let Ok(fd) = (if path.is_empty() {
            self.fd.try_clone()
        } else {
            let probe = relpath::join(&path, b"x");
            self.parent(&probe).map(|(fd, _)| fd)
        }) else {
            return;
        };
        let Ok(rd) = std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd())) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(rest) = name.as_bytes().strip_prefix(TEMP_PREFIX.as_bytes()) else {
                continue;
            };
            let pid: Option<i32> = std::str::from_utf8(rest)
                .ok()
                .and_then(|r| r.split('-').next()?.parse().ok());
            // SAFETY: signal 0 only checks whether the process exists.
            let alive = pid.is_some_and(|p| {
                (unsafe { libc::kill(p, 0) }) == 0
                    || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
            });
            if !alive {
                if let Ok(c) = cstr(name.as_bytes()) {
                    // SAFETY: valid fd and C string.
                    unsafe { libc::unlinkat(fd.as_raw_fd(), c.as_ptr(), 0) };
                }
            }
        }
    }
}

/// Renames the complete file `file`, under the temporary name `tmp` in `dir`, over `name`;
/// returns its metadata. On failure the temporary name is removed.
pub(super) fn rename_into_place(
    dir: &OwnedFd,
    tmp: &[u8],
    name: &[u8],
    file: &File,
) -> io::Result<std::fs::Metadata> {
    let result = (|| {
        let meta = file.metadata()?;
        crate::base::failpoint::hit("write-before-rename");
        rename_at(dir, tmp, name)?;
        Ok(meta)
    })();
    if result.is_err() {
        let _ = unlink_at(dir, tmp);
    }
    result
}

/// A file's new content, durable but not linked anywhere yet (see [`RootDir::stage_file`]).
pub struct StagedFile {
    file: File,
}

/// Gives a staged file a temporary name in `dir`. `None` when it cannot be linked there: a
/// different file system, or neither `AT_EMPTY_PATH` (needs a capability) nor `/proc` usable.
fn link_temp(dir: &OwnedFd, file: &File) -> io::Result<Option<Vec<u8>>> {
    let proc_path = cstr(format!("/proc/self/fd/{}", file.as_raw_fd()).as_bytes())?;
    for attempt in 0..16u32 {
        let tmp = temp_name(attempt);
        let c = cstr(&tmp)?;
        // SAFETY: valid fds and C strings.
        let mut rc = unsafe {
            libc::linkat(
                file.as_raw_fd(),
                c"".as_ptr(),
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        };
        if rc < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            // SAFETY: as above.
            rc = unsafe {
                libc::linkat(
                    libc::AT_FDCWD,
                    proc_path.as_ptr(),
                    dir.as_raw_fd(),
                    c.as_ptr(),
                    libc::AT_SYMLINK_FOLLOW,
                )
            };
        }
        match check(rc) {
            Ok(_) => return Ok(Some(tmp)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(_) => return Ok(None),
        }
    }
    Ok(None)
}

/// Prefix of the temporary names a restore writes; the scanner never sees them for long, and a
/// leftover one from a crash is an ordinary untracked file the user can delete.
pub const TEMP_PREFIX: &str = ".rewind-tmp-";

fn temp_name(attempt: u32) -> Vec<u8> {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{TEMP_PREFIX}{}-{nanos:x}-{attempt}", std::process::id()).into_bytes()
}

pub(super) fn rename_at(dir: &OwnedFd, from: &[u8], to: &[u8]) -> io::Result<()> {
    let (f, t) = (cstr(from)?, cstr(to)?);
    // SAFETY: valid fds and C strings.
    check(unsafe { libc::renameat(dir.as_raw_fd(), f.as_ptr(), dir.as_raw_fd(), t.as_ptr()) })
        .map(drop)
}

pub(super) fn unlink_at(dir: &OwnedFd, name: &[u8]) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid fd and C string.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) }).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn fill(bytes: &[u8]) -> impl FnMut(&mut File) -> io::Result<()> + '_ {
        move |f: &mut File| f.write_all(bytes)
    }

    #[test]
    fn a_staged_file_goes_in_place_with_its_content_and_mode() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("d")).unwrap();
        std::fs::write(t.path().join("d/f"), b"old").unwrap();
        let root = RootDir::open(t.path()).unwrap();
        let staged = root.stage_file(b"d/f", 0o751, &mut fill(b"new")).unwrap();
        if staged.is_none() {
            // No O_TMPFILE on this file system: the write below is made in full.
            eprintln!("note: the temporary directory's file system cannot stage files");
        }
        // Staged, nothing is visible yet.
        assert_eq!(std::fs::read(t.path().join("d/f")).unwrap(), b"old");
        assert_eq!(names(&t.path().join("d")), ["f"]);
        let meta = root
            .write_file_staged(b"d/f", staged, 0o751, true, &mut fill(b"new"))
            .unwrap();
        assert_eq!(std::fs::read(t.path().join("d/f")).unwrap(), b"new");
        let mode = std::fs::metadata(t.path().join("d/f"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o751);
        assert_eq!(meta.len(), 3);
        assert_eq!(names(&t.path().join("d")), ["f"], "no temporary name left");
    }

    #[test]
    fn a_dropped_staged_file_leaves_nothing() {
        let t = tempfile::tempdir().unwrap();
        let root = RootDir::open(t.path()).unwrap();
        let staged = root.stage_file(b"f", 0o644, &mut fill(b"x")).unwrap();
        drop(staged);
        assert!(names(t.path()).is_empty());
    }

    #[test]
    fn without_a_staged_file_the_write_is_made_in_full() {
        let t = tempfile::tempdir().unwrap();
        let root = RootDir::open(t.path()).unwrap();
        root.write_file_staged(b"f", None, 0o600, true, &mut fill(b"abc"))
            .unwrap();
        assert_eq!(std::fs::read(t.path().join("f")).unwrap(), b"abc");
        // Staging into a directory that does not exist fails (the write that follows creates
        // the directory first and reports its own errors).
        assert!(root
            .stage_file(b"missing/f", 0o600, &mut fill(b"abc"))
            .is_err());
    }
}
