//! Named failpoints for crash tests. With the `REWIND_FAILPOINT` environment variable set to a
//! point's name, the process kills itself with SIGKILL when it reaches that point; set to
//! `NAME:N`, when it reaches that point for the N-th time (N from 1), so a test can stop a loop
//! after its (N-1)-th item: part-way through a restore's steps or a patch's files.
//!
//! Only in builds with the `failpoints` cargo feature (off by default; the tests turn it on
//! through the dev-dependencies of `rewind-cli`, and `cargo build --features failpoints` makes a
//! binary for crash tests by hand). Without it [`hit`] is an empty inline function: a release
//! binary reads no environment variable at these sites and does not contain the variable's name.
//! With it, an unset variable costs one environment lookup per site.
//!
//! What a kill there simulates: the process dies at once, with no destructors, no unwinding, no
//! buffered user-space writes flushed and no locks released other than by the kernel. It is
//! *not* a power cut: everything the process already handed to the kernel (written files,
//! renames, the database's unflushed commits) stays in the page cache and is seen by the next
//! command, whether or not it was fsynced. Losses of unflushed data are the store's durability
//! tests' business, not these.
//!
//! Every call site has a name of its own, so that a test names the one place it interrupts.

/// Without the `failpoints` feature: nothing, and inlined away.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn hit(_name: &str) {}

/// Kills the process with SIGKILL if `REWIND_FAILPOINT` names this point (and this is its
/// N-th hit, for `NAME:N`).
#[cfg(feature = "failpoints")]
pub fn hit(name: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// How often the configured point was reached so far in this process.
    static HITS: AtomicU64 = AtomicU64::new(0);

    let Some(v) = std::env::var_os("REWIND_FAILPOINT") else {
        return;
    };
    let Some(nth) = fires_on(v.as_encoded_bytes(), name) else {
        return;
    };
    if HITS.fetch_add(1, Ordering::Relaxed) + 1 == nth {
        // SAFETY: raising a signal on our own process.
        unsafe {
            libc::raise(libc::SIGKILL);
        }
    }
}

/// For a `REWIND_FAILPOINT` value: at which hit of the point `name` the process dies (from 1),
/// or `None` if the value names another point. A malformed count must not silently disable the
/// point, nor fire it at a hit the test did not ask for: it means "never" (`u64::MAX`).
#[cfg(feature = "failpoints")]
fn fires_on(value: &[u8], name: &str) -> Option<u64> {
    let (point, nth) = match value.iter().rposition(|b| *b == b':') {
        Some(i) => {
            let n = std::str::from_utf8(&value[i + 1..])
                .ok()
                .and_then(|n| n.parse::<u64>().ok());
            (&value[..i], n.unwrap_or(u64::MAX))
        }
        None => (value, 1),
    };
    (point == name.as_bytes()).then_some(nth)
}

#[cfg(all(test, feature = "failpoints"))]
mod tests {
    use super::fires_on;

    #[test]
    fn a_value_names_a_point_and_optionally_its_hit() {
        assert_eq!(
            fires_on(b"restore-after-step", "restore-after-step"),
            Some(1)
        );
        assert_eq!(
            fires_on(b"restore-after-step:3", "restore-after-step"),
            Some(3)
        );
        assert_eq!(
            fires_on(b"restore-after-step", "restore-after-journal"),
            None
        );
        assert_eq!(
            fires_on(b"restore-after-step:3", "restore-after-journal"),
            None
        );
        // A prefix of a name is another name.
        assert_eq!(fires_on(b"restore-after", "restore-after-step"), None);
        // A malformed count never fires.
        assert_eq!(
            fires_on(b"restore-after-step:x", "restore-after-step"),
            Some(u64::MAX)
        );
        assert_eq!(
            fires_on(b"restore-after-step:", "restore-after-step"),
            Some(u64::MAX)
        );
    }
}
