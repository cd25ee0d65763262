//! Phase timings on standard error when `REWIND_TRACE` is set (in the spirit of git's
//! `GIT_TRACE_PERFORMANCE`): where one command's time goes, on the machine where it is slow,
//! without a profiler. Off, a phase costs one load of a cached flag.

use std::sync::OnceLock;
use std::time::Instant;

fn start() -> Option<&'static Instant> {
    static START: OnceLock<Option<Instant>> = OnceLock::new();
    START
        .get_or_init(|| std::env::var_os("REWIND_TRACE").map(|_| Instant::now()))
        .as_ref()
}

/// Marks the end of a phase: prints the time since the first mark of this process. The first
/// mark (a front end makes it as it starts) prints 0.
pub fn phase(name: &str) {
    if let Some(t) = start() {
        eprintln!(
            "rewind-trace {:9.3} ms  {name}",
            t.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// Whether phases are printed: to skip building a phase name that costs something.
pub fn on() -> bool {
    start().is_some()
}
