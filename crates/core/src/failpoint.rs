//! Named failpoints for crash tests. With the `REWIND_FAILPOINT` environment variable set to a
//! point's name, the process kills itself with SIGKILL when it reaches that point, exactly as
//! if the machine had lost power there (no destructors, no buffered writes flushed). Unset, a
//! failpoint costs one environment lookup.

pub fn hit(name: &str) {
    if let Some(v) = std::env::var_os("REWIND_FAILPOINT") {
        if v.as_encoded_bytes() == name.as_bytes() {
            // SAFETY: raising a signal on our own process.
            unsafe {
                libc::raise(libc::SIGKILL);
            }
        }
    }
}
