//! Cold-capture benchmark: stores N random files of 1–8 KiB (the research test tree's shape)
//! through `put_content` from 2 threads, commits, then stores them again (all dedup hits) and
//! reads them all back.
//!
//! `cargo run --release -p rewind-store --example bench_put -- [files] [compressible]`

use std::time::Instant;

/// CPU seconds (user + system) this process has used: wall time on a shared 2-core machine
/// says more about the neighbours than about the store.
fn cpu_secs() -> f64 {
    // SAFETY: getrusage only writes the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

use rewind_store::{Store, StoreConfig};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let compressible = args.get(2).is_some_and(|a| a == "compressible");

    // Deterministic contents: sizes and bytes from a BLAKE3 stream (seeded like mktree.py's
    // tree is, by a fixed seed).
    let mut xof = blake3::Hasher::new().update(b"bench_put").finalize_xof();
    let mut files = Vec::with_capacity(n);
    let mut total = 0u64;
    for i in 0..n {
        let mut s = [0u8; 2];
        xof.fill(&mut s);
        let len = 1024 + (u16::from_le_bytes(s) as usize % 7169);
        let mut data = vec![0u8; len];
        if compressible {
            let line = format!("line {i} of some source file with repetitive content\n");
            for (d, b) in data.iter_mut().zip(line.bytes().cycle()) {
                *d = b;
            }
        } else {
            xof.fill(&mut data);
        }
        total += len as u64;
        files.push(data);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(
        &dir.path().join("packs"),
        &dir.path().join("meta.sqlite"),
        StoreConfig::default(),
    )
    .expect("open");

    let put_all = |label: &str| {
        let t = Instant::now();
        let cpu = cpu_secs();
        let w = store.writer().expect("writer");
        std::thread::scope(|s| {
            for half in files.chunks(n.div_ceil(2)) {
                let w = &w;
                s.spawn(move || {
                    for f in half {
                        w.put_content(&mut f.as_slice()).expect("put");
                    }
                });
            }
        });
        let puts = t.elapsed().as_secs_f64();
        let c = w.commit().expect("commit");
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{label}: {n} files, {:.1} MB in {secs:.3} s ({:.0} MB/s; puts {puts:.3} s, commit {:.3} s; CPU {:.3} s); new objects {}, pack bytes {}",
            total as f64 / 1e6,
            total as f64 / 1e6 / secs,
            secs - puts,
            cpu_secs() - cpu,
            c.new_objects,
            c.new_pack_bytes
        );
    };
    put_all("cold put");
    if args.get(3).is_some_and(|a| a == "putonly") {
        return;
    }
    put_all("warm put (all dedup)");

    let t = Instant::now();
    let ids: Vec<_> = files
        .iter()
        .map(|f| rewind_store::content_id(&mut f.as_slice()).expect("id").0)
        .collect();
    println!("content_id of all: {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    std::thread::scope(|s| {
        for half in ids.chunks(n.div_ceil(2)) {
            let store = &store;
            s.spawn(move || {
                let mut out = Vec::new();
                for id in half {
                    out.clear();
                    store.read_content(id, &mut out).expect("read");
                }
            });
        }
    });
    println!("read all (2 threads): {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let report = store.fsck().expect("fsck");
    println!(
        "fsck: {} objects in {} packs, {} problems, {:.3} s",
        report.objects_checked,
        report.packs_checked,
        report.problems.len(),
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    drop(
        Store::open(
            &dir.path().join("packs"),
            &dir.path().join("meta.sqlite"),
            StoreConfig::default(),
        )
        .expect("reopen"),
    );
    println!("open: {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    println!("{:?}", store.stats().expect("stats"));
}
