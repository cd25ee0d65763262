//! SIGKILL during a capture, at random moments and at every named failpoint: the next command
//! works without manual cleanup and fsck is clean.

mod common;

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

#[test]
fn sigkill_at_random_moments_during_capture() {
    let env = Env::new();
    tree(&env, 0);
    for round in 1..=12u64 {
        tree(&env, round);
        let mut child = env
            .cmd(&["init"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Spread the kill over the capture: from right after exec to well into hashing.
        std::thread::sleep(Duration::from_millis((round * 7) % 60));
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_healthy(&env);
    let o = env.run(&["init"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_healthy(&env);
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
