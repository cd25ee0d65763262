//! Where the time of a guarded write goes, in process: opening the workspace, the guard check,
//! and the guarded write (begin epoch, write, settle, refresh), medians over N runs.
//!
//! usage: guard_phases ROOT REL [N]   (REWIND_HOME as for the CLI; REL read once first)

use std::time::{Duration, Instant};

use rewind_core::{OpenOptions, ToolCall, Workspace};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let root = std::path::Path::new(&args[1]);
    let rel = args[2].as_bytes();
    let n: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(30);
    let (mut open, mut check, mut write, mut begin, mut end) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let session = "bench";
    {
        let ws = Workspace::open(root, &OpenOptions::default()).unwrap();
        ws.read_file(session, rel, None).unwrap();
    }
    for i in 0..n {
        let content: Vec<u8> = (0..4096u32)
            .map(|k| (k.wrapping_mul(2654435761).wrapping_add(i as u32 * 97) >> 13) as u8)
            .collect();
        let t = Instant::now();
        let ws = Workspace::open(root, &OpenOptions::default()).unwrap();
        open.push(t.elapsed());
        let t = Instant::now();
        ws.check_write(session, rel).unwrap();
        check.push(t.elapsed());
        let t = Instant::now();
        ws.write_file(session, rel, &content, &ToolCall::named("write"))
            .unwrap();
        write.push(t.elapsed());
        // The epoch machinery alone (no guard, no write, no fingerprint).
        let spec = rewind_core::EpochSpec {
            tool: Some("probe".into()),
            paths: vec![rel.to_vec()],
            process_owned: true,
            owner_pid: None,
            ..Default::default()
        };
        let t = Instant::now();
        let e = ws.begin_epoch(session, &spec).unwrap();
        begin.push(t.elapsed());
        let t = Instant::now();
        ws.end_epoch(session, Some(&e.id), false).unwrap();
        end.push(t.elapsed());
    }
    println!(
        "medians over {n}: open {:?}  check {:?}  guarded write {:?}  (begin_epoch alone {:?}, end_epoch alone {:?})",
        median(open),
        median(check),
        median(write),
        median(begin),
        median(end)
    );
}
