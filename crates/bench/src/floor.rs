//! `rewind-bench floor`: the work no tool can skip, done by the plainest code, so a target
//! stated as a ratio against git can be checked against what the machine allows.
//!
//! * `walk`: list every directory and `lstat` every entry, on every core, each name relative to
//!   its directory's descriptor. This is all a no-op capture without a watcher must do: a file's
//!   content can change without its directory changing, so every file's `lstat` is needed.
//! * `capture`: the walk, plus opening and reading every regular file, hashing it with BLAKE3
//!   (the id Rewind gives content), appending its bytes to one output file per thread and
//!   flushing those files at the end. This is the least a durable first capture does; it
//!   compresses nothing, indexes nothing, records nothing.
//!
//! Nothing here is Rewind's code: the point is a baseline that owes nothing to its design.

use std::ffi::{CStr, CString};
use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};

#[derive(clap::Args, Debug)]
pub struct Opts {
    /// `walk` (list and `lstat` everything) or `capture` (also read, hash, write and flush).
    #[arg(value_parser = ["walk", "capture"])]
    what: String,
    /// The tree to walk.
    dir: PathBuf,
    /// Where `capture` writes its output files (one per thread; required for `capture`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

/// What one thread saw.
#[derive(Default, Debug, PartialEq)]
struct Tally {
    entries: u64,
    files: u64,
    bytes: u64,
    /// XOR of the first 8 bytes of every file's hash: printed, so the hashing cannot be
    /// optimised away and two runs over the same tree can be compared.
    digest: u64,
}

/// Directories not yet listed, and how many threads are listing one (the walk is over when
/// both are zero).
struct Queue {
    dirs: Vec<CString>,
    busy: usize,
}

pub fn run(o: &Opts) -> Result<()> {
    let sum = measure(o)?;
    println!(
        "{} entries, {} files read, {} bytes, digest {:016x}",
        sum.entries, sum.files, sum.bytes, sum.digest
    );
    Ok(())
}

fn measure(o: &Opts) -> Result<Tally> {
    let threads = o
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let capture = o.what == "capture";
    if capture && o.out.is_none() {
        bail!("floor capture needs --out DIR (where its output files go)");
    }
    let root = CString::new(o.dir.as_os_str().as_encoded_bytes())?;
    let queue = Mutex::new(Queue {
        dirs: vec![root],
        busy: 0,
    });
    let ready = std::sync::Condvar::new();
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (queue, ready) = (&queue, &ready);
                let out = o.out.as_ref().map(|d| d.join(format!("floor.{t}")));
                s.spawn(move || worker(queue, ready, out))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a floor thread panicked"))
            .collect::<Result<_>>()
    })?;
    if let Some(out) = &o.out {
        std::fs::File::open(out)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("fsync {}", out.display()))?;
    }
    Ok(tallies.iter().fold(Tally::default(), |a, t| Tally {
        entries: a.entries + t.entries,
        files: a.files + t.files,
        bytes: a.bytes + t.bytes,
        digest: a.digest ^ t.digest,
    }))
}

fn worker(queue: &Mutex<Queue>, ready: &std::sync::Condvar, out: Option<PathBuf>) -> Result<Tally> {
    let mut out = match out {
        Some(p) => {
            Some(std::fs::File::create(&p).with_context(|| format!("create {}", p.display()))?)
        }
        None => None,
    };
    let mut tally = Tally::default();
    let mut buf = Vec::new();
    loop {
        let dir = {
            let mut q = queue.lock().unwrap();
            loop {
                if let Some(d) = q.dirs.pop() {
                    q.busy += 1;
                    break Some(d);
                }
                if q.busy == 0 {
                    break None;
                }
                q = ready.wait(q).unwrap();
            }
        };
        let Some(dir) = dir else { break };
        let found = list(&dir, out.as_mut(), &mut buf, &mut tally);
        let mut q = queue.lock().unwrap();
        q.busy -= 1;
        let found = found.map(|subdirs| q.dirs.extend(subdirs));
        ready.notify_all();
        drop(q);
        found?;
    }
    if let Some(f) = out {
        f.sync_all().context("fsync a floor output file")?;
    }
    Ok(tally)
}

