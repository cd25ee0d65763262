//! SIGKILL during a capture, at random moments and at every named failpoint: the next command
//! works without manual cleanup and fsck is clean.

use crate::common;

use std::time::Duration;

use common::{noise, text, Env};

fn tree(env: &Env, generation: u64) {
    for d in 0..20u64 {
        let dir = env.root().join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..50u64 {
            // Each generation rewrites a different tenth of the files.
            if generation == 0 || (d * 50 + f) % 10 == generation % 10 {
                std::fs::write(
                    dir.join(format!("f{f}")),
                    noise(generation * 10_000 + d * 100 + f, 8192),
                )
                .unwrap();
            }
        }
    }
}

fn assert_healthy(env: &Env) {
    let o = env.run(&["status"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = env.run(&["fsck"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// SIGKILL at moments spread over `init`'s capture. The kill time adapts: later after a round
/// that died before the capture wrote anything, earlier after one that finished, so that on a
/// slow or loaded machine rounds still land inside the capture; the test fails unless at least
/// one did (a temporary pack it started is there when the process is killed).
#[test]
fn sigkill_at_random_moments_during_capture() {
    let env = Env::new();
    tree(&env, 0);
    let mut delay_ms = 20u64;
    let mut mid_capture = 0;
    let mut round = 0u64;
    // At least 12 rounds; more (bounded) until one landed inside a capture.
    while round < 12 || (mid_capture == 0 && round < 40) {
        round += 1;
        tree(&env, round);
        // A killed round leaves its temporary pack until the next command: only a new one
        // shows that this round's capture was writing.
        let earlier = env.temp_packs();
        let mut child = env
            .cmd(&["init"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Spread the kills around the adapted delay.
        std::thread::sleep(Duration::from_millis(delay_ms + (round * 7) % 20));
        let _ = child.kill();
        let status = child.wait().unwrap();
        if status.code().is_some() {
            delay_ms = delay_ms * 2 / 3;
        } else if env.temp_packs().iter().all(|p| earlier.contains(p)) {
            // Capped: the capture of 1,000 files of 8 KiB takes well under a second even here.
            delay_ms = (delay_ms * 3 / 2 + 5).min(1000);
        } else {
            mid_capture += 1;
        }
    }
    eprintln!("{mid_capture} of {round} kills landed while a capture was writing");
    assert!(
        mid_capture > 0,
        "no kill landed inside a capture in {round} rounds (last delay {delay_ms} ms)"
    );
    assert_healthy(&env);
    let o = env.run(&["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_healthy(&env);
    assert!(
        env.temp_packs().is_empty(),
        "dead writers' temporary packs are removed: {:?}",
        env.temp_packs()
    );
}

#[test]
fn sigkill_at_each_capture_failpoint() {
    for point in ["capture-before-record", "capture-before-state"] {
        let env = Env::new();
        tree(&env, 0);
        assert_eq!(env.run(&["init"]).status.code(), Some(0));
        tree(&env, 3);
        let o = env
            .cmd(&["init"])
            .env("REWIND_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            None,
            "{point}: the failpoint must kill the process: {}",
            text(&o)
        );
        assert_healthy(&env);
        let o = env.run(&["init"]);
        assert_eq!(o.status.code(), Some(0), "{point}: {}", text(&o));
        assert_healthy(&env);
    }
}
