//! The workspace lock: a kernel advisory lock on `<state>/lock` (`flock` through
//! `std::fs::File::lock`). The kernel drops it when the holder dies, so no crash can leave a
//! stale lock behind. Waits are bounded and end in [`Error::Busy`] naming the holder.

use std::fs::{File, TryLockError};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::Error;

/// Held for the duration of one mutation; released on drop (or by the kernel on death).
pub struct WorkspaceLock {
    _file: File,
}

/// Bytes of the holder record at the start of the lock file (padded with spaces).
const HOLDER_LEN: usize = 160;

/// How long a command waits for the lock by default; `REWIND_LOCK_TIMEOUT` (seconds) overrides.
pub fn default_wait() -> Duration {
    std::env::var("REWIND_LOCK_TIMEOUT")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::from_secs(30))
}

pub fn acquire(path: &Path, wait: Duration, what: &str) -> Result<WorkspaceLock, Error> {
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(Error::io("opening", path))?;
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(2);
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = holder.trim();
                    return Err(Error::Busy {
                        holder: if holder.is_empty() {
                            "another rewind process holds the lock".into()
                        } else {
                            format!("held by {holder}")
                        },
                    });
                }
                std::thread::sleep(pause.min(deadline.saturating_duration_since(Instant::now())));
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(TryLockError::Error(e)) => return Err(Error::io("locking", path)(e)),
        }
    }
    // Who holds it, for the "busy" message of others. Informational only: the lock is the flock.
    // A fixed-width record written in place: truncating the file first would cost a block
    // free and reallocation on every command.
    let mut record = format!("pid {} ({what})", std::process::id()).into_bytes();
    record.resize(HOLDER_LEN, b' ');
    let _ = file.write_all_at(&record, 0);
    Ok(WorkspaceLock { _file: file })
}