/// Lists `dir`, `lstat`s each entry (and, with `out`, reads, hashes and copies each regular
/// file); returns its subdirectories.
fn list(
    dir: &CStr,
    mut out: Option<&mut std::fs::File>,
    buf: &mut Vec<u8>,
    tally: &mut Tally,
) -> Result<Vec<CString>> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid C string; the descriptor is owned below.
    let fd = unsafe { libc::open(dir.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("open {dir:?}"));
    }
    // SAFETY: `fd` is open and ours; `fdopendir` takes it over, `closedir` closes it.
    let stream = unsafe { libc::fdopendir(fd) };
    if stream.is_null() {
        // SAFETY: still ours when fdopendir fails.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        bail!("fdopendir {dir:?}");
    }
    let mut subdirs = Vec::new();
    let result = (|| -> Result<()> {
        loop {
            // SAFETY: a valid stream; the entry lives until the next readdir.
            let e = unsafe { libc::readdir(stream) };
            if e.is_null() {
                return Ok(());
            }
            // SAFETY: readdir returned a valid entry whose name is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*e).d_name.as_ptr()) };
            if matches!(name.to_bytes(), b"." | b"..") {
                continue;
            }
            // SAFETY: a zeroed stat is a valid out-parameter.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: `fd` is open, `name` NUL-terminated, `st` writable.
            let r = unsafe { libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
            if r != 0 {
                continue; // gone since the listing
            }
            tally.entries += 1;
            match st.st_mode & libc::S_IFMT {
                libc::S_IFDIR => {
                    let mut p = dir.to_bytes().to_vec();
                    p.push(b'/');
                    p.extend_from_slice(name.to_bytes());
                    subdirs.push(CString::new(p)?);
                }
                libc::S_IFREG => {
                    if let Some(out) = out.as_deref_mut() {
                        read_one(fd, name, st.st_size as usize, buf)?;
                        let h = blake3::hash(buf);
                        tally.digest ^= u64::from_le_bytes(h.as_bytes()[..8].try_into()?);
                        tally.files += 1;
                        tally.bytes += buf.len() as u64;
                        out.write_all(buf).context("write a floor output file")?;
                    }
                }
                _ => {}
            }
        }
    })();
    // SAFETY: the stream is valid and closed once (it closes `fd`).
    unsafe { libc::closedir(stream) };
    result.map(|()| subdirs)
}

/// Reads file `name` of directory `dir`, `size` bytes by its `lstat`, into `buf` (as many
/// bytes as it holds now).
fn read_one(dir: i32, name: &CStr, size: usize, buf: &mut Vec<u8>) -> Result<()> {
    use std::io::Read;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `dir` is open, `name` NUL-terminated.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("open {name:?}"));
    }
    // SAFETY: `fd` was just opened and is owned by the file from here on.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    // Not `read_to_end`, which asks the kernel for the size again.
    buf.resize(size + 1, 0);
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(2 * len, 0);
        }
        match f
            .read(&mut buf[len..])
            .with_context(|| format!("read {name:?}"))?
        {
            0 => break,
            n => len += n,
        }
    }
    buf.truncate(len);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The floor must do all the work it stands for: every entry `lstat`ed once, at any depth,
    /// symlinks not followed, and for `capture` every regular file's bytes hashed and written.
    #[test]
    fn floor_sees_every_entry_and_copies_every_file() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("tree");
        let mut want = Tally::default();
        for d in ["a", "a/b", "a/b/c", "e"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        want.entries = 4;
        for (i, f) in ["x", "a/y", "a/b/z", "a/b/c/w", "e/v"].iter().enumerate() {
            let bytes = vec![i as u8; 1000 * i + 1];
            want.entries += 1;
            want.files += 1;
            want.bytes += bytes.len() as u64;
            let h = blake3::hash(&bytes);
            want.digest ^= u64::from_le_bytes(h.as_bytes()[..8].try_into().unwrap());
            std::fs::write(root.join(f), bytes).unwrap();
        }
        // A symlink to a directory with files: one entry, nothing below it walked or read.
        std::os::unix::fs::symlink(root.join("a"), root.join("e/link")).unwrap();
        want.entries += 1;
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).unwrap();
        for threads in [1, 3] {
            let walk = measure(&Opts {
                what: "walk".into(),
                dir: root.clone(),
                out: None,
                threads: Some(threads),
            })
            .unwrap();
            assert_eq!(
                walk,
                Tally {
                    entries: want.entries,
                    ..Tally::default()
                }
            );
            let capture = measure(&Opts {
                what: "capture".into(),
                dir: root.clone(),
                out: Some(out.clone()),
                threads: Some(threads),
            })
            .unwrap();
            assert_eq!(capture, want);
            let written: u64 = std::fs::read_dir(&out)
                .unwrap()
                .map(|e| e.unwrap().metadata().unwrap().len())
                .sum();
            assert_eq!(written, want.bytes);
        }
        let err = measure(&Opts {
            what: "capture".into(),
            dir: root,
            out: None,
            threads: None,
        })
        .unwrap_err();
        assert!(err.to_string().contains("--out"), "{err}");
    }
}
