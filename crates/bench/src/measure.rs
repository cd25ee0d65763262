//! Whole-process measurement: run a child, time it by wall clock, and read its peak RSS and CPU
//! time from `wait4`'s rusage (which covers the child and every descendant it waited for, so a
//! shell script running several `git` commands reports the largest of them).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// One measured run of a child process.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub wall: Duration,
    /// User plus system CPU time.
    pub cpu: Duration,
    /// Peak resident set size in bytes.
    pub max_rss: u64,
}

fn timeval(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
}

/// Runs `cmd` to completion; fails if it exits non-zero. Returns the sample and its stdout.
pub fn run(cmd: &mut Command) -> Result<(Sample, String)> {
    run_with_stdin(cmd, Stdio::null())
}

/// [`run`] with `stdin` as the child's standard input.
pub fn run_with_stdin(cmd: &mut Command, stdin: Stdio) -> Result<(Sample, String)> {
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("spawning {cmd:?}"))?;
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    std::thread::scope(|s| {
        let e = s.spawn(|| stderr.read_to_end(&mut err));
        let o = stdout.read_to_end(&mut out);
        o.and(e.join().expect("stderr reader"))
    })?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for our own child `pid`, which is
    // reaped here (std's `Child` does not wait on drop, so it is never waited for twice).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e).context("wait4");
        }
    }
    let wall = start.elapsed();
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        bail!(
            "{cmd:?} failed (wait status {status:#x}):\n{}",
            String::from_utf8_lossy(&err)
        );
    }
    let sample = Sample {
        wall,
        cpu: timeval(ru.ru_utime) + timeval(ru.ru_stime),
        max_rss: ru.ru_maxrss as u64 * 1024,
    };
    Ok((sample, String::from_utf8_lossy(&out).into_owned()))
}

/// User plus system CPU time of this process so far (all its threads).
pub fn cpu_self() -> std::time::Duration {
    // SAFETY: an all-zero rusage is valid; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    timeval(ru.ru_utime) + timeval(ru.ru_stime)
}

/// Disk usage of a directory tree: (allocated bytes, apparent bytes). Hard links are counted
/// once per link, which is fine for the stores measured here.
pub fn du(path: &Path) -> Result<(u64, u64)> {
    let meta = std::fs::symlink_metadata(path).with_context(|| format!("{}", path.display()))?;
    let (mut alloc, mut apparent) = (meta.blocks() * 512, meta.len());
    if meta.is_dir() {
        for e in std::fs::read_dir(path)? {
            let (a, b) = du(&e?.path())?;
            alloc += a;
            apparent += b;
        }
    }
    Ok((alloc, apparent))
}

/// The median of the samples (the lower middle for an even count), by wall time; the peak RSS
/// reported is the largest of all samples.
pub fn summarize(samples: &[Sample]) -> Option<Summary> {
    let mut v = samples.to_vec();
    v.sort_by_key(|s| s.wall);
    let mid = *v.get((v.len().checked_sub(1)?) / 2)?;
    Some(Summary {
        median: mid,
        min: v[0].wall,
        max: v[v.len() - 1].wall,
        n: v.len(),
        max_rss: v.iter().map(|s| s.max_rss).max().unwrap_or(0),
    })
}

#[derive(Clone, Copy, Debug)]
pub struct Summary {
    pub median: Sample,
    pub min: Duration,
    pub max: Duration,
    pub n: usize,
    pub max_rss: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_a_child() {
        let (s, out) = run(Command::new("sh").args(["-c", "echo hi"])).unwrap();
        assert_eq!(out.trim(), "hi");
        assert!(s.max_rss > 0);
        assert!(run(&mut Command::new("false")).is_err());
    }

    #[test]
    fn median_and_du() {
        let ms = |m| Sample {
            wall: Duration::from_millis(m),
            cpu: Duration::ZERO,
            max_rss: m,
        };
        let s = summarize(&[ms(3), ms(1), ms(2)]).unwrap();
        assert_eq!(s.median.wall, Duration::from_millis(2));
        assert_eq!(s.max_rss, 3);
        assert!(summarize(&[]).is_none());
        let d = std::env::temp_dir().join(format!("rewind-bench-du-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a"), [0u8; 1000]).unwrap();
        let (_, apparent) = du(&d).unwrap();
        assert!(apparent >= 1000);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
