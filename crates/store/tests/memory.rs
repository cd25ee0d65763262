//! Streaming: storing and reading a large input allocates a few chunks, not the input.
//!
//! It installs a counting global allocator (for the whole test binary) and measures the peak
//! of live heap bytes, which other tests running in parallel would disturb: the measuring test
//! re-runs this binary to run alone in a process of its own.

use crate::common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{random_stream, TestStore};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Peak heap growth while running `f`.
fn peak_during(f: impl FnOnce()) -> usize {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    f();
    PEAK.load(Ordering::Relaxed) - base
}

/// Counts bytes and checks them against the same lazy stream, holding nothing.
struct Compare {
    expect: blake3::OutputReader,
    n: u64,
    buf: Vec<u8>,
}

impl std::io::Write for Compare {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.resize(data.len(), 0);
        self.expect.fill(&mut self.buf);
        assert!(self.buf == data, "content differs near byte {}", self.n);
        self.n += data.len() as u64;
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Set in the process that runs [`large_stream_in_bounded_memory`] alone.
const ALONE: &str = "REWIND_STORE_MEMORY_TEST_ALONE";

/// Runs the test `name` of this binary alone in a child process (no other test allocates
/// there), and fails if it does not pass. Returns false in that child, which runs the body.
fn in_a_process_of_its_own(name: &str) -> bool {
    if std::env::var_os(ALONE).is_some() {
        return false;
    }
    let o = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(ALONE, "1")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success() && out.contains("1 passed"),
        "{name} alone: {:?}\nstdout:\n{out}\nstderr:\n{err}",
        o.status
    );
    eprint!("{err}");
    true
}

#[test]
fn large_stream_in_bounded_memory() {
    if in_a_process_of_its_own("memory::large_stream_in_bounded_memory") {
        return;
    }
    const LEN: u64 = 256 << 20;
    const BOUND: usize = 32 << 20;
    let t = TestStore::new();

    let mut id = None;
    let put = peak_during(|| {
        let w = t.store.writer().unwrap();
        let (i, n) = w.put_content(&mut random_stream(1).take(LEN)).unwrap();
        assert_eq!(n, LEN);
        w.commit().unwrap();
        id = Some(i);
    });
    let id = id.unwrap();
    assert!(
        put < BOUND,
        "put_content of {LEN} bytes peaked at {put} bytes"
    );

    let hash = peak_during(|| {
        let (i, _) = rewind_store::content_id(&mut random_stream(1).take(LEN)).unwrap();
        assert_eq!(i, id);
    });
    assert!(hash < BOUND, "content_id peaked at {hash} bytes");

    let read = peak_during(|| {
        let mut out = Compare {
            expect: random_stream(1),
            n: 0,
            buf: Vec::new(),
        };
        assert_eq!(t.store.read_content(&id, &mut out).unwrap(), LEN);
        assert_eq!(out.n, LEN);
    });
    assert!(read < BOUND, "read_content peaked at {read} bytes");
    eprintln!("peak heap growth: put_content {put}, content_id {hash}, read_content {read}");
}
