//! Named failpoints for crash tests. With the `REWIND_FAILPOINT` environment variable set to a
//! point's name, the process kills itself with SIGKILL when it reaches that point; set to
//! `NAME:N`, when it reaches that point for the N-th time (N from 1), so a test can stop a loop
//! after its (N-1)-th item: part-way through a restore's steps or a patch's files. Unset, a
//! failpoint costs one environment lookup.
//!
//! What a kill there simulates: the process dies at once, with no destructors, no unwinding, no
//! buffered user-space writes flushed and no locks released other than by the kernel. It is
//! *not* a power cut: everything the process already handed to the kernel (written files,
//! renames, the database's unflushed commits) stays in the page cache and is seen by the next
//! command, whether or not it was fsynced. Losses of unflushed data are the store's durability
//! tests' business, not these.
//!
//! Every call site has a name of its own, so that a test names the one place it interrupts.

use std::sync::atomic::{AtomicU64, Ordering};

/// How often the configured point was reached so far in this process.
static HITS: AtomicU64 = AtomicU64::new(0);

pub fn hit(name: &str) {
    let Some(v) = std::env::var_os("REWIND_FAILPOINT") else {
        return;
    };
    let v = v.as_encoded_bytes();
    let (point, nth) = match v.iter().rposition(|b| *b == b':') {
        Some(i) => {
            let n = std::str::from_utf8(&v[i + 1..])
                .ok()
                .and_then(|n| n.parse::<u64>().ok());
            // A malformed count must not silently disable the point: treat it as "never".
            (&v[..i], n.unwrap_or(u64::MAX))
        }
        None => (v, 1),
    };
    if point != name.as_bytes() {
        return;
    }
    if HITS.fetch_add(1, Ordering::Relaxed) + 1 == nth {
        // SAFETY: raising a signal on our own process.
        unsafe {
            libc::raise(libc::SIGKILL);
        }
    }
}
